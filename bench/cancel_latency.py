"""How long a turn takes to stop after ``CancelToken.cancel()``, wherever it waits.

What it measures: for each place a turn can be waiting when Stop is pressed (the
scenarios of tests/core/cancel_places.py: the first byte, mid-stream, a silent gap,
tool-call arguments streaming, a retry's backoff sleep, an async tool, a sub-agent of
a sub-agent, and a sync tool), the time from ``token.cancel()`` (called from another
thread, as the runtime's listener will) to the return of ``Agent.aexecute``. The fake
server would keep the turn waiting ``--long`` seconds there. For the sync tool, which
runs in a thread that cannot be interrupted, the time counts from the end of the tool
call (it finishes; nothing after it may start). Every place runs on both transports
(litellm and the lean httpx one), each run with a fresh fake server in this process;
the median and the 99th percentile (with a few dozen runs, close to the maximum) are
printed per place. The target is under 100 ms everywhere.

Run from the repository root::

    .venv/bin/python bench/cancel_latency.py           # 30 runs per place, ~1 minute
    .venv/bin/python bench/cancel_latency.py --quick   # 3 runs per place

A benchmark, not a test: it prints figures and asserts no thresholds. Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sagents_django.core.transports import import_litellm  # noqa: E402
from tests.core.cancel_places import PLACES, run_place  # noqa: E402
from tests.fakes.openai_server import FakeOpenAIServer, reply  # noqa: E402

TRANSPORTS = ("openai", "litellm")


async def warm_litellm() -> None:
    """litellm's first call in a process sets up its handlers for seconds."""
    litellm = import_litellm()
    with FakeOpenAIServer() as server:
        server.script(reply("warm"))
        response = await litellm.acompletion(
            model=server.model,
            messages=[{"role": "user", "content": "warm up"}],
            stream=True,
            **server.model_params,
        )
        async for _chunk in response:
            pass


async def measure(place: str, transport: str, runs: int, long: float) -> list[float]:
    latencies = []
    for _ in range(runs):
        with FakeOpenAIServer() as server:
            outcome = await run_place(place, server, transport, long=long)
            if outcome.result.status != "cancelled":
                raise RuntimeError(f"{place}/{transport}: {outcome.result.status}")
            latencies.append(outcome.latency * 1000)
    return latencies


def p99(values: list[float]) -> float:
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[98]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="runs per place")
    parser.add_argument("--long", type=float, default=5.0, help="seconds of waiting")
    parser.add_argument("--quick", action="store_true", help="3 runs per place")
    options = parser.parse_args()
    runs = 3 if options.quick else options.runs
    logging.getLogger("sagents_django").setLevel(logging.ERROR)  # retry warnings
    load = os.getloadavg()[0]
    print(
        f"Python {sys.version.split()[0]}, {os.cpu_count()} cores, load average "
        f"{load:.2f} before the run; {runs} runs per place and transport; the fake "
        f"server would wait {options.long:g} s"
    )
    await warm_litellm()
    started = time.monotonic()
    print(
        f"\n{'place':22} {'transport':9} {'median ms':>10} {'p99 ms':>8} {'max ms':>8}"
    )
    for place in PLACES:
        for transport in TRANSPORTS:
            values = await measure(place, transport, runs, options.long)
            print(
                f"{place:22} {transport:9} {statistics.median(values):10.2f} "
                f"{p99(values):8.2f} {max(values):8.2f}"
            )
    print(f"\n({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    asyncio.run(main())
