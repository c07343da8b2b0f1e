"""Shared by the generator tests: running ruff on generated files."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def ruff_executable() -> str:
    """The ruff of this virtualenv (beside its python), else the one on PATH."""
    beside = Path(sys.executable).parent / "ruff"
    found = str(beside) if beside.exists() else shutil.which("ruff")
    assert found, "ruff is not installed (it is in requirements-dev.txt)"
    return found


def ruff_problems(root: Path, files: list[str]) -> str:
    """What ``ruff check`` and ``ruff format --check`` say about ``files`` under
    ``root`` ("" when both pass), with this repository's settings.

    The settings are copied into ``root`` so that ruff takes it as the project root
    and classifies the host's own packages there as first-party, as it would in the
    host's repository; the files are named explicitly, so a migration is checked
    too although the settings exclude migrations.
    """
    shutil.copy(REPO / "ruff.toml", root / "ruff.toml")
    ruff = ruff_executable()
    problems = []
    for command in (["check", "--no-cache"], ["format", "--check", "--no-cache"]):
        done = subprocess.run(
            [ruff, *command, *files],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if done.returncode != 0:
            problems.append(done.stdout + done.stderr)
    return "\n".join(problems)


def close_runtime_connections() -> None:
    """Close the database connections of the runtime's thread (inline turns), so
    PostgreSQL can drop the test database at the end of the run."""
    from asgiref.sync import sync_to_async
    from django.db import connections

    from sagents_django.runtime import loop

    loop.submit(sync_to_async(connections.close_all)()).result(10)
