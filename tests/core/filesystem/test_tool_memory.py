"""The file tools' worst cases stay within a small multiple of the file size limit.

Python allocations are traced (``tracemalloc`` sees the worker threads too) from
just before the call, so the arguments, built beforehand, do not count: what counts
is what the tool builds. RE2's own memory is not Python's, so compiling hostile
patterns is measured in a fresh interpreter by its peak resident size.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sagents_django.core.filesystem import (
    DiskPersistence,
    FileSystemConfig,
    FileSystemState,
    MemoryPersistence,
)
from sagents_django.core.limits import MAX_FILE_BYTES, REGEX_MAX_MEMORY
from sagents_django.core.middleware.filesystem import FileSystem

from .hostile import a_file, long_lines, long_paths, newlines

ROOT = Path(__file__).resolve().parents[3]
FACTOR = 8
"""Peak Python memory of one call, in multiples of the file size limit."""
MIB = 1024 * 1024


def many_big_files(fs: FileSystemState) -> None:
    for i in range(12):
        fs.write_file(f"/big/{i}.txt", ("line of text\n" * 80_000)[:MAX_FILE_BYTES])


WORST: list[tuple[str, str, dict[str, Any], Callable[[FileSystemState], None]]] = [
    (
        "edit_file replace_all that would grow a 1 MiB file 2x",
        "edit_file",
        {
            "file_path": "/a.txt",
            "old_string": "a",
            "new_string": "aa",
            "replace_all": True,
        },
        a_file,
    ),
    (
        "edit_file replacing 1048 pieces by 3 MiB each",
        "edit_file",
        {
            "file_path": "/a.txt",
            "old_string": "a" * 1000,
            "new_string": "b" * (3 * MIB),
            "replace_all": True,
        },
        a_file,
    ),
    (
        "edit_lines in a file of half a million lines",
        "edit_lines",
        {
            "file_path": "/nl.txt",
            "start_line": 10,
            "end_line": 400_000,
            "new_content": "x",
        },
        newlines,
    ),
    (
        "read_file of half a million lines without a limit",
        "read_file",
        {"file_path": "/nl.txt", "limit": 10**12},
        newlines,
    ),
    (
        "search_text every line with 20 lines of context",
        "search_text",
        {"pattern": "", "context_lines": 20, "max_results": 1000},
        long_lines,
    ),
    (
        "search_text over twelve 1 MiB files",
        "search_text",
        {"pattern": "no such text"},
        many_big_files,
    ),
    (
        "ls of 80 paths of 4 KB",
        "ls",
        {},
        long_paths,
    ),
    (
        "write_file one byte over the limit",
        "write_file",
        {"file_path": "/over.txt", "content": "x" * (MAX_FILE_BYTES + 1)},
        lambda fs: None,
    ),
]


@pytest.fixture(params=["memory", "disk"])
def filesystem(request: pytest.FixtureRequest, tmp_path: Path) -> FileSystemState:
    backend = (
        MemoryPersistence() if request.param == "memory" else DiskPersistence(tmp_path)
    )
    return FileSystemState(
        ("memory", request.node.name),
        configs=[FileSystemConfig(default=True, persistence=backend)],
    )


@pytest.mark.parametrize(
    ("tool", "arguments", "setup"),
    [case[1:] for case in WORST],
    ids=[case[0] for case in WORST],
)
async def test_a_worst_case_call_stays_within_a_few_file_sizes_of_memory(
    tool: str,
    arguments: dict[str, Any],
    setup: Callable[[FileSystemState], None],
    filesystem: FileSystemState,
) -> None:
    setup(filesystem)
    [found] = [t for t in FileSystem(filesystem=filesystem).tools() if t.name == tool]
    filesystem.refresh()  # what a turn's first call does; not the case's cost
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        result = await found.function(arguments, None)
        peak = tracemalloc.get_traced_memory()[1] - baseline
    finally:
        tracemalloc.stop()
    assert result is not None
    assert peak <= FACTOR * MAX_FILE_BYTES, f"peak {peak / MIB:.1f} MiB"


async def test_a_search_over_stored_files_keeps_none_of_them_in_memory(
    tmp_path: Path,
) -> None:
    filesystem = FileSystemState(
        ("memory", "search"),
        configs=[FileSystemConfig(default=True, persistence=DiskPersistence(tmp_path))],
    )
    many_big_files(filesystem)
    filesystem.reset()  # as a new worker: everything stored, nothing loaded
    [search] = [
        t for t in FileSystem(filesystem=filesystem).tools() if t.name == "search_text"
    ]
    result = await search.function({"pattern": "line of"}, None)
    assert "File: /big/0.txt" in result
    files = [e for e in filesystem.list_entries() if not e.is_directory]
    assert len(files) == 12 and not any(e.loaded for e in files)


def test_compiling_hostile_patterns_stays_within_the_regex_memory_budget() -> None:
    patterns = [
        "(?:(?:a{1000}){1000}){1000}",
        "\\pL{1000}",
        "(?i)[\\p{L}\\p{N}]{999}",
        ".{1000}.{1000}",
        "(?:a{999}|b{999}|c{999}){999}",
        "((((((((((a*)*)*)*)*)*)*)*)*)*)*b",
    ]
    script = textwrap.dedent(
        f"""
        import json, resource
        from sagents_django.core.filesystem.search import Searcher
        from sagents_django.core.filesystem.text import EditError
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        outcomes = []
        for pattern in {json.dumps(patterns)}:
            try:
                Searcher(pattern).matches("a" * 10000 + "b")
                outcomes.append("ok")
            except EditError as exc:
                outcomes.append(str(exc)[:60])
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(json.dumps({{"kib": after - before, "outcomes": outcomes}}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["outcomes"][0].startswith("Invalid regex pattern")
    # Each compiled pattern may hold RE2's budget; a few of them, never gigabytes.
    assert report["kib"] * 1024 <= 4 * REGEX_MAX_MEMORY + 16 * MIB, report
