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
- worker CPU per streamed chunk (user + system time of the worker processes over
  the round, divided by the content chunks streamed), the busiest worker process's
  share of that CPU (how evenly the turns spread), the cores the workers used
  while the turns ran (one process is held to one by the GIL), and the workers' (summed) and
  daphne's resident memory after the round (and idle, before the first);
- submit → first delta, minus the provider's own delay before its first byte: a
  ``send`` frame written → the first ``llm_deltas`` frame received, less (first
  chunk written - request received) at the provider. Measured alone (N = 1, one
  turn at a time) and under each N;
- beside them, in the same run: the layer's own ``group_send`` → ``receive`` on the
  same Redis, awaited in a running loop, the floor of the layer hop.

Each figure is measured on both channels-redis layers (``--layers``), one after the
other in the same run: the Pub/Sub layer (the project's default) and the list-based
``RedisChannelLayer``. On each layer, one stack per ``--workers`` count (1 and 2
worker processes, each with the same thread concurrency, as a site runs one per
core) runs side by side: each has its Celery queue, its worker processes and a
daphne of its own, all up at once, and the rounds alternate between them, so that
the machine's other load weighs on both alike. The ratios (2 processes / 1) are
of medians measured in the same run. The machine's load average is printed too.

An idle conversation holds no process and no memory: between turns nothing runs
for it (no process, task or socket per conversation; its rows are all there is),
which the idle worker memory before and after the rounds shows.

Needs PostgreSQL (database ``bench_stream``, created if missing) and Redis on
127.0.0.1, as the test suite does. Run from the repository root::

    .venv/bin/python bench/stream_latency.py            # N = 1, 50, 200 (~10 min)
    .venv/bin/python bench/stream_latency.py --quick    # N = 1, 20 (~2 min)
    .venv/bin/python bench/stream_latency.py --layers pubsub --workers 1 2 --n 1 50

A benchmark, not a test: it prints figures and asserts no thresholds. Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.stack import (
    LAYERS,
    REDIS_URL,
    Follow,
    Provider,
    cpu_seconds,
    free_port,
    make_conversations,
    make_user,
    percentile,
    reader,
    rss_mb,
    stamped_stack,
    start_server,
    start_workers,
    stop,
    subscribe,
)

DATABASE = os.environ.get("BENCH_DATABASE", "bench_stream")
SESSION = uuid.uuid4().hex[:8]
PREFIX = QUEUE = f"sagents-bench-{SESSION}"
USER: Any = None


@dataclass(kw_only=True)
class Stack:
    """One worker configuration: its queue, its worker processes, its daphne."""

    processes: int
    port: int
    workers: list[Any]
    daphne: Any

    @property
    def worker_pids(self) -> list[int]:
        return [w.pid for w in self.workers]

    def workers_mb(self) -> float:
        return sum(rss_mb(pid) for pid in self.worker_pids)


def start_stack(env: dict[str, str], *, processes: int, concurrency: int,
                logs: Path) -> Stack:  # fmt: skip
    queue = f"{QUEUE}-{processes}"
    env = {**env, "SAGENTS_TEST_QUEUE": queue}
    logs.mkdir(parents=True)
    workers = start_workers(env, queue=queue, concurrency=concurrency,
                            processes=processes, logs=logs)  # fmt: skip
    port = free_port()
    daphne = start_server(env, port=port, log=logs / "daphne.log")
    return Stack(processes=processes, port=port, workers=workers, daphne=daphne)


async def open_follows(n: int, port: int, cookie: str) -> list[Follow]:
    from asgiref.sync import sync_to_async

    conversations = await sync_to_async(make_conversations)(USER, n)
    return [await subscribe(port, cookie, pk) for pk in conversations]


async def one_round(
    n: int, stack: Stack, cookie: str, provider: Provider
) -> dict[str, Any]:
    follows = await open_follows(n, stack.port, cookie)
    readers = [asyncio.ensure_future(reader(f, provider)) for f in follows]
    cpu_before = [cpu_seconds(pid) for pid in stack.worker_pids]
    sent_before = len(provider.sent)
    started = time.perf_counter()
    for f in follows:
        f.submitted = time.perf_counter()
        await f.socket.send(
            json.dumps({"action": "send", "conversation": f.conversation, "text": "go"})
        )
    async with asyncio.timeout(300):
        await asyncio.gather(*(f.done.wait() for f in follows))
    chunks = len(provider.sent) - sent_before
    used = [
        cpu_seconds(pid) - before
        for pid, before in zip(stack.worker_pids, cpu_before, strict=True)
    ]
    cpu = sum(used)
    elapsed = time.perf_counter() - started
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
        "busiest": max(used) / cpu if cpu else 1.0,
        "cores": cpu / elapsed,
        "chunks": chunks,
        "submit_p50": percentile(sorted(overheads), 50),
        "submit_p99": percentile(sorted(overheads), 99),
        "worker_mb": stack.workers_mb(),
        "daphne_mb": rss_mb(stack.daphne.pid),
    }


