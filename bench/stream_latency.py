"""Streaming latency through the production stack, end to end.

The path measured: a provider streams a reply at a fixed rate → a Celery worker
(threads pool) runs the turn → the Redis channel layer → daphne → a WebSocket
client (the `websockets` library, speaking docs/protocol.md). N conversations
stream at once (N = 1, 50 and 200), each followed by its own socket.

The provider is this script's own small SSE server (a thread of this process), so
it stamps each chunk with the moment it was written: every content chunk is the text
``[r:i] `` (request r, chunk i), and a client that finds it in a frame knows that
chunk's latency. Clients and provider share this process's clock. Printed:

- delta latency: provider chunk written → client frame received, p50 and p99 over
  every chunk of every conversation of the round; the median over rounds;
- frames per reply: WebSocket frames a client received for one turn (all events),
  and how many of them were ``llm_deltas``;
- worker CPU per streamed chunk (user + system time of the worker process over the
  round, divided by the content chunks streamed) and the worker's and daphne's
  resident memory after the round (and idle, before the first);
- submit → first delta, minus the provider's own delay before its first byte: a
  ``send`` frame written → the first ``llm_deltas`` frame received, less (first
  chunk written - request received) at the provider. Measured alone (N = 1, one
  turn at a time) and under each N;
- beside them, in the same run: the layer's own ``group_send`` → ``receive`` on the
  same Redis, awaited in a running loop, the floor of the layer hop.

Each figure is measured on both channels-redis layers (``--layers``), each with a
worker and a daphne of its own, one after the other in the same run: the Pub/Sub
layer (the project's default) and the list-based ``RedisChannelLayer``.

An idle conversation holds no process and no memory: between turns nothing runs
for it (no process, task or socket per conversation; its rows are all there is),
which the idle worker memory before and after the rounds shows.

Needs PostgreSQL (database ``bench_stream``, created if missing) and Redis on
127.0.0.1, as the test suite does. Run from the repository root::

    .venv/bin/python bench/stream_latency.py            # N = 1, 50, 200 (~3 min)
    .venv/bin/python bench/stream_latency.py --quick    # N = 1, 20 (~1 min)

A benchmark, not a test: it prints figures and asserts no thresholds. Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.stack import (
    LAYERS,
    REDIS_URL,
    connect,
    cpu_seconds,
    make_conversations,
    make_user,
    percentile,
    prepare_database,
    rss_mb,
    setup_django,
    stack_env,
    start_daphne,
    start_worker,
    stop,
)

DATABASE = "bench_stream"
SESSION = uuid.uuid4().hex[:8]
PREFIX = QUEUE = f"sagents-bench-{SESSION}"
MODEL = "openai/bench"
TOKEN = re.compile(r"\[(\d+):(\d+)\] ")


# The provider ------------------------------------------------------------------
class Provider:
    """An OpenAI-compatible streaming endpoint that stamps every chunk it writes."""

    def __init__(self, *, chunks: int, interval: float, first_byte: float) -> None:
        self.chunks = chunks
        self.interval = interval
        self.first_byte = first_byte
        self.sent: dict[tuple[int, int], float] = {}
        self.received: dict[int, float] = {}
        self.first: dict[int, float] = {}
        self.count = 0
        self.port = 0
        self._ready = threading.Event()

    @property
    def params(self) -> dict[str, Any]:
        return {"api_base": f"http://127.0.0.1:{self.port}/v1", "api_key": "bench"}

    def start(self) -> Provider:
        threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True).start()
        self._ready.wait(10)
        return self

    async def _serve(self) -> None:
        server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await server.serve_forever()

    async def _connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode("latin-1").split("\r\n"):
                    name, _, value = line.partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                await reader.readexactly(length)
                await self._stream(writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _stream(self, writer: asyncio.StreamWriter) -> None:
        r = self.count = self.count + 1
        self.received[r] = time.perf_counter()
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n"
        )
        await asyncio.sleep(self.first_byte)
        await self._event(writer, {"role": "assistant", "content": ""})
        for i in range(self.chunks):
            if i:
                await asyncio.sleep(self.interval)
            await self._event(writer, {"content": f"[{r}:{i}] "})
            now = time.perf_counter()
            self.sent[(r, i)] = now
            self.first.setdefault(r, now)
        await self._event(writer, {}, finish="stop")
        await self._write(writer, b"data: [DONE]\n\n")
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def _event(
        self, writer: asyncio.StreamWriter, delta: dict[str, Any], finish: Any = None
    ) -> None:
        chunk = {
            "id": "bench",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "bench",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        await self._write(writer, f"data: {json.dumps(chunk)}\n\n".encode())

    async def _write(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(b"%x\r\n%s\r\n" % (len(data), data))
        await writer.drain()


# Clients ---------------------------------------------------------------------------
@dataclass
class Follow:
    conversation: str
    socket: Any
    submitted: float = 0.0
    first_delta: float = 0.0
    frames: int = 0
    delta_frames: int = 0
    latencies: list[float] = field(default_factory=list)
    request: int = 0
    finished: float = 0.0
    done: asyncio.Event = field(default_factory=asyncio.Event)


async def reader(follow: Follow, provider: Provider) -> None:
    async for raw in follow.socket:
        now = time.perf_counter()
        frame = json.loads(raw)
        if "event" not in frame or not follow.submitted:
            continue
        follow.frames += 1
        if frame["event"] == "llm_deltas":
            follow.delta_frames += 1
            follow.first_delta = follow.first_delta or now
            for delta in frame["data"]["deltas"]:
                for r, i in TOKEN.findall(delta.get("content") or ""):
                    follow.request = int(r)
                    follow.latencies.append(now - provider.sent[(int(r), int(i))])
        elif frame["event"] == "run_finished":
            follow.finished = now
            follow.done.set()


async def open_follows(n: int, port: int, cookie: str) -> list[Follow]:
    from asgiref.sync import sync_to_async

    conversations = await sync_to_async(make_conversations)(USER, n)
    follows = []
    for pk in conversations:
        socket = await connect(port, cookie)
        await socket.send(json.dumps({"action": "subscribe", "conversation": pk}))
        reply = json.loads(await socket.recv())
        assert reply.get("ok"), reply
        follows.append(Follow(pk, socket))
    return follows


USER: Any = None


async def one_round(
    n: int, port: int, cookie: str, provider: Provider, worker: int, daphne: int
) -> dict[str, Any]:
    follows = await open_follows(n, port, cookie)
    readers = [asyncio.ensure_future(reader(f, provider)) for f in follows]
    cpu_before = cpu_seconds(worker)
    sent_before = len(provider.sent)
    for f in follows:
        f.submitted = time.perf_counter()
        await f.socket.send(
            json.dumps({"action": "send", "conversation": f.conversation, "text": "go"})
        )
    async with asyncio.timeout(300):
        await asyncio.gather(*(f.done.wait() for f in follows))
    chunks = len(provider.sent) - sent_before
    cpu = cpu_seconds(worker) - cpu_before
    for f in follows:
        await f.socket.close()
    for task in readers:
        task.cancel()
    latencies = sorted(x for f in follows for x in f.latencies)
    overheads = [
        (f.first_delta - f.submitted)
        - (provider.first[f.request] - provider.received[f.request])
        for f in follows
    ]
    return {
        "p50": percentile(latencies, 50),
        "p99": percentile(latencies, 99),
        "frames": statistics.median(f.frames for f in follows),
        "delta_frames": statistics.median(f.delta_frames for f in follows),
        "cpu_per_chunk": cpu / chunks if chunks else 0.0,
        "chunks": chunks,
        "submit_p50": percentile(sorted(overheads), 50),
        "submit_p99": percentile(sorted(overheads), 99),
        "worker_mb": rss_mb(worker),
        "daphne_mb": rss_mb(daphne),
    }


async def cancel_latency(
    port: int, cookie: str, provider: Provider, worker: int, daphne: int
) -> float:
    """A ``cancel`` frame written mid-stream → the ``run_finished`` frame received
    (the cancel crosses daphne → Redis → the worker's control channel)."""
    [follow] = await open_follows(1, port, cookie)
    reading = asyncio.ensure_future(reader(follow, provider))
    follow.submitted = time.perf_counter()
    message = {"action": "send", "conversation": follow.conversation, "text": "go"}
    await follow.socket.send(json.dumps(message))
    while follow.delta_frames < 5:
        await asyncio.sleep(0.005)
    asked = time.perf_counter()
    cancel = {"action": "cancel", "conversation": follow.conversation}
    await follow.socket.send(json.dumps(cancel))
    async with asyncio.timeout(30):
        await follow.done.wait()
    await follow.socket.close()
    reading.cancel()
    return follow.finished - asked


async def layer_floor(backend: str, samples: int) -> tuple[float, float]:
    """channels-redis group_send → receive, awaited in a running loop."""
    from django.utils.module_loading import import_string

    layer = import_string(backend)(hosts=[REDIS_URL], prefix=PREFIX + "-floor")
    channel = await layer.new_channel()
    await layer.group_add("floor", channel)
    receiving = asyncio.ensure_future(layer.receive(channel))
    await asyncio.sleep(0.05)  # the Pub/Sub layer subscribes on first receive
    await layer.group_send("floor", {"type": "x"})
    await receiving
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        await layer.group_send("floor", {"type": "x", "data": "y" * 200})
        await layer.receive(channel)
        times.append(time.perf_counter() - start)
    await layer.group_discard("floor", channel)
    times.sort()
    return percentile(times, 50), percentile(times, 99)


async def main(args: argparse.Namespace) -> None:
    global USER
    provider = Provider(
        chunks=args.chunks, interval=args.interval / 1000, first_byte=0.05
    ).start()
    overrides = {
        "FACTORY": "tests.runtime.agents.build_agent",
        "EXECUTOR": "celery",
        "MODEL": MODEL,
        "MODEL_PARAMS": provider.params,
    }
    env = stack_env(database=DATABASE, prefix=PREFIX, queue=QUEUE, overrides=overrides)
    prepare_database(DATABASE)
    setup_django(env)
    from asgiref.sync import sync_to_async

    USER, cookie = await sync_to_async(make_user)(f"bench-{uuid.uuid4().hex[:6]}")
    for name in args.layers:
        await measure(args, name, {**env, "CHANNEL_LAYER_BACKEND": LAYERS[name]},
                      provider, cookie)  # fmt: skip


async def measure(
    args: argparse.Namespace,
    name: str,
    env: dict[str, str],
    provider: Provider,
    cookie: str,
) -> None:
    """Every figure on one channel layer: its own worker and daphne."""
    logs = Path(f"/tmp/sagents-bench-{SESSION}-{name}")
    logs.mkdir()
    port = 8700 + os.getpid() % 200
    worker = start_worker(
        env, queue=QUEUE, concurrency=max(args.n) + 10, log=logs / "worker.log"
    )
    daphne = start_daphne(env, port=port, log=logs / "daphne.log")
    pids = worker.pid, daphne.pid
    try:
        idle = (rss_mb(worker.pid), rss_mb(daphne.pid))
        floor = [await layer_floor(LAYERS[name], args.floor) for _ in range(3)]
        # Warm-up: the worker's first turn imports and connects.
        await one_round(1, port, cookie, provider, *pids)
        alone = [
            await one_round(1, port, cookie, provider, *pids) for _ in range(args.alone)
        ]
        cancels = sorted(
            [await cancel_latency(port, cookie, provider, *pids) for _ in range(5)]
        )
        spy = None
        if args.profile:  # py-spy (pip install py-spy) samples the worker
            spy = subprocess.Popen(
                ["py-spy", "record", "-p", str(worker.pid), "-r", "200", "-f", "raw",
                 "-o", f"{args.profile}.{name}", "--nonblocking"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        rows = []
        for n in args.n:
            rounds = [
                await one_round(n, port, cookie, provider, *pids)
                for _ in range(args.rounds)
            ]
            rows.append((n, rounds))
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(30)
        after = (rss_mb(worker.pid), rss_mb(daphne.pid))
        report(args, name, floor, alone, rows, idle, after)
        print(
            f"cancel frame -> run_finished frame, mid-stream ({len(cancels)} turns): "
            f"median {statistics.median(cancels) * 1000:.1f} ms, "
            f"worst {cancels[-1] * 1000:.1f} ms"
        )
    finally:
        stop(daphne, worker)


def med(rounds: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in rounds)


def report(
    args: argparse.Namespace,
    layer: str,
    floor: list[tuple[float, float]],
    alone: list[dict[str, Any]],
    rows: list[tuple[int, list[dict[str, Any]]]],
    idle: tuple[float, float],
    after: tuple[float, float],
) -> None:
    ms = 1000
    print(f"\n## {LAYERS[layer]}")
    print(
        f"\nProvider: {args.chunks} chunks per reply, one every {args.interval} ms; "
        f"{args.rounds} rounds per N (median of rounds)."
    )
    f50 = statistics.median(f[0] for f in floor) * ms
    f99 = statistics.median(f[1] for f in floor) * ms
    print(f"this layer's group_send -> receive: p50 {f50:.2f} ms, p99 {f99:.2f} ms")
    s50 = statistics.median(r["submit_p50"] for r in alone) * ms
    s99 = max(r["submit_p50"] for r in alone) * ms
    print(
        f"submit -> first delta, less the provider's first-byte delay, one turn at a "
        f"time ({len(alone)} turns): median {s50:.1f} ms, worst {s99:.1f} ms"
    )
    print(
        "\n| N | delta p50 ms | delta p99 ms | frames/reply (deltas) | worker CPU "
        "ms/chunk | submit->1st delta p50 / p99 ms | worker MB | daphne MB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for n, rounds in rows:
        print(
            f"| {n} | {med(rounds, 'p50') * ms:.1f} | {med(rounds, 'p99') * ms:.1f} "
            f"| {med(rounds, 'frames'):.0f} ({med(rounds, 'delta_frames'):.0f}) "
            f"| {med(rounds, 'cpu_per_chunk') * ms:.3f} "
            f"| {med(rounds, 'submit_p50') * ms:.1f} / "
            f"{med(rounds, 'submit_p99') * ms:.1f} "
            f"| {rounds[-1]['worker_mb']:.0f} | {rounds[-1]['daphne_mb']:.0f} |"
        )
    print(
        f"\nIdle memory: worker {idle[0]:.0f} MB before the rounds, {after[0]:.0f} MB "
        f"after; daphne {idle[1]:.0f} MB before, {after[1]:.0f} MB after."
    )


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--n", type=int, nargs="+", default=[1, 50, 200])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--alone", type=int, default=10)
    parser.add_argument("--chunks", type=int, default=50)
    parser.add_argument("--interval", type=float, default=20.0, help="ms")
    parser.add_argument("--floor", type=int, default=200)
    parser.add_argument(
        "--layers", nargs="+", choices=sorted(LAYERS), default=["pubsub", "core"]
    )
    parser.add_argument(
        "--profile", metavar="FILE", help="py-spy's collapsed stacks of the worker"
    )
    args = parser.parse_args()
    if args.quick:
        args.n, args.rounds, args.alone, args.floor = [1, 20], 1, 3, 50
    return args


if __name__ == "__main__":
    asyncio.run(main(parse()))
