"""A corpus of hostile file tool calls (patterns and sizes for every tool) and the
way to run one as a real turn while another asyncio task ticks every 10 ms: what
``test_hostile_tools.py`` checks the answers of, and ``bench/hostile_tools.py``
times (each case's duration against the budget, the ticker's largest gap)."""

from __future__ import annotations

import asyncio
import gc
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sagents_django.core import Agent, Message, ToolCall, ToolResult
from sagents_django.core.filesystem import FileSystemState
from sagents_django.core.limits import (
    MAX_ARGUMENT_CHARS,
    MAX_FILE_BYTES,
    MAX_TOOL_RESULT_CHARS,
)
from sagents_django.core.middleware.filesystem import FileSystem
from sagents_django.core.testing import ScriptedModel

BUDGET = 2.0
"""The tools' time budget in these tests (the default is longer)."""
MIB = 1024 * 1024


# Files the cases run against --------------------------------------------------------
def _ab(size: int, seed: int) -> str:
    chars = random.Random(seed).choices("ab", k=size)
    return "".join(chars)


def names200(fs: FileSystemState) -> None:
    for i in range(40):
        fs.write_file(f"/{'a' * 200}{i}.txt", "x")


def ab_lines(fs: FileSystemState) -> None:
    """Four files of random a/b in lines of 200 (a heavy pattern takes seconds)."""
    text = _ab(MAX_FILE_BYTES - 5000, 1)
    lines = "\n".join(text[i : i + 200] for i in range(0, len(text), 201))
    for name in ("ab", "ab2", "ab3", "ab4"):
        fs.write_file(f"/{name}.txt", lines)


def ab_one_line(fs: FileSystemState) -> None:
    fs.write_file("/ab1.txt", _ab(MAX_FILE_BYTES, 2))


NL_LINES = MAX_FILE_BYTES // 2


def newlines(fs: FileSystemState) -> None:
    """Half a million empty lines (a file never split into as many strings)."""
    fs.write_file("/nl.txt", "\n" * (NL_LINES - 1))


def a_file(fs: FileSystemState) -> None:
    fs.write_file("/a.txt", "a" * MAX_FILE_BYTES)


def long_lines(fs: FileSystemState) -> None:
    fs.write_file("/long.txt", ("L" * 2500 + "\n") * 400)


def big_directory(fs: FileSystemState) -> None:
    for i in range(300):
        fs.write_file(f"/big/f{i}.txt", "x")


def long_paths(fs: FileSystemState) -> None:
    """80 files whose paths are about 4 KB long (in 15 shared directories)."""
    directory = "/" + "/".join(f"{'s' * 250}{j}" for j in range(15))
    for i in range(80):
        fs.write_file(f"{directory}/{i}.txt", "x")


def nothing(fs: FileSystemState) -> None:
    pass


# The corpus ---------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    id: str
    tool: str
    arguments: dict[str, Any] | str
    """The call's arguments, or their raw JSON text."""
    setup: Callable[[FileSystemState], None] = nothing
    error: bool = True
    says: str = ""
    max_chars: int = MAX_TOOL_RESULT_CHARS + 500


