"""No file tool call can hurt the process: a corpus of hostile patterns and sizes for
every tool (``hostile.py``), on the memory and the disk backends.

Each case runs as a real turn (the call's JSON goes through the argument parser, the
schema and the tool) and ends as an answer or as an error the model can read, of
bounded size. How long each took against the budget, and the largest pause of the
event loop meanwhile, are figures: ``bench/hostile_tools.py`` prints them.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from sagents_django.core.filesystem import (
    DiskPersistence,
    FileSystemConfig,
    FileSystemState,
    MemoryPersistence,
)
from tests.core.filesystem.hostile import BUDGET, CASES, Case, ab_lines, call_tool


@pytest.fixture(params=["memory", "disk"])
def filesystem(request: pytest.FixtureRequest, tmp_path: Path) -> FileSystemState:
    backend = (
        MemoryPersistence() if request.param == "memory" else DiskPersistence(tmp_path)
    )
    return FileSystemState(
        ("hostile", request.node.name),
        configs=[FileSystemConfig(default=True, persistence=backend)],
    )


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_a_hostile_call_ends_as_an_answer_or_an_error_the_model_reads(
    case: Case, filesystem: FileSystemState
) -> None:
    case.setup(filesystem)
    result, _, _ = await call_tool(filesystem, case.tool, case.arguments)
    assert result.is_error is case.error, result.content[:500]
    assert case.says in result.content, result.content[:500]
    assert len(result.content) <= case.max_chars


async def test_a_heavy_search_stops_working_soon_after_its_budget(
    filesystem: FileSystemState,
) -> None:
    # The thread of a call that ran out of time stops at its next deadline check,
    # so the next call does not queue behind it (it would run out of its own
    # budget and say so).
    ab_lines(filesystem)
    first, _, _ = await call_tool(
        filesystem, "search_text", {"pattern": "[ab]*a[ab]{900}c"}
    )
    assert first.is_error and f"{BUDGET:g} seconds" in first.content  # its budget
    second, _, _ = await call_tool(filesystem, "ls", {})
    assert not second.is_error and "/ab.txt" in second.content


class SlowPersistence(MemoryPersistence):
    """A store whose writes take a while (a slow network disk)."""

    def write(self, entry: Any, opts: dict[str, Any]) -> Any:
        time.sleep(BUDGET * 2)
        return super().write(entry, opts)


async def test_a_call_past_its_budget_answers_at_the_budget_and_may_still_finish() -> (
    None
):
    store = SlowPersistence()
    fs = FileSystemState(
        ("hostile", "slow"),
        configs=[FileSystemConfig(default=True, persistence=store)],
    )
    result, _, _ = await call_tool(
        fs, "write_file", {"file_path": "/late.txt", "content": "late"}
    )
    assert result.is_error
    assert f"did not finish within {BUDGET:g} seconds" in result.content
    assert "may still complete" in result.content
    # The write was not cut in the middle: it completes in its thread.
    for _ in range(100):
        if store.paths():
            break
        await asyncio.sleep(0.05)
    assert "/late.txt" in store.paths()
