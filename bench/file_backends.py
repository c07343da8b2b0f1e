"""Latency of the Django filesystem backends, on PostgreSQL, SQLite and local files.

What it measures (medians of several runs, real commits, no test transaction):

- writes per second: ``FileSystemState.write_file`` of 2 KB files, write-through
  (each write one upsert, or a save in the storage);
- indexing a scope of N files of 10 KB (``FileSystemState`` creation: one listing
  without content), so the cost of a worker seeing a scope for the first time;
- the first read of one file of that scope (lazy load of one row or object);
- a metadata-only update (one UPDATE, or one record write);
- moving a directory of N files (one UPDATE on the database; a copy per file and
  a delete per file in a storage).

Run from the repository root::

    .venv/bin/python bench/file_backends.py                  # both databases
    .venv/bin/python bench/file_backends.py --database sqlite --quick

The databases are the benchmark's own (``test_sagents_bench_files`` on the server
``BENCH_POSTGRES_URL`` names, default 127.0.0.1:5432, and a temporary SQLite file),
created, migrated and dropped here. A benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from databases import bench_database

REPO = Path(__file__).resolve().parent.parent
POSTGRES_URL = os.environ.get(
    "BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/sagents_bench"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database", choices=("sqlite", "postgres", "both"), default="both"
    )
    parser.add_argument("--quick", action="store_true", help="a fast smoke run")
    options = parser.parse_args()
    if options.database == "both":
        # One process per database: Django's settings are fixed once per process.
        for database in ("postgres", "sqlite"):
            args = [sys.executable, __file__, "--database", database]
            args += ["--quick"] if options.quick else []
            subprocess.run(args, check=True, cwd=REPO)
        return
    run(options.database, quick=options.quick)


def run(database: str, *, quick: bool) -> None:
    with bench_database(
        database, postgres_url=POSTGRES_URL, postgres_name="test_sagents_bench_files"
    ) as tmp:
        from django.core.files.storage import FileSystemStorage

        from sagents_django.filesystems import DatabasePersistence, StoragePersistence

        count, runs = (200, 3) if quick else (1000, 5)
        print(f"\n== {database}: {count} files, median of {runs} runs")
        report("database", DatabasePersistence(), count, runs)
        storage = FileSystemStorage(location=f"{tmp}/media", allow_overwrite=True)
        if database == "sqlite":  # the storage does not depend on the database
            report("FileSystemStorage", StoragePersistence(storage), count, runs)


def report(name: str, backend: Any, count: int, runs: int) -> None:
    from sagents_django.core.filesystem import FileSystemConfig, FileSystemState

    def new_fs(scope: tuple[str, str]) -> FileSystemState:
        config = FileSystemConfig(default=True, persistence=backend)
        return FileSystemState(scope, configs=[config], max_total_size=None)

    def scope() -> tuple[str, str]:
        return ("bench", uuid.uuid4().hex)

    def writes() -> float:
        fs, body = new_fs(scope()), "w" * 2048
        started = time.perf_counter()
        for index in range(count):
            fs.write_file(f"/w/{index}.txt", body)
        return count / (time.perf_counter() - started)

    filled = scope()
    fs = new_fs(filled)
    for index in range(count):
        fs.write_file(f"/docs/{index:05}.md", f"# {index}\n" + "x" * 10_000)

    def index() -> float:
        return timed(lambda: new_fs(filled))

    def first_read() -> float:
        reader = new_fs(filled)
        return timed(lambda: reader.read_file(f"/docs/{count // 2:05}.md"))

    def metadata() -> float:
        return timed(lambda: fs.update_custom_metadata("/docs/00001.md", {"n": 1}))

    def move() -> float:
        mover = new_fs(scope())
        for index in range(count):
            mover.write_file(f"/from/{index}.txt", "m")
        return timed(lambda: mover.move_file("/from", "/to"))

    print(f"-- {name}")
    show("writes of 2 KB files", median(writes, runs), "/s")
    show(f"index a scope of {count} x 10 KB files", median(index, runs), " ms")
    show("first read of one file", median(first_read, runs), " ms")
    show("metadata-only update", median(metadata, runs), " ms")
    show(f"move a directory of {count} files", median(move, runs), " ms")


def timed(function: Callable[[], Any]) -> float:
    started = time.perf_counter()
    function()
    return (time.perf_counter() - started) * 1000


def median(function: Callable[[], float], runs: int) -> float:
    return statistics.median(function() for _ in range(runs))


def show(label: str, value: float, unit: str) -> None:
    print(f"   {label:<40} {value:>10,.1f}{unit}")


if __name__ == "__main__":
    main()