CASES = [
    # ls
    Case(
        "ls backtracking wildcard",
        "ls",
        {"pattern": "*a*a*a*a*a*c"},
        names200,
        error=False,
        says="No files match",
    ),
    Case(
        "ls 999-char wildcard",
        "ls",
        {"pattern": "*" + "a*" * 499},
        names200,
        error=False,
        says="No files match",
    ),
    Case(
        "ls pattern too long",
        "ls",
        {"pattern": "x" * 1001},
        names200,
        says="is too long",
        max_chars=1000,
    ),
    Case(
        "ls pattern of 3 million characters",
        "ls",
        {"pattern": "*" * 3_000_000},
        names200,
        says="is too long",
        max_chars=1000,
    ),
    Case(
        "ls listing of huge paths",
        "ls",
        {},
        long_paths,
        error=False,
        says="more entries not shown",
    ),
    # read_file
    Case(
        "read_file half a million lines with a huge limit",
        "read_file",
        {"file_path": "/nl.txt", "limit": 10**15},
        newlines,
        error=False,
        says="continue with offset=",
    ),
    Case(
        "read_file offset 10**30",
        "read_file",
        {"file_path": "/nl.txt", "offset": 10**30},
        newlines,
        error=False,
        says="offset is beyond",
    ),
    Case(
        "read_file offset 1e300",
        "read_file",
        '{"file_path": "/nl.txt", "offset": 1e300}',
        newlines,
        error=False,
        says="offset is beyond",
    ),
    Case(
        "read_file offset of 5000 digits",
        "read_file",
        '{"file_path": "/nl.txt", "offset": ' + "9" * 5000 + "}",
        newlines,
        says="Invalid JSON",
    ),
    Case(
        "read_file negative offset",
        "read_file",
        {"file_path": "/nl.txt", "offset": -1},
        newlines,
        says="minimum",
    ),
    Case(
        "read_file one 1 MiB line",
        "read_file",
        {"file_path": "/ab1.txt"},
        ab_one_line,
        error=False,
        says="(line truncated)",
    ),
    Case(
        "read_file path of 5000 chars",
        "read_file",
        {"file_path": "/" + "a" * 5000},
        says="too long",
    ),
    Case(
        "read_file traversal",
        "read_file",
        {"file_path": "/../etc/passwd"},
        says="traversal",
    ),
    # write_file
    Case(
        "write_file one byte over the file limit",
        "write_file",
        {"file_path": "/big.txt", "content": "x" * (MAX_FILE_BYTES + 1)},
        says="limit per file",
    ),
    Case(
        "write_file arguments over their limit",
        "write_file",
        {"file_path": "/huge.txt", "content": "x" * MAX_ARGUMENT_CHARS},
        says="were refused",
    ),
    Case(
        "write_file 65 levels deep",
        "write_file",
        {"file_path": "/a" * 65, "content": "x"},
        says="levels deep",
    ),
    Case(
        "write_file path of 2000 segments",
        "write_file",
        {"file_path": "/b" * 2000 + "/c", "content": "x"},
        says="levels deep",
    ),
    Case(
        "write_file path of 5000 chars",
        "write_file",
        {"file_path": "/" + "b" * 5000, "content": "x"},
        says="too long",
    ),
    Case(
        "write_file NUL and a lone surrogate",
        "write_file",
        {"file_path": "/odd.txt", "content": "a\x00b\ud800c"},
        error=False,
        says="/odd.txt",
    ),
    # edit_file
    Case(
        "edit_file replace_all that would grow past the limit",
        "edit_file",
        {
            "file_path": "/a.txt",
            "old_string": "a",
            "new_string": "aa",
            "replace_all": True,
        },
        a_file,
        says="would make the file",
    ),
    Case(
        "edit_file one replacement of 3 MiB",
        "edit_file",
        {
            "file_path": "/a.txt",
            "old_string": "a" * 1000,
            "new_string": "b" * (3 * MIB),
            "replace_all": True,
        },
        a_file,
        says="would make the file",
    ),
    Case(
        "edit_file old_string of 3 MiB",
        "edit_file",
        {"file_path": "/a.txt", "old_string": "z" * (3 * MIB), "new_string": "y"},
        a_file,
        says="not found",
    ),
    Case(
        "edit_file empty old_string",
        "edit_file",
        {"file_path": "/a.txt", "old_string": "", "new_string": "y"},
        a_file,
        says="empty",
    ),
    # edit_lines
    Case(
        "edit_lines start 10**30",
        "edit_lines",
        {
            "file_path": "/nl.txt",
            "start_line": 10**30,
            "end_line": 10**30,
            "new_content": "x",
        },
        newlines,
        says="beyond file length",
    ),
    Case(
        "edit_lines negative start",
        "edit_lines",
        {"file_path": "/nl.txt", "start_line": -5, "end_line": 1, "new_content": "x"},
        newlines,
        says="1-based",
    ),
    Case(
        "edit_lines 3 MiB of new content",
        "edit_lines",
        {
            "file_path": "/nl.txt",
            "start_line": 1,
            "end_line": 1,
            "new_content": "y" * (3 * MIB),
        },
        newlines,
        says="would make the file",
    ),
    Case(
        "edit_lines the last of half a million lines",
        "edit_lines",
        {
            "file_path": "/nl.txt",
            "start_line": NL_LINES,
            "end_line": NL_LINES,
            "new_content": "end",
        },
        newlines,
        error=False,
        says="Replaced 1 lines",
    ),
    # search_text
    Case(
        "search_text nested counted repeats",
        "search_text",
        {"pattern": "(?:(?:a{1000}){1000}){1000}"},
        a_file,
        says="Invalid regex pattern",
    ),
    Case(
        "search_text a class repeated past the memory budget",
        "search_text",
        {"pattern": "\\pL{1000}"},
        a_file,
        says="pattern too large",
    ),
    Case(
        "search_text (a+)+$ on a 1 MiB line",
        "search_text",
        {"pattern": "(a+)+$", "file_path": "/a.txt"},
        a_file,
        error=False,
        says="File: /a.txt",
    ),
    Case(
        "search_text (x+x+)+y everywhere",
        "search_text",
        {"pattern": "(x+x+)+y"},
        ab_lines,
        error=False,
        says="No matches",
    ),
    Case(
        "search_text an exponential DFA over 1 MiB",
        "search_text",
        {"pattern": "[ab]*a[ab]{900}c"},
        ab_lines,
        says=f"{BUDGET:g} seconds",  # its deadline check or the wait, on a busy machine
    ),
    Case(
        "search_text a heavy pattern on one 1 MiB line",
        "search_text",
        {"pattern": "[ab]*a[ab]{900}c"},
        ab_one_line,
        says="too complex",
    ),
    Case(
        "search_text pattern too long",
        "search_text",
        {"pattern": "x" * 1001},
        says="is too long",
        max_chars=1000,
    ),
    Case(
        "search_text look-behind",
        "search_text",
        {"pattern": "(?<=a)b"},
        says="Invalid regex pattern",
    ),
    Case(
        "search_text every line with wide context",
        "search_text",
        {"pattern": "", "context_lines": 20, "max_results": 1000},
        long_lines,
        error=False,
        says="Results truncated",
    ),
    # delete_file
    Case("delete_file the root", "delete_file", {"file_path": "/"}, says="root"),
    Case(
        "delete_file a directory of 300 files",
        "delete_file",
        {"file_path": "/big"},
        big_directory,
        says="not empty",
    ),
    Case(
        "delete_file path of 5000 chars",
        "delete_file",
        {"file_path": "/" + "a" * 5000},
        says="too long",
    ),
    Case(
        "delete_file missing",
        "delete_file",
        {"file_path": "/missing"},
        says="not found",
    ),
    # move_file
    Case(
        "move_file into itself",
        "move_file",
        {"old_path": "/big", "new_path": "/big/inner"},
        big_directory,
        says="into itself",
    ),
    Case(
        "move_file a directory of 300 files",
        "move_file",
        {"old_path": "/big", "new_path": "/moved"},
        big_directory,
        error=False,
        says="301 entries",
    ),
    Case(
        "move_file 65 levels deep",
        "move_file",
        {"old_path": "/a.txt", "new_path": "/x" * 65},
        a_file,
        says="levels deep",
    ),
    Case(
        "move_file path of 5000 chars",
        "move_file",
        {"old_path": "/" + "a" * 5000, "new_path": "/b"},
        says="too long",
    ),
]


