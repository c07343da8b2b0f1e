"""Debounced writes are never lost to a stopping process: ``flush_pending_writes``
stores what every filesystem of the process holds, and the first debounced write
installs an exit hook that calls it (a debounce timer is a daemon thread: it dies
with the interpreter, and its write with it)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from sagents_django.core.filesystem import (
    DiskPersistence,
    FileSystemConfig,
    FileSystemState,
    MemoryPersistence,
    flush_pending_writes,
    get_filesystem,
)
from sagents_django.core.filesystem.debounce import has_pending_writes
from sagents_django.core.filesystem.entries import FileEntry

ROOT = Path(__file__).resolve().parents[3]
LONG = 600_000  # ms: only a flush stores within a test


def debounced(storage: object, scope: object = None) -> FileSystemState:
    return FileSystemState(
        scope or ("test", uuid.uuid4().hex),
        configs=[FileSystemConfig(default=True, persistence=storage, debounce_ms=LONG)],
    )


def test_every_filesystem_of_the_process_is_flushed_registered_or_not() -> None:
    storage = MemoryPersistence()
    alone = debounced(storage)
    registered = get_filesystem(
        ("test", uuid.uuid4().hex),
        configs=[FileSystemConfig(default=True, persistence=storage, debounce_ms=LONG)],
    )
    for fs in (alone, registered):
        fs.write_file("/a.txt", "draft")  # a new file is stored at once
        fs.write_file("/a.txt", "final")  # an edit waits
    assert has_pending_writes()

    assert flush_pending_writes() >= 2

    assert not alone.pending_paths and not registered.pending_paths
    for fs in (alone, registered):
        fresh = FileSystemState(
            fs.scope_key, configs=[FileSystemConfig(default=True, persistence=storage)]
        )
        assert fresh.read_file("/a.txt").content == "final"


class Broken(MemoryPersistence):
    def __init__(self) -> None:
        super().__init__()
        self.down = False

    def write(self, entry: FileEntry, opts: dict[str, object]) -> FileEntry:
        if self.down:
            raise ConnectionError("storage is down")
        return super().write(entry, opts)


def test_a_failing_flush_is_logged_and_stays_pending_never_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    storage = Broken()
    fs = debounced(storage)
    fs.write_file("/a.txt", "draft")
    fs.write_file("/a.txt", "final")
    storage.down = True

    flush_pending_writes()

    assert fs.pending_paths == ["/a.txt"]
    assert "Could not persist /a.txt; it stays pending" in caplog.text
    storage.down = False
    flush_pending_writes()
    assert fs.pending_paths == []


SCRIPT = """
import sys
from sagents_django.core.filesystem import (
    DiskPersistence, FileSystemConfig, FileSystemState,
)
fs = FileSystemState(("user", 1), configs=[FileSystemConfig(
    default=True, persistence=DiskPersistence(sys.argv[1]), debounce_ms=600_000,
)])
fs.write_file("/notes.md", "draft")
fs.write_file("/notes.md", "final")
assert fs.pending_paths == ["/notes.md"]
{end}
"""


@pytest.mark.parametrize(
    "end",
    ["pass", "sys.exit(3)", "raise SystemExit('stopping')"],
    ids=["returns", "exits", "raises"],
)
def test_a_process_that_exits_with_a_debounced_write_stores_it_first(
    tmp_path: Path, end: str
) -> None:
    root = tmp_path / "files"
    root.mkdir()
    script = textwrap.dedent(SCRIPT).format(end=end)
    done = subprocess.run(
        [sys.executable, "-c", script, str(root)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert "AssertionError" not in done.stderr, done.stderr
    assert (root / "notes.md").read_text() == "final"
    # DiskPersistence is the storage: the same file, read back through it.
    fs = FileSystemState(
        ("user", 1),
        configs=[FileSystemConfig(default=True, persistence=DiskPersistence(root))],
    )
    assert fs.read_file("/notes.md").content == "final"
