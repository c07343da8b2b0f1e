"""daphne against uvicorn on the socket fan-out, in the same run.

Channels runs on both: each serves the project's ``project.asgi:application``
unchanged (``bench/stack.py``'s ``SERVERS``: daphne; uvicorn as
``uvicorn[standard]`` runs it, on uvloop and httptools; and, with
``--servers``, uvicorn on plain asyncio and h11). One Celery worker runs every turn
and publishes on the Redis Pub/Sub layer; the servers are all up at once, each on
a port of its own, and the rounds alternate between them, so that the machine's
other load weighs on each alike. Printed, per server:

- fan-out: ``--conversations`` (4) conversations stream a reply at once (this
  script's stamping provider, ``stack.Provider``: 50 chunks, one every 20 ms), each
  followed by ``--sockets`` (10) sockets, so the server delivers every event frame
  10 times (about 2,000 frames/s; ``--sockets 50``, about 10,000 frames/s, is
  more than one core of either server delivers). Delta latency (the provider wrote a chunk → a client read the frame)
  p50 and p99 over every chunk on every socket; the server's CPU (user + system)
  per event frame it delivered, and its CPU in cores while the turns streamed (beside it, this process's: the
  clients and the provider, which share the machine). The
  median over ``--rounds`` (5) rounds; then the ratios uvicorn / daphne of those
  medians;
- idle sockets: ``--idle`` (500) sockets opened one after another, each subscribed
  to an idle conversation of its own: the time to open and subscribe one, the
  server's resident memory per socket (VmRSS after - before, over the sockets),
  and its CPU while they sit idle for 5 s;
- drain (``sagents_django.asgi.DrainOnSigterm``): a fresh server with
  ``DRAIN_SECONDS`` = 1 and one open socket gets SIGTERM; printed are whether
  ``/ready/`` answers 503 during the drain, the socket's close code and when it
  came, and when and how the process exited.

Needs PostgreSQL (database ``bench_asgi``, dropped and created again) and Redis on
127.0.0.1; uvicorn, uvloop and httptools (requirements-dev.txt). Run from the
repository root::

    .venv/bin/python bench/asgi_servers.py            # 5 rounds, 4 x 10 sockets (~3 min)
    .venv/bin/python bench/asgi_servers.py --quick    # 2 rounds, 100 idle sockets

A benchmark, not a test: it prints figures and asserts no thresholds. Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
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
    SERVERS,
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
    start_worker,
    stop,
    subscribe,
)

DATABASE = "bench_asgi"
SESSION = uuid.uuid4().hex[:8]
PREFIX = QUEUE = f"sagents-asgi-{SESSION}"
USER: Any = None


async def fan_out(
    args: argparse.Namespace, port: int, server: int, worker: int, cookie: str,
    provider: Provider,
) -> dict[str, float]:  # fmt: skip
    """One round: every conversation's turn streamed to all its sockets at once."""
    from asgiref.sync import sync_to_async

    conversations = await sync_to_async(make_conversations)(USER, args.conversations)
    follows: list[Follow] = []
    for pk in conversations:
        for _ in range(args.sockets):
            follows.append(await subscribe(port, cookie, pk))
    readers = [asyncio.ensure_future(reader(f, provider)) for f in follows]
    started = time.perf_counter()
    for f in follows:
        f.submitted = started
    cpu_before, worker_before = cpu_seconds(server), cpu_seconds(worker)
    own_before = time.process_time()
    sent_before = len(provider.sent)
    for f in follows[:: args.sockets]:  # one send per conversation
        message = {"action": "send", "conversation": f.conversation, "text": "go"}
        await f.socket.send(json.dumps(message))
    async with asyncio.timeout(300):
        await asyncio.gather(*(f.done.wait() for f in follows))
    elapsed = time.perf_counter() - started
    cpu = cpu_seconds(server) - cpu_before
    worker_cpu = cpu_seconds(worker) - worker_before
    own = time.process_time() - own_before
    chunks = len(provider.sent) - sent_before
    for task in readers:
        task.cancel()
    await asyncio.gather(*(f.socket.close() for f in follows))
    frames = sum(f.frames for f in follows)
    latencies = sorted(x for f in follows for x in f.latencies)
    return {
        "p50": percentile(latencies, 50),
        "p99": percentile(latencies, 99),
        "cpu_per_frame": cpu / frames,
        "cores": cpu / elapsed,
        "clients_cores": own / elapsed,
        "frames": frames,
        "worker_per_chunk": worker_cpu / chunks if chunks else 0.0,
    }


