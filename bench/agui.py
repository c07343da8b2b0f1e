"""The AG-UI endpoint beside our JSON socket: CPU per streamed event, and how long a
reconnect takes to replay.

The stack (``bench/stack.py``): PostgreSQL, the Redis Pub/Sub channel layer, one
Celery worker, the stamping provider (``--chunks`` chunks a reply, one every
``--interval`` ms), and TWO daphne processes: daphne A serves one JSON socket
(``ws/sagents/``, subscribed to the conversation), daphne B one AG-UI SSE stream
(``GET agui/<thread>/``) of the same conversation. The message is sent from this
process (``agent_server.add_message``), so neither daphne does anything but carry
the run's events to its one client. Each round:

- CPU per event: each daphne's CPU time (``/proc``) from just before the message
  is sent to the moment both clients saw the run end, divided by the number of our
  events of the run (its ``seq`` span: the same events reach both). The figure is a
  daphne's whole cost per event: the layer's receive, the consumer or the stream
  (ordering, translation, encoding), the write. ``agui/socket`` is the ratio of
  the two in the same round (the target is within 1.5x).
- reconnect (rounds of their own, after the CPU rounds: a reconnect's work would
  count in daphne B's CPU): while the reply streams, ``--reconnects`` times, a new
  ``GET agui/<thread>/`` with ``Last-Event-ID: 1`` (events were missed: the
  snapshot path, the costlier one): the time from
  sending the request to the first event read (``RUN_STARTED``) and to the first
  replayed event of the message in flight (its first ``TEXT_MESSAGE_CONTENT``:
  the snapshot and the text so far come before the live rest).

Medians over ``--rounds`` rounds (the first one, a warm-up, is not counted). Needs
PostgreSQL (database ``bench_agui``, made anew) and Redis on 127.0.0.1. Run from the
repository root::

    .venv/bin/python bench/agui.py            # ~1 minute
    .venv/bin/python bench/agui.py --quick

A benchmark, not a test: it prints figures and asserts no thresholds. Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.stack import (
    connect,
    cpu_seconds,
    free_port,
    make_conversations,
    make_user,
    stamped_stack,
    start_server,
    start_worker,
    stop,
)

DATABASE = "bench_agui"
SESSION = uuid.uuid4().hex[:8]
PREFIX = QUEUE = f"sagents-bench-agui-{SESSION}"


async def socket_client(port: int, cookie: str, cid: str, ready: Any) -> dict[str, Any]:
    """Our JSON socket on daphne A: subscribe, then read to ``run_finished``."""
    socket = await connect(port, cookie)
    await socket.send(json.dumps({"action": "subscribe", "conversation": cid}))
    seqs: list[int] = []
    ready.set()
    async for raw in socket:
        frame = json.loads(raw)
        if isinstance(frame.get("seq"), int) and frame.get("event") != "in_flight":
            seqs.append(frame["seq"])
        if frame.get("event") == "run_finished":
            break
    await socket.close()
    return {"seqs": seqs}


async def sse_lines(response: Any) -> Any:
    """The (field, value) lines of an SSE response as they arrive."""
    buffer = ""
    async for chunk in response.aiter_text():
        buffer += chunk
        while "\n" in buffer:
            line, buffer = buffer.split("\n", 1)
            if line:
                name, _, value = line.partition(": ")
                yield name, value


async def agui_client(http: Any, url: str, ready: Any) -> dict[str, Any]:
    """The AG-UI stream on daphne B: read to ``RUN_FINISHED``."""
    ids: list[int] = []
    async with http.stream("GET", url) as response:
        ready.set()
        async for name, value in sse_lines(response):
            if name == "id":
                ids.append(int(value))
            elif name == "data" and json.loads(value)["type"] in (
                "RUN_FINISHED",
                "RUN_ERROR",
            ):
                break
    return {"ids": ids}


async def reconnect(http: Any, url: str, last_id: int) -> tuple[float, float]:
    """Seconds to the first event, and to the first replayed text of the message."""
    started = time.perf_counter()
    first = 0.0
    async with http.stream("GET", url, headers={"Last-Event-ID": str(last_id)}) as r:
        async for name, value in sse_lines(r):
            if name != "data":
                continue
            now = time.perf_counter()
            first = first or now - started
            if json.loads(value)["type"] == "TEXT_MESSAGE_CONTENT":
                return first, now - started
    return first, float("nan")


async def one_round(
    args: argparse.Namespace, ports: tuple[int, int], pids: tuple[int, int],
    cookie: str, user: Any, *, reconnects: int,
) -> dict[str, Any]:  # fmt: skip
    import httpx
    from asgiref.sync import sync_to_async

    from sagents_django.runtime import agent_server
    from sagents_django.scope import Scope

    [cid] = await sync_to_async(make_conversations)(user, 1)
    url = f"http://127.0.0.1:{ports[1]}/agui/{cid}/"
    headers = {"Cookie": f"sessionid={cookie}"}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        socket_ready, agui_ready = asyncio.Event(), asyncio.Event()
        sock = asyncio.ensure_future(socket_client(ports[0], cookie, cid, socket_ready))
        await socket_ready.wait()
        # A stream joined with nothing running ends at once: join once the run is.
        cpu_before = [cpu_seconds(pid) for pid in pids]
        await sync_to_async(agent_server.add_message)(
            Scope.for_user(user), cid, "Stream for me"
        )
        stream = asyncio.ensure_future(agui_client(http, url, agui_ready))
        await agui_ready.wait()
        replays = []
        await asyncio.sleep(args.chunks * args.interval / 1000 / 3)
        for _ in range(reconnects):
            if stream.done():
                break
            replays.append(await reconnect(http, url, 1))
        socket_seen, agui_seen = await asyncio.gather(sock, stream)
        cpu_after = [cpu_seconds(pid) for pid in pids]
    events = max(socket_seen["seqs"]) - min(socket_seen["seqs"]) + 1
    socket_cpu = cpu_after[0] - cpu_before[0]
    agui_cpu = cpu_after[1] - cpu_before[1]
    return {
        "events": events,
        "agui_ids": len(agui_seen["ids"]),
        "socket_us": socket_cpu / events * 1e6,
        "agui_us": agui_cpu / events * 1e6,
        "replays": replays,
    }


async def main(args: argparse.Namespace) -> None:
    from asgiref.sync import sync_to_async

    logs = Path(f"/tmp/sagents-bench-agui-{SESSION}")
    logs.mkdir()
    _provider, env = stamped_stack(
        database=DATABASE, prefix=PREFIX, queue=QUEUE, chunks=args.chunks,
        interval=args.interval / 1000,
    )  # fmt: skip
    user, cookie = await sync_to_async(make_user)(f"agui-{SESSION}")
    worker = start_worker(env, queue=QUEUE, concurrency=4, log=logs / "worker.log")
    ports = (free_port(), free_port())
    daphnes = [
        start_server(env, port=port, log=logs / f"daphne{i}.log")
        for i, port in enumerate(ports)
    ]
    pids = (daphnes[0].pid, daphnes[1].pid)
    rounds, replays = [], []
    try:
        for n in range(args.rounds + 1):
            result = await one_round(args, ports, pids, cookie, user, reconnects=0)
            if n:  # the first round warms both daphnes and the worker up
                rounds.append(result)
        # Apart: a reconnect's own work would count in daphne B's CPU.
        for _ in range(max(1, args.rounds // 2)):
            result = await one_round(
                args, ports, pids, cookie, user, reconnects=args.reconnects
            )
            replays += result["replays"]
    finally:
        stop(*daphnes, worker)
    report(args, rounds, replays)


def report(
    args: argparse.Namespace,
    rounds: list[dict[str, Any]],
    replays: list[tuple[float, float]],
) -> None:
    median = statistics.median
    print(
        f"AG-UI vs the JSON socket: {len(rounds)} rounds, a reply of {args.chunks} "
        f"chunks, one every {args.interval} ms (medians)"
    )
    print(f"  our events per run          {median(r['events'] for r in rounds):.0f}")
    socket_us = median(r["socket_us"] for r in rounds)
    agui_us = median(r["agui_us"] for r in rounds)
    ratio = median(r["agui_us"] / r["socket_us"] for r in rounds)
    print(f"  daphne CPU per event, JSON socket   {socket_us:8.0f} us")
    print(f"  daphne CPU per event, AG-UI SSE     {agui_us:8.0f} us")
    print(f"  agui/socket (per round, median)     {ratio:8.2f}x")
    if replays:
        first = median(r[0] for r in replays) * 1000
        text = median(r[1] for r in replays) * 1000
        print(f"  reconnect -> first event            {first:8.1f} ms ({len(replays)})")
        print(f"  reconnect -> first replayed text    {text:8.1f} ms")


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--chunks", type=int, default=300)
    parser.add_argument("--interval", type=float, default=10.0, help="ms")
    parser.add_argument("--reconnects", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.chunks = 2, 100
    return args


if __name__ == "__main__":
    asyncio.run(main(parse()))