async def cancel_latency(stack: Stack, cookie: str, provider: Provider) -> float:
    """A ``cancel`` frame written mid-stream → the ``run_finished`` frame received
    (the cancel crosses daphne → Redis → the worker's control channel)."""
    [follow] = await open_follows(1, stack.port, cookie)
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
    provider, env = stamped_stack(
        database=DATABASE, prefix=PREFIX, queue=QUEUE, chunks=args.chunks,
        interval=args.interval / 1000,
    )  # fmt: skip
    from asgiref.sync import sync_to_async

    USER, cookie = await sync_to_async(make_user)(f"bench-{uuid.uuid4().hex[:6]}")
    print(f"# bench/stream_latency.py on {os.cpu_count()} cores")
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
    """Every figure on one channel layer: a stack per worker-process count, up side
    by side, the rounds alternating between them."""
    logs = Path(f"/tmp/sagents-bench-{SESSION}-{name}")
    stacks: list[Stack] = []
    try:
        for processes in args.workers:
            stacks.append(
                start_stack(env, processes=processes, concurrency=max(args.n) + 10,
                            logs=logs / f"workers-{processes}")
            )  # fmt: skip
        loadavg = [os.getloadavg()[0]]
        idle = {s.processes: (s.workers_mb(), rss_mb(s.daphne.pid)) for s in stacks}
        floor = [await layer_floor(LAYERS[name], args.floor) for _ in range(3)]
        for stack in stacks:  # warm-up: each worker's first turn imports, connects
            await asyncio.gather(
                *(one_round(1, stack, cookie, provider) for _ in stack.workers)
            )
        alone: dict[int, list[dict[str, Any]]] = {s.processes: [] for s in stacks}
        cancels: dict[int, list[float]] = {s.processes: [] for s in stacks}
        for _ in range(args.alone):
            for stack in stacks:
                alone[stack.processes].append(
                    await one_round(1, stack, cookie, provider)
                )
        for _ in range(5):
            for stack in stacks:
                cancels[stack.processes].append(
                    await cancel_latency(stack, cookie, provider)
                )
        spy = None
        if args.profile:  # py-spy (pip install py-spy) samples the first worker
            spy = subprocess.Popen(
                ["py-spy", "record", "-p", str(stacks[0].worker_pids[0]), "-r", "200",
                 "-f", "raw", "-o", f"{args.profile}.{name}", "--nonblocking",
                 *(["--gil"] if args.profile_gil else [])],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        rows: dict[tuple[int, int], list[dict[str, Any]]] = {}
        for n in args.n:
            for _ in range(args.rounds):
                for stack in stacks:
                    rows.setdefault((n, stack.processes), []).append(
                        await one_round(n, stack, cookie, provider)
                    )
            loadavg.append(os.getloadavg()[0])
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(30)
        after = {s.processes: (s.workers_mb(), rss_mb(s.daphne.pid)) for s in stacks}
        report(args, name, floor, loadavg)
        for stack in stacks:
            k = stack.processes
            report_stack(args, k, alone[k], cancels[k], rows, idle[k], after[k])
        if len(stacks) > 1:
            report_ratios(args, rows)
    finally:
        for stack in stacks:
            stop(stack.daphne, *stack.workers)


def med(rounds: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in rounds)


def report(
    args: argparse.Namespace,
    layer: str,
    floor: list[tuple[float, float]],
    loadavg: list[float],
) -> None:
    ms = 1000
    print(f"\n## {LAYERS[layer]}")
    print(
        f"\nProvider: {args.chunks} chunks per reply, one every {args.interval} ms; "
        f"{args.rounds} rounds per N (median of rounds). Load average (1 min) "
        f"{', '.join(f'{x:.1f}' for x in loadavg)} (before the rounds, after each N)."
    )
    f50 = statistics.median(f[0] for f in floor) * ms
    f99 = statistics.median(f[1] for f in floor) * ms
    print(f"this layer's group_send -> receive: p50 {f50:.2f} ms, p99 {f99:.2f} ms")


def report_stack(
    args: argparse.Namespace,
    processes: int,
    alone: list[dict[str, Any]],
    cancels: list[float],
    rows: dict[tuple[int, int], list[dict[str, Any]]],
    idle: tuple[float, float],
    after: tuple[float, float],
) -> None:
    ms = 1000
    print(f"\n### {processes} worker process{'es' if processes > 1 else ''}\n")
    s50 = statistics.median(r["submit_p50"] for r in alone) * ms
    s99 = max(r["submit_p50"] for r in alone) * ms
    print(
        f"submit -> first delta, less the provider's first-byte delay, one turn at a "
        f"time ({len(alone)} turns): median {s50:.1f} ms, worst {s99:.1f} ms"
    )
    cancels = sorted(cancels)
    print(
        f"cancel frame -> run_finished frame, mid-stream ({len(cancels)} turns): "
        f"median {statistics.median(cancels) * ms:.1f} ms, "
        f"worst {cancels[-1] * ms:.1f} ms"
    )
    print(
        "\n| N | delta p50 ms | delta p99 ms | frames/reply (deltas) | worker CPU "
        "ms/chunk | workers' cores | busiest process's CPU share | submit->1st "
        "delta p50 / p99 ms | workers MB | daphne MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in args.n:
        rounds = rows[(n, processes)]
        print(
            f"| {n} | {med(rounds, 'p50') * ms:.1f} | {med(rounds, 'p99') * ms:.1f} "
            f"| {med(rounds, 'frames'):.0f} ({med(rounds, 'delta_frames'):.0f}) "
            f"| {med(rounds, 'cpu_per_chunk') * ms:.3f} "
            f"| {med(rounds, 'cores'):.2f} "
            f"| {med(rounds, 'busiest') * 100:.0f}% "
            f"| {med(rounds, 'submit_p50') * ms:.1f} / "
            f"{med(rounds, 'submit_p99') * ms:.1f} "
            f"| {rounds[-1]['worker_mb']:.0f} | {rounds[-1]['daphne_mb']:.0f} |"
        )
    print(
        f"\nIdle memory: workers {idle[0]:.0f} MB before the rounds, {after[0]:.0f} MB "
        f"after; daphne {idle[1]:.0f} MB before, {after[1]:.0f} MB after."
    )


def report_ratios(
    args: argparse.Namespace, rows: dict[tuple[int, int], list[dict[str, Any]]]
) -> None:
    """Each figure's median with the most processes over its median with the
    fewest: below 1 is better (faster, or less CPU per chunk)."""
    low, high = min(args.workers), max(args.workers)
    keys = ("p50", "p99", "cpu_per_chunk", "submit_p50", "submit_p99")
    print(
        f"\n### {high} worker processes / {low}, same run (below 1: better)\n\n"
        "| N | delta p50 | delta p99 | worker CPU/chunk | submit->1st delta p50 "
        "| submit->1st delta p99 |\n|---|---|---|---|---|---|"
    )
    for n in args.n:
        ratios = [med(rows[(n, high)], k) / med(rows[(n, low)], k) for k in keys]
        print(f"| {n} | " + " | ".join(f"{r:.2f}" for r in ratios) + " |")


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
        "--workers", type=int, nargs="+", default=[1, 2],
        help="worker processes per stack: one stack per count, side by side",
    )  # fmt: skip
    parser.add_argument(
        "--profile", metavar="FILE", help="py-spy's collapsed stacks of the worker"
    )
    parser.add_argument(
        "--profile-gil", action="store_true",
        help="sample only the thread holding the GIL (the worker's Python CPU)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.quick:
        args.n, args.rounds, args.alone, args.floor = [1, 20], 1, 3, 50
    return args


if __name__ == "__main__":
    asyncio.run(main(parse()))
