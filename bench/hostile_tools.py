"""Hostile file tool calls: how long each takes against the tools' time budget, and
how long the event loop paused meanwhile.

The corpus is the one ``tests/core/filesystem/test_hostile_tools.py`` checks the
answers of (``tests/core/filesystem/hostile.py``: huge files, pathological regexes,
deep and long paths, 10,000-entry directories, for every tool). Each case runs as a
real turn on the memory and the disk backends with a 2 s budget, while another
asyncio task ticks every 10 ms; a tick's gap much over 10 ms is a pause of the loop.
Per case: the median duration over the runs, and the largest gap of any run. A case
over the budget (plus its grace) or a gap in the hundreds of milliseconds is a bug.

Run from the repository root::

    .venv/bin/python bench/hostile_tools.py           # 3 runs per case
    .venv/bin/python bench/hostile_tools.py --quick   # 1 run

A benchmark, not a test: it prints figures and asserts no thresholds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sagents_django.core.filesystem import (  # noqa: E402
    DiskPersistence,
    FileSystemConfig,
    FileSystemState,
    MemoryPersistence,
)
from tests.core.filesystem.hostile import BUDGET, CASES, call_tool  # noqa: E402


def filesystem(backend: str, folder: Path, name: str) -> FileSystemState:
    store = MemoryPersistence() if backend == "memory" else DiskPersistence(folder)
    return FileSystemState(
        ("bench", name), configs=[FileSystemConfig(default=True, persistence=store)]
    )


async def measure(runs: int) -> None:
    print(f"budget {BUDGET:g} s; per case: median duration (ms), largest loop gap (ms)")
    print(f"{'case':<46} {'memory':>16} {'disk':>16}")
    worst_gap = worst_time = 0.0
    for case in CASES:
        cells = []
        for backend in ("memory", "disk"):
            times, gaps = [], []
            for run in range(runs):
                with tempfile.TemporaryDirectory() as folder:
                    fs = filesystem(backend, Path(folder), f"{case.id}-{run}")
                    case.setup(fs)
                    _, elapsed, ticks = await call_tool(fs, case.tool, case.arguments)
                times.append(elapsed)
                gaps.append(max(ticks, default=0.0))
            median, gap = statistics.median(times), max(gaps)
            worst_time, worst_gap = max(worst_time, median), max(worst_gap, gap)
            cells.append(f"{median * 1000:8.1f} {gap * 1000:7.1f}")
        print(f"{case.id[:46]:<46} {cells[0]:>16} {cells[1]:>16}")
    print(
        f"\nslowest case {worst_time * 1000:.0f} ms (budget {BUDGET * 1000:.0f} ms); "
        f"largest loop gap {worst_gap * 1000:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run per case")
    args = parser.parse_args()
    asyncio.run(measure(1 if args.quick else 3))


if __name__ == "__main__":
    main()