async def run_with_ticker(work: Any) -> tuple[Any, list[float]]:
    """Await ``work`` while a task ticks every 10 ms; the result and the gaps."""
    loop = asyncio.get_running_loop()
    gaps: list[float] = []
    done = asyncio.Event()

    async def tick() -> None:
        last = loop.time()
        while not done.is_set():
            await asyncio.sleep(0.01)
            now = loop.time()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    try:
        return await work, gaps
    finally:
        done.set()
        await ticker


async def call_tool(
    fs: FileSystemState, tool: str, arguments: dict[str, Any] | str
) -> tuple[ToolResult, float, list[float]]:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    agent = Agent(
        model=ScriptedModel(
            [
                Message.assistant(
                    tool_calls=[ToolCall(call_id="c1", name=tool, raw_arguments=raw)]
                ),
                "Done.",
            ]
        ),
        middleware=[FileSystem(filesystem=fs, time_budget=BUDGET)],
        replace_default_middleware=True,
    )
    gc.collect()  # a full collection is not what the ticker is watching for
    started = time.monotonic()
    result, gaps = await run_with_ticker(agent.aexecute([Message.user("Go")]))
    elapsed = time.monotonic() - started
    assert result.status == "completed", result.error
    [tool_result] = result.state.messages[2].tool_results
    return tool_result, elapsed, gaps
