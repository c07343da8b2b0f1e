"""DiskPersistence: files on disk under a root, and never anything outside it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from sagents_django.core.filesystem import (
    DiskPersistence,
    FileEntry,
    FileSystemConfig,
    FileSystemError,
    FileSystemState,
    InvalidPath,
    PathNotDirectory,
    PersistenceError,
    UnsafePath,
)
from sagents_django.core.filesystem.errors import DirectoryNotEmpty

from .conftest import snapshot

SCOPE = ("user", 1)


def new_fs(config: FileSystemConfig) -> FileSystemState:
    return FileSystemState(SCOPE, configs=[config])


def test_a_file_is_stored_at_its_path_below_the_root(
    disk_root: Path, disk_config: FileSystemConfig
) -> None:
    new_fs(disk_config).write_file("/notes/today.md", "# Today")
    assert (disk_root / "notes" / "today.md").read_text() == "# Today"


def test_the_base_directory_is_stripped_from_the_disk_path(disk_root: Path) -> None:
    config = FileSystemConfig(
        base_directory="Memories", persistence=DiskPersistence(disk_root)
    )
    new_fs(config).write_file("/Memories/notes.txt", "x")
    assert (disk_root / "notes.txt").read_text() == "x"


def test_a_second_filesystem_over_the_same_root_reads_the_first_ones_files(
    disk_root: Path,
) -> None:
    first = new_fs(
        FileSystemConfig(default=True, persistence=DiskPersistence(disk_root))
    )
    first.write_file("/a/b.md", "from the first")
    second = new_fs(
        FileSystemConfig(default=True, persistence=DiskPersistence(disk_root))
    )
    [entry] = [e for e in second.list_entries() if e.path == "/a/b.md"]
    assert not entry.loaded and entry.metadata.size == len("from the first")
    assert second.read_file("/a/b.md").content == "from the first"


def test_metadata_the_disk_cannot_hold_survives_in_a_sidecar(
    disk_root: Path, disk_config: FileSystemConfig
) -> None:
    fs = new_fs(disk_config)
    fs.write_file(
        "/doc.txt",
        "x",
        title="My Doc",
        mime_type="text/x-custom",
        custom={"tags": ["a"]},
    )
    fs.update_entry("/doc.txt", {"id": "42", "file_type": "note"})
    fs.write_file("/plain.txt", "y")
    reread = new_fs(disk_config).read_file("/doc.txt")
    assert (reread.title, reread.id, reread.file_type) == ("My Doc", "42", "note")
    assert reread.metadata.mime_type == "text/x-custom"
    assert reread.metadata.custom == {"tags": ["a"]}
    assert len(os.listdir(disk_root / ".sagents-meta")) == 1  # plain.txt needs none


def test_writes_are_atomic_and_leave_no_temporary_files(
    disk_root: Path, disk_config: FileSystemConfig
) -> None:
    fs = new_fs(disk_config)
    for i in range(5):
        fs.write_file("/f.txt", f"version {i}")
    assert (disk_root / "f.txt").read_text() == "version 4"
    assert [p.name for p in disk_root.iterdir()] == ["f.txt"]


def test_moving_a_directory_moves_it_on_disk_with_its_sidecars(
    disk_root: Path, disk_config: FileSystemConfig
) -> None:
    fs = new_fs(disk_config)
    fs.write_file("/drafts/a.md", "A", title="Alpha")
    fs.write_file("/drafts/sub/b.md", "B")
    fs.move_file("/drafts", "/published/2024")
    assert not (disk_root / "drafts").exists()
    assert (disk_root / "published" / "2024" / "sub" / "b.md").read_text() == "B"
    again = new_fs(disk_config)
    assert again.read_file("/published/2024/a.md").title == "Alpha"
    assert again.list_files() == ["/published/2024/a.md", "/published/2024/sub/b.md"]


def test_deleting_removes_files_directories_and_sidecars(
    disk_root: Path, disk_config: FileSystemConfig
) -> None:
    fs = new_fs(disk_config)
    fs.write_file("/d/a.md", "A", title="Alpha")
    fs.create_directory("/d/empty")
    fs.delete_file("/d", recursive=True)
    assert sorted(p.name for p in disk_root.iterdir()) == [".sagents-meta"]
    assert os.listdir(disk_root / ".sagents-meta") == []


def test_an_empty_directory_survives_a_reload(disk_config: FileSystemConfig) -> None:
    new_fs(disk_config).create_directory("/Characters")
    assert new_fs(disk_config).is_directory("/Characters")


def test_a_directory_with_unknown_files_on_disk_is_not_deleted(disk_root: Path) -> None:
    backend = DiskPersistence(disk_root)
    (disk_root / "d").mkdir()
    (disk_root / "d" / "stray").write_text("x")
    with pytest.raises(DirectoryNotEmpty):
        backend.delete(FileEntry.new_directory("/d"), {})
    assert (disk_root / "d" / "stray").exists()


def test_a_file_larger_than_the_read_limit_is_not_read(disk_root: Path) -> None:
    (disk_root / "huge.log").write_bytes(b"x" * 2000)
    backend = DiskPersistence(disk_root, max_read_bytes=1000)
    with pytest.raises(PersistenceError, match="2000 bytes"):
        backend.load(FileEntry.new_indexed_file("/huge.log"), {})


def test_a_file_that_is_not_utf8_is_read_with_replacement_characters(
    disk_root: Path, disk_config: FileSystemConfig
) -> None:
    (disk_root / "latin1.txt").write_bytes("café".encode("latin-1"))
    assert new_fs(disk_config).read_file("/latin1.txt").content == "caf\ufffd"


def test_a_fifo_in_the_tree_is_refused_without_hanging(
    disk_root: Path, disk_config: FileSystemConfig
) -> None:
    os.mkfifo(disk_root / "pipe")
    # Opening a FIFO for reading would wait for a writer forever (the suite's
    # timeout would end the test): it is refused before it is opened.
    with pytest.raises(UnsafePath, match="not a regular file"):
        new_fs(disk_config).read_file("/pipe")


def test_reserved_names_are_refused_and_not_listed(
    disk_root: Path, disk_config: FileSystemConfig
) -> None:
    fs = new_fs(disk_config)
    with pytest.raises(InvalidPath, match="reserved"):
        fs.write_file("/.sagents-meta/evil.json", "{}")
    (disk_root / ".sagents-tmp-leftover").write_text("x")
    assert new_fs(disk_config).list_entries() == []


# Links and escapes ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "operation",
    [
        lambda fs: fs.write_file("/link/new.txt", "pwned"),
        lambda fs: fs.write_file("/secret-link", "overwritten"),
        lambda fs: fs.read_file("/link/secret.txt"),
        lambda fs: fs.read_file("/secret-link"),
        lambda fs: fs.delete_file("/link/secret.txt"),
        lambda fs: fs.delete_file("/secret-link"),
        lambda fs: fs.create_directory("/link/dir"),
        lambda fs: fs.move_file("/link/secret.txt", "/stolen.txt"),
    ],
    ids=[
        "write-through-dir-link",
        "write-over-file-link",
        "read-through-dir-link",
        "read-file-link",
        "delete-through-link",
        "delete-link",
        "mkdir-through-link",
        "move-out-through-link",
    ],
)
def test_a_symbolic_link_is_never_followed(
    outside: Path, disk_config: FileSystemConfig, operation: Any
) -> None:
    before = snapshot(outside)
    fs = new_fs(disk_config)
    with pytest.raises(FileSystemError) as caught:
        operation(fs)
    assert "TOP SECRET" not in str(caught.value)
    assert snapshot(outside) == before
    assert os.path.islink(outside.parent / "root" / "secret-link")


def test_moving_into_a_linked_directory_is_refused_at_the_target_end(
    outside: Path, disk_config: FileSystemConfig
) -> None:
    fs = new_fs(disk_config)
    fs.write_file("/mine.txt", "mine")
    before = snapshot(outside)
    with pytest.raises(FileSystemError, match="symbolic link"):
        fs.move_file("/mine.txt", "/link/mine.txt")
    assert snapshot(outside) == before
    assert fs.read_file("/mine.txt").content == "mine"


def test_links_are_not_listed(outside: Path, disk_config: FileSystemConfig) -> None:
    assert new_fs(disk_config).list_entries() == []


def test_a_sibling_directory_sharing_the_roots_name_prefix_is_outside(
    tmp_path: Path,
) -> None:
    root, sibling = tmp_path / "data", tmp_path / "data2"
    root.mkdir()
    sibling.mkdir()
    (sibling / "x.txt").write_text("sibling")
    os.symlink("../data2", root / "hop")
    backend = DiskPersistence(root)
    with pytest.raises(UnsafePath):
        backend.load(FileEntry.new_indexed_file("/hop/x.txt"), {})


def test_a_directory_swapped_for_a_link_after_indexing_is_refused(
    tmp_path: Path, outside: Path, disk_root: Path, disk_config: FileSystemConfig
) -> None:
    fs = new_fs(disk_config)
    fs.write_file("/work/a.txt", "a")
    os.rename(disk_root / "work", tmp_path / "moved-away")
    os.symlink(outside, disk_root / "work")
    before = snapshot(outside)
    with pytest.raises(FileSystemError):
        fs.write_file("/work/a.txt", "through the swapped link")
    assert snapshot(outside) == before


def test_the_backend_refuses_raw_traversal_even_without_the_namespace_checks(
    disk_root: Path,
) -> None:
    backend = DiskPersistence(disk_root)
    for path in ["/../x", "/a/../../x", "relative", "/a//b", "/a\\..\\b", "/a\x00b"]:
        with pytest.raises(FileSystemError):
            backend.write(FileEntry.new_memory_file(path, "x"), {})
    with pytest.raises(PathNotDirectory):
        (disk_root / "file").write_text("x")
        backend.write(FileEntry.new_memory_file("/file/below", "x"), {})
    assert sorted(p.name for p in disk_root.iterdir()) == ["file"]


# Property: whatever the path, nothing outside the root is touched ----------------------

SPECIAL = [
    "..",
    ".",
    "",
    "~",
    "~root",
    "link",
    "secret-link",
    "secret.txt",
    "\x00",
    "a\x00b",
    "..\\..",
    "link\\..",
    " ",
    " x ",
    ".sagents-meta",
    ".sagents-tmp-1",
    "é",
    "💥",
    "\uff46\uff55\uff4c\uff4c",  # fullwidth "full"
    "\u202e",
    "\ud800",
    "x" * 256,
    "y" * 255,
    "tab\there",
    "new\nline",
]
# Mostly names that reach the disk (links among them), some hostile ones.
BENIGN = ["a", "b", "dir", "notes.md", "link", "secret-link", "secret.txt", "é", "💥"]
segments = st.one_of(
    st.sampled_from(BENIGN),
    st.sampled_from(BENIGN),
    st.sampled_from(BENIGN),
    st.sampled_from(SPECIAL),
    st.text(alphabet="ab./\\~\x00 é", min_size=0, max_size=6),
    st.text(min_size=1, max_size=12),
)
paths = st.builds(
    lambda parts, rooted: ("/" if rooted else "") + "/".join(parts),
    st.lists(segments, min_size=1, max_size=4),
    st.sampled_from([True, True, True, False]),
)
operations = st.lists(
    st.tuples(
        st.sampled_from(["write", "read", "delete", "move", "mkdir", "raw"]),
        paths,
        paths,
    ),
    min_size=1,
    max_size=8,
)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=operations)
def test_no_generated_path_escapes_the_disk_root(
    tmp_path: Path, outside: Path, disk_root: Path, ops: list[tuple[str, str, str]]
) -> None:
    before_outside = snapshot(outside)
    before_tmp = sorted(p.name for p in tmp_path.iterdir())
    backend = DiskPersistence(disk_root)
    fs = FileSystemState(
        SCOPE, configs=[FileSystemConfig(default=True, persistence=backend)]
    )
    for name, path, other in ops:
        try:
            if name == "write":
                fs.write_file(path, "data")
            elif name == "read":
                assert "TOP SECRET" not in (fs.read_file(path).content or "")
            elif name == "delete":
                fs.delete_file(path, recursive=True)
            elif name == "move":
                fs.move_file(path, other)
            elif name == "mkdir":
                fs.create_directory(path)
            else:  # the backend alone, bypassing the namespace's checks
                entry = FileEntry.new_memory_file(path, "raw")
                backend.write(entry, {})
                assert "TOP SECRET" not in (backend.load(entry, {}).content or "")
            event(f"{name} succeeded")
        except FileSystemError as exc:
            event(f"{name} refused: {type(exc).__name__}")
            assert "TOP SECRET" not in str(exc)
    assert snapshot(outside) == before_outside
    assert sorted(p.name for p in tmp_path.iterdir()) == before_tmp
    links = [p for p in disk_root.rglob("*") if p.is_symlink()]
    assert sorted(p.name for p in links) == ["link", "secret-link"]
    assert all(p.parent == disk_root for p in links)