async def idle_sockets(n: int, port: int, server: int, cookie: str) -> dict[str, float]:
    """``n`` sockets, each on an idle conversation of its own: what they cost."""
    from asgiref.sync import sync_to_async

    conversations = await sync_to_async(make_conversations)(USER, n)
    before = rss_mb(server)
    started = time.perf_counter()
    follows = [await subscribe(port, cookie, pk) for pk in conversations]
    opened = time.perf_counter() - started
    await asyncio.sleep(1)  # let the server settle (logging, the subscriptions)
    after = rss_mb(server)
    cpu_before = cpu_seconds(server)
    await asyncio.sleep(5)
    idle_cores = (cpu_seconds(server) - cpu_before) / 5
    await asyncio.gather(*(f.socket.close() for f in follows))
    return {
        "open_ms": opened / n * 1000,
        "kb_per_socket": (after - before) * 1024 / n,
        "idle_cores": idle_cores,
        "mb_before": before,
        "mb_after": after,
    }


async def drain(name: str, env: dict[str, str], logs: Path, cookie: str) -> str:
    """SIGTERM to a fresh server with one open socket: does the drain happen?"""
    from asgiref.sync import sync_to_async
    from websockets.exceptions import ConnectionClosed

    from tests.web.balancer import request

    overrides = {**json.loads(env["SAGENTS_TEST_OVERRIDES"]), "DRAIN_SECONDS": 1}
    env = {**env, "SAGENTS_TEST_OVERRIDES": json.dumps(overrides)}
    port = free_port()
    process = start_server(env, port=port, log=logs / f"drain-{name}.log", server=name)
    try:
        [pk] = await sync_to_async(make_conversations)(USER, 1)
        follow = await subscribe(port, cookie, pk)
        process.send_signal(signal.SIGTERM)
        signalled = time.perf_counter()
        await asyncio.sleep(0.3)
        status, body, _ = await asyncio.to_thread(request, port, "/ready/")
        ready = f"/ready/ {status}" + (" (draining)" if b"draining" in body else "")
        try:
            async with asyncio.timeout(15):
                async for _ in follow.socket:
                    pass
        except ConnectionClosed:
            pass
        except TimeoutError:
            return f"{ready}; the socket was not closed within 15 s"
        closed = time.perf_counter() - signalled
        code = follow.socket.close_code
        returned = await asyncio.to_thread(process.wait, 30)
        exited = time.perf_counter() - signalled
        return (
            f"{ready} during the drain; socket closed with {code} after "
            f"{closed:.1f} s; process exited after {exited:.1f} s "
            f"(return code {returned})"
        )
    finally:
        if process.poll() is None:
            stop(process)


async def main(args: argparse.Namespace) -> None:
    global USER
    provider, env = stamped_stack(
        database=DATABASE, prefix=PREFIX, queue=QUEUE, chunks=args.chunks,
        interval=args.interval / 1000,
    )  # fmt: skip
    from asgiref.sync import sync_to_async

    USER, cookie = await sync_to_async(make_user)(f"asgi-{SESSION}")
    logs = Path(f"/tmp/sagents-asgi-{SESSION}")
    logs.mkdir()
    worker = start_worker(env, queue=QUEUE, concurrency=args.conversations + 10,
                          log=logs / "worker.log")  # fmt: skip
    servers: dict[str, tuple[int, Any]] = {}
    try:
        for name in args.servers:
            port = free_port()
            log = logs / f"{name}.log"
            servers[name] = port, start_server(env, port=port, log=log, server=name)
        loadavg = [os.getloadavg()[0]]
        for port, process in servers.values():  # warm-up: imports, connections
            await fan_out(
                warm_up(args), port, process.pid, worker.pid, cookie, provider
            )
        idle = {
            name: await idle_sockets(args.idle, port, process.pid, cookie)
            for name, (port, process) in servers.items()
        }
        rounds: dict[str, list[dict[str, float]]] = {name: [] for name in servers}
        for _ in range(args.rounds):
            for name, (port, process) in servers.items():
                found = await fan_out(
                    args, port, process.pid, worker.pid, cookie, provider
                )
                rounds[name].append(found)
            loadavg.append(os.getloadavg()[0])
        drains = {}
        if not args.no_drain:
            drains = {name: await drain(name, env, logs, cookie) for name in servers}
        report(args, rounds, idle, drains, loadavg)
    finally:
        stop(*(process for _, process in servers.values()), worker)


