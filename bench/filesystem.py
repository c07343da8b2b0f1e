"""Virtual filesystem throughput: write, read and list, memory and disk backends.

What it measures, per backend (``MemoryPersistence``, ``DiskPersistence`` in a temp
directory), with files of ~200 bytes spread over 100 directories:

- write: ``FileSystemState.write_file`` of N new files (write-through: each reaches
  the backend before the call returns);
- read (warm): ``read_file`` of every file from the state that wrote them;
- index: a new ``FileSystemState`` over the same storage and its first use (building
  one does no I/O; the first operation lists what is stored);
- read (cold): ``read_file`` of every file from that new state (lazy loads);
- the ``ls`` tool (the real Tool function, JSON output capped at 1,000 entries) at
  100, 1,000 and 10,000 files: with the listing cached, and just after a write
  (listing rebuilt), plus ``list_entries`` alone after a write.

Figures are medians of several runs. Run from the repository root::

    .venv/bin/python bench/filesystem.py           # N = 10,000, 5 runs
    .venv/bin/python bench/filesystem.py --quick   # N = 1,000, 3 runs

A benchmark, not a test: it prints figures and asserts no thresholds.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sagents_django.core.filesystem import (  # noqa: E402
    DiskPersistence,
    FileSystemConfig,
    FileSystemState,
    MemoryPersistence,
)
from sagents_django.core.middleware.filesystem import FileSystem  # noqa: E402
from sagents_django.core.state import State  # noqa: E402
from sagents_django.core.tools import ToolContext  # noqa: E402

CONTENT = ("The agent wrote this line while working. " * 5)[:200]
LS_SIZES = (100, 1_000, 10_000)


def paths(count: int) -> list[str]:
    return [f"/d{i % 100:02}/file-{i:05}.md" for i in range(count)]


class Backend:
    """Creates fresh storage of one kind for each run."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._dirs: list[str] = []

    def config(self) -> FileSystemConfig:
        if self.kind == "memory":
            return FileSystemConfig(default=True, persistence=MemoryPersistence())
        root = tempfile.mkdtemp(prefix="sagents-bench-")
        self._dirs.append(root)
        return FileSystemConfig(default=True, persistence=DiskPersistence(root))

    def cleanup(self) -> None:
        for root in self._dirs:
            shutil.rmtree(root, ignore_errors=True)
        self._dirs.clear()


def timed(action: Callable[[], Any]) -> float:
    gc.collect()
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def new_state(config: FileSystemConfig, scope: str = "bench") -> FileSystemState:
    return FileSystemState(("bench", scope), configs=[config], max_total_size=None)


def write_all(fs: FileSystemState, names: list[str]) -> None:
    for path in names:
        fs.write_file(path, CONTENT)


def read_all(fs: FileSystemState, names: list[str]) -> None:
    for path in names:
        fs.read_file(path)


def throughput(backend: Backend, count: int, runs: int) -> dict[str, float]:
    """Operations per second (index: seconds) for one backend, median of runs."""
    samples: dict[str, list[float]] = {
        k: [] for k in ("write", "warm", "index", "cold")
    }
    names = paths(count)
    for _ in range(runs):
        config, scope = backend.config(), uuid.uuid4().hex
        fs = new_state(config, scope)
        samples["write"].append(count / timed(partial(write_all, fs, names)))
        samples["warm"].append(count / timed(partial(read_all, fs, names)))
        gc.collect()
        start = time.perf_counter()
        cold = new_state(config, scope)
        cold.list_entries()  # the first use indexes storage
        samples["index"].append(time.perf_counter() - start)
        samples["cold"].append(count / timed(partial(read_all, cold, names)))
        backend.cleanup()
    return {k: statistics.median(v) for k, v in samples.items()}


def ls_costs(
    backend: Backend, runs: int, sizes: tuple[int, ...]
) -> dict[int, dict[str, float]]:
    """Milliseconds per ls call at each size: cached, after a write, list_entries."""
    results: dict[int, dict[str, float]] = {}
    for size in sizes:
        fs = new_state(backend.config())
        write_all(fs, paths(size))
        ls = next(t for t in FileSystem(filesystem=fs).tools() if t.name == "ls")
        loop = asyncio.new_event_loop()
        call_ls = ls_caller(ls, loop)
        call_ls()  # warm-up (and the once-per-turn refresh)
        cached, rebuilt, listing = [], [], []
        for i in range(runs * 4 + 1):  # calls are short: more samples
            cached.append(timed(call_ls))
            fs.write_file(f"/touch/{i}.md", CONTENT)
            rebuilt.append(timed(call_ls))
            fs.write_file(f"/touch/{i}.md", CONTENT + "!")
            listing.append(timed(fs.list_entries))
        loop.close()
        results[size] = {
            "cached": statistics.median(cached) * 1000,
            "rebuilt": statistics.median(rebuilt) * 1000,
            "list_entries": statistics.median(listing) * 1000,
        }
        backend.cleanup()
    return results


def ls_caller(ls: Any, loop: asyncio.AbstractEventLoop) -> Callable[[], None]:
    """Calls the ls tool as the agent loop does, on a running event loop."""
    context = ToolContext(state=State(), agent_id="bench")

    def call() -> None:
        loop.run_until_complete(ls.invoke({}, context))

    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1,000 files, 3 runs")
    args = parser.parse_args()
    count, runs = (1_000, 3) if args.quick else (10_000, 5)
    sizes = LS_SIZES[:2] if args.quick else LS_SIZES

    print(
        f"files: {count:,} of {len(CONTENT)} bytes in 100 directories; median of {runs} runs"
    )
    print(
        f"{'backend':<8} {'write/s':>10} {'read warm/s':>12} {'index s':>9} {'read cold/s':>12}"
    )
    for kind in ("memory", "disk"):
        figures = throughput(Backend(kind), count, runs)
        print(
            f"{kind:<8} {figures['write']:>10,.0f} {figures['warm']:>12,.0f} "
            f"{figures['index']:>9.3f} {figures['cold']:>12,.0f}"
        )
    print()
    print("ls tool, ms per call (through the Tool, in a worker thread, as in a turn)")
    print(
        f"{'backend':<8} {'files':>7} {'cached':>8} {'after write':>12} {'list_entries':>13}"
    )
    for kind in ("memory", "disk"):
        for size, figures in ls_costs(Backend(kind), runs, sizes).items():
            print(
                f"{kind:<8} {size:>7,} {figures['cached']:>8.2f} "
                f"{figures['rebuilt']:>12.2f} {figures['list_entries']:>13.2f}"
            )


if __name__ == "__main__":
    main()