def warm_up(args: argparse.Namespace) -> argparse.Namespace:
    return argparse.Namespace(**{**vars(args), "conversations": 1, "sockets": 2})


def report(
    args: argparse.Namespace,
    rounds: dict[str, list[dict[str, float]]],
    idle: dict[str, dict[str, float]],
    drains: dict[str, str],
    loadavg: list[float],
) -> None:
    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in rounds[name])

    print(
        f"# bench/asgi_servers.py on {os.cpu_count()} cores\n\n"
        f"{args.conversations} conversations streaming at once, each followed by "
        f"{args.sockets} sockets; {args.chunks} chunks per reply, one every "
        f"{args.interval:g} ms; median of {args.rounds} rounds, alternating servers. "
        f"Load average (1 min): {', '.join(f'{x:.1f}' for x in loadavg)} (before "
        f"the rounds, after each)."
    )
    print(
        "\n| server | delta p50 ms | delta p99 ms | server CPU ms per frame "
        "| server cores while streaming | frames delivered | worker CPU ms/chunk "
        "| clients + provider cores |\n|---|---:|---:|---:|---:|---:|---:|---:|"
    )
    for name in rounds:
        print(
            f"| {name} | {med(name, 'p50') * 1000:.1f} | {med(name, 'p99') * 1000:.1f} "
            f"| {med(name, 'cpu_per_frame') * 1000:.4f} | {med(name, 'cores'):.2f} "
            f"| {med(name, 'frames'):.0f} "
            f"| {med(name, 'worker_per_chunk') * 1000:.3f} "
            f"| {med(name, 'clients_cores'):.2f} |"
        )
    print(
        f"\nIdle sockets ({args.idle}, one conversation each):\n\n"
        "| server | open + subscribe ms/socket | KB per socket | MB before -> after "
        "| idle cores |\n|---|---:|---:|---:|---:|"
    )
    for name, i in idle.items():
        print(
            f"| {name} | {i['open_ms']:.1f} | {i['kb_per_socket']:.0f} "
            f"| {i['mb_before']:.0f} -> {i['mb_after']:.0f} | {i['idle_cores']:.3f} |"
        )
    base = next(iter(rounds))
    keys = ("p50", "p99", "cpu_per_frame", "cores")
    print(
        f"\nRatios to {base} (medians of the same run; below 1: better):\n\n"
        "| server | delta p50 | delta p99 | CPU per frame | cores while streaming "
        "| open + subscribe | KB per socket |\n|---|---:|---:|---:|---:|---:|---:|"
    )
    for name in list(rounds)[1:]:
        ratios = [med(name, k) / med(base, k) for k in keys] + [
            idle[name][k] / idle[base][k] for k in ("open_ms", "kb_per_socket")
        ]
        print(f"| {name} | " + " | ".join(f"{r:.2f}" for r in ratios) + " |")
    if drains:
        print("\nSIGTERM with DRAIN_SECONDS = 1 and one open socket:\n")
        for name, found in drains.items():
            print(f"- {name}: {found}")


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--quick", action="store_true", help="2 rounds, 100 idle sockets")
    add("--servers", nargs="+", choices=sorted(SERVERS), default=["daphne", "uvicorn"],
        help="the first is the base of the ratios")  # fmt: skip
    add("--conversations", type=int, default=4)
    add("--sockets", type=int, default=10, help="sockets per conversation")
    add("--rounds", type=int, default=5)
    add("--idle", type=int, default=500)
    add("--chunks", type=int, default=50)
    add("--interval", type=float, default=20.0, help="ms")
    add("--no-drain", action="store_true", help="skip the SIGTERM check")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.idle = 2, 100
    return args


if __name__ == "__main__":
    asyncio.run(main(parse()))
