"""FileSystemState: every operation of the reference over memory storage."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from sagents_django.core.events import event_handlers
from sagents_django.core.exceptions import ConfigurationError
from sagents_django.core.filesystem import (
    DirectoryNotEmpty,
    FileEntry,
    FileExists,
    FileNotFound,
    FileSystemConfig,
    FileSystemError,
    FileSystemState,
    InvalidEntry,
    InvalidPath,
    MemoryPersistence,
    PathIsDirectory,
    PathNotDirectory,
    Persistence,
    PersistenceError,
    ReadOnlyPath,
    SizeLimitExceeded,
)

SCOPE = ("user", 1)


def stored_opts(base: str | None = None) -> dict[str, Any]:
    opts: dict[str, Any] = {"scope_key": SCOPE}
    if base:
        opts["base_directory"] = base
    return opts


@pytest.fixture
def store() -> MemoryPersistence:
    return MemoryPersistence()


@pytest.fixture
def fs(store: MemoryPersistence) -> FileSystemState:
    """/Memories is stored in ``store``; everything else is memory only."""
    return FileSystemState(
        SCOPE, configs=[FileSystemConfig(base_directory="Memories", persistence=store)]
    )


# Writing and reading ---------------------------------------------------------------


def test_a_written_file_reads_back(fs: FileSystemState) -> None:
    fs.write_file("/notes.txt", "hello")
    assert fs.read_file("/notes.txt").content == "hello"
    assert fs.read_file("notes.txt").content == "hello"
    assert fs.file_exists("/notes.txt")
    assert fs.list_files() == ["/notes.txt"]


def test_a_file_outside_every_config_lives_in_memory_only(
    fs: FileSystemState, store: MemoryPersistence
) -> None:
    entry = fs.write_file("/scratch.txt", "x")
    assert entry.persistence == "memory"
    assert store.paths() == []


def test_a_write_under_a_config_reaches_storage_before_returning(
    fs: FileSystemState, store: MemoryPersistence
) -> None:
    entry = fs.write_file("/Memories/a.md", "remember")
    assert entry.persistence == "persisted" and not entry.dirty
    assert store.load(entry, stored_opts("Memories")).content == "remember"


def test_overwriting_keeps_created_at_and_custom_metadata(fs: FileSystemState) -> None:
    first = fs.write_file("/a.txt", "one", custom={"tag": "t"}, title="A")
    second = fs.write_file("/a.txt", "two")
    assert second.content == "two"
    assert second.title == "A"
    assert second.metadata.created_at == first.metadata.created_at
    assert second.metadata.custom == {"tag": "t"}


def test_writing_creates_the_ancestor_directories(fs: FileSystemState) -> None:
    fs.write_file("/Characters/Hero/Backstory.md", "x")
    directories = [e for e in fs.list_entries() if e.is_directory]
    assert [(d.path, d.title) for d in directories] == [
        ("/Characters", "Characters"),
        ("/Characters/Hero", "Hero"),
    ]


def test_a_file_cannot_be_written_below_a_file(fs: FileSystemState) -> None:
    fs.write_file("/a.txt", "x")
    with pytest.raises(PathNotDirectory, match=r"/a\.txt is a file"):
        fs.write_file("/a.txt/b.txt", "y")
    assert fs.list_files() == ["/a.txt"]


def test_a_directory_cannot_be_overwritten_by_a_file(fs: FileSystemState) -> None:
    fs.write_file("/dir/a.txt", "x")
    with pytest.raises(PathIsDirectory):
        fs.write_file("/dir", "y")
    with pytest.raises(PathIsDirectory):
        fs.write_file("/Memories", "a config's directory is a directory")


def test_writing_an_invalid_path_is_refused(fs: FileSystemState) -> None:
    with pytest.raises(InvalidPath):
        fs.write_file("/a/../b", "x")
    with pytest.raises(TypeError):
        fs.write_file("/a", b"bytes")  # type: ignore[arg-type]
    assert fs.list_entries() == []


def test_reading_a_missing_file_is_file_not_found(fs: FileSystemState) -> None:
    with pytest.raises(FileNotFound, match=r"File not found: /nope\.txt"):
        fs.read_file("/nope.txt")
    with pytest.raises(FileNotFound):
        fs.read_file("/Memories/nope.txt")


def test_listing_synthesizes_directories_that_have_no_entry(
    fs: FileSystemState,
) -> None:
    fs.register_files([FileEntry.new_memory_file("/orphan/deep/file.txt", "x")])
    entries = {e.path: e for e in fs.list_entries()}
    assert entries["/orphan"].is_directory and entries["/orphan/deep"].is_directory
    assert fs.read_file("/orphan").is_directory
    assert fs.is_directory("/orphan/deep") and not fs.is_directory(
        "/orphan/deep/file.txt"
    )


def test_create_directory_makes_an_entry_and_refuses_duplicates(
    fs: FileSystemState, store: MemoryPersistence
) -> None:
    entry = fs.create_directory("/Memories/People", title="People")
    assert entry.is_directory and entry.title == "People"
    assert "/Memories/People" in store.paths(SCOPE, "Memories")
    with pytest.raises(FileExists):
        fs.create_directory("/Memories/People")


# Deleting ----------------------------------------------------------------------------


def test_deleting_a_persisted_file_removes_it_from_storage(
    fs: FileSystemState, store: MemoryPersistence
) -> None:
    fs.write_file("/Memories/a.md", "x")
    assert fs.delete_file("/Memories/a.md") == ["/Memories/a.md"]
    assert not fs.file_exists("/Memories/a.md")
    assert "/Memories/a.md" not in store.paths()


def test_deleting_a_missing_file_is_file_not_found(fs: FileSystemState) -> None:
    with pytest.raises(FileNotFound):
        fs.delete_file("/ghost.txt")


def test_a_non_empty_directory_is_deleted_only_recursively(fs: FileSystemState) -> None:
    fs.write_file("/d/a.txt", "x")
    fs.write_file("/d/e/b.txt", "y")
    with pytest.raises(DirectoryNotEmpty, match="3 entries"):
        fs.delete_file("/d")
    deleted = fs.delete_file("/d", recursive=True)
    assert deleted[-1] == "/d" and set(deleted) == {
        "/d",
        "/d/a.txt",
        "/d/e",
        "/d/e/b.txt",
    }
    assert fs.list_entries() == []


def test_a_config_directory_cannot_be_deleted(fs: FileSystemState) -> None:
    fs.write_file("/Memories/a.md", "x")
    with pytest.raises(ReadOnlyPath, match="storage directory"):
        fs.delete_file("/Memories", recursive=True)


# Moving ------------------------------------------------------------------------------


def test_moving_a_file_rekeys_it(fs: FileSystemState) -> None:
    fs.write_file("/draft.txt", "content")
    moved = fs.move_file("/draft.txt", "/archive/final.txt")
    assert [e.path for e in moved] == ["/archive/final.txt"]
    assert fs.read_file("/archive/final.txt").content == "content"
    assert not fs.file_exists("/draft.txt")
    assert fs.is_directory("/archive")


def test_moving_a_directory_moves_its_children_in_storage(
    fs: FileSystemState, store: MemoryPersistence
) -> None:
    fs.write_file("/Memories/drafts/a.md", "A")
    fs.write_file("/Memories/drafts/sub/b.md", "B")
    moved = fs.move_file("/Memories/drafts", "/Memories/published")
    assert [e.path for e in moved] == [
        "/Memories/published",
        "/Memories/published/a.md",
        "/Memories/published/sub",
        "/Memories/published/sub/b.md",
    ]
    assert store.paths(SCOPE, "Memories") == [
        "/Memories",
        "/Memories/published",
        "/Memories/published/a.md",
        "/Memories/published/sub",
        "/Memories/published/sub/b.md",
    ]
    assert fs.read_file("/Memories/published/sub/b.md").content == "B"
    assert moved[0].title == "published"


def test_a_directory_implied_by_its_files_can_be_moved(fs: FileSystemState) -> None:
    fs.register_files(FileEntry.new_memory_file("/implied/x.txt", "x"))
    fs.move_file("/implied", "/explicit")
    assert fs.list_files() == ["/explicit/x.txt"]


@pytest.mark.parametrize(
    ("old", "new", "error", "message"),
    [
        ("/ghost", "/b", FileNotFound, "File not found: /ghost"),
        ("/a.txt", "/b.txt", FileExists, "Target already exists: /b.txt"),
        ("/d", "/d/inner", InvalidPath, "into itself"),
        ("/a.txt", "/Memories/a.txt", FileSystemError, "different storage backends"),
        ("/a.txt", "/b.txt/c.txt", PathNotDirectory, "is a file"),
        ("/Memories", "/Elsewhere", ReadOnlyPath, "storage directory"),
    ],
)
def test_a_move_that_cannot_be_done_changes_nothing(
    fs: FileSystemState, old: str, new: str, error: type, message: str
) -> None:
    fs.write_file("/a.txt", "a")
    fs.write_file("/b.txt", "b")
    fs.write_file("/d/x.txt", "x")
    fs.write_file("/Memories/m.md", "m")
    before = [(e.path, e.content) for e in fs.list_entries()]
    with pytest.raises(error, match=message):
        fs.move_file(old, new)
    assert [(e.path, e.content) for e in fs.list_entries()] == before


def test_a_backend_without_move_gets_a_write_and_a_delete(
    store: MemoryPersistence,
) -> None:
    class NoMove(MemoryPersistence):
        def move_in_storage(self, entry: Any, new_path: str, opts: Any) -> None:
            return None

    backend = NoMove()
    fs = FileSystemState(
        SCOPE, configs=[FileSystemConfig(default=True, persistence=backend)]
    )
    fs.write_file("/d/a.txt", "A")
    other = FileSystemState(
        SCOPE, configs=[FileSystemConfig(default=True, persistence=backend)]
    )
    other.move_file("/d", "/e")  # a.txt is not loaded here: the move must load it
    assert backend.paths() == ["/e", "/e/a.txt"]
    assert fs.read_file("/e/a.txt").content == "A"


# Read-only configs and size limits -------------------------------------------------------


@pytest.fixture
def readonly_fs() -> FileSystemState:
    shelf = MemoryPersistence()
    shelf.write(
        FileEntry.new_memory_file("/shared/guide.md", "Read me"), stored_opts("shared")
    )
    return FileSystemState(
        SCOPE,
        configs=[
            FileSystemConfig(base_directory="shared", persistence=shelf, readonly=True)
        ],
    )


def test_a_read_only_directory_can_be_read(readonly_fs: FileSystemState) -> None:
    assert readonly_fs.read_file("/shared/guide.md").content == "Read me"


@pytest.mark.parametrize(
    "change",
    [
        lambda fs: fs.write_file("/shared/new.md", "x"),
        lambda fs: fs.write_file("/shared/guide.md", "x"),
        lambda fs: fs.delete_file("/shared/guide.md"),
        lambda fs: fs.move_file("/shared/guide.md", "/guide.md"),
        lambda fs: fs.move_file("/mine.md", "/shared/mine.md"),
        lambda fs: fs.create_directory("/shared/dir"),
        lambda fs: fs.update_entry("/shared/guide.md", {"title": "T"}),
        lambda fs: fs.update_custom_metadata("/shared/guide.md", {"k": 1}),
    ],
    ids=[
        "new",
        "overwrite",
        "delete",
        "move-out",
        "move-in",
        "mkdir",
        "entry",
        "custom",
    ],
)
def test_a_read_only_directory_refuses_every_change(
    readonly_fs: FileSystemState, change: Any
) -> None:
    readonly_fs.write_file("/mine.md", "mine")
    with pytest.raises(ReadOnlyPath, match="read-only directory /shared"):
        change(readonly_fs)
    assert readonly_fs.read_file("/shared/guide.md").content == "Read me"


def test_a_file_larger_than_the_per_file_limit_is_refused() -> None:
    fs = FileSystemState(SCOPE, max_file_size=10)
    with pytest.raises(SizeLimitExceeded, match="limit per file is 10 bytes"):
        fs.write_file("/big.txt", "x" * 11)
    assert not fs.file_exists("/big.txt")
    fs.write_file("/ok.txt", "é" * 5)  # 10 bytes of UTF-8


def test_a_config_can_set_a_smaller_per_file_limit() -> None:
    config = FileSystemConfig(
        base_directory="small", persistence=MemoryPersistence(), max_file_size=3
    )
    fs = FileSystemState(SCOPE, configs=[config])
    fs.write_file("/elsewhere.txt", "long enough")
    with pytest.raises(SizeLimitExceeded, match="limit per file is 3"):
        fs.write_file("/small/x.txt", "four")


def test_the_filesystem_total_is_limited_but_shrinking_is_allowed() -> None:
    fs = FileSystemState(SCOPE, max_total_size=10)
    fs.write_file("/a.txt", "12345")
    fs.write_file("/b.txt", "12345")
    with pytest.raises(SizeLimitExceeded, match="limit is 10 bytes"):
        fs.write_file("/c.txt", "1")
    fs.write_file("/a.txt", "1")  # shrinks
    fs.write_file("/c.txt", "1234")
    assert fs.stats()["total_size"] == 10


def test_a_config_total_is_limited_separately() -> None:
    config = FileSystemConfig(
        base_directory="q", persistence=MemoryPersistence(), max_total_size=4
    )
    fs = FileSystemState(SCOPE, configs=[config])
    fs.write_file("/q/a.txt", "1234")
    fs.write_file("/outside.txt", "plenty of room here")
    with pytest.raises(SizeLimitExceeded, match="bring /q to 5 bytes"):
        fs.write_file("/q/b.txt", "1")


# Storage failures, lazy loading, refresh and reset ----------------------------------


class BrokenStorage(Persistence):
    def write(self, entry: FileEntry, opts: dict[str, Any]) -> FileEntry:
        raise OSError("disk on fire")


def test_a_failing_backend_leaves_the_filesystem_unchanged() -> None:
    fs = FileSystemState(
        SCOPE,
        configs=[FileSystemConfig(base_directory="b", persistence=BrokenStorage())],
    )
    with pytest.raises(PersistenceError, match="disk on fire"):
        fs.write_file("/b/file.txt", "x")
    assert not fs.file_exists("/b/file.txt")


def test_persisted_files_are_indexed_without_content_and_loaded_on_read(
    fs: FileSystemState, store: MemoryPersistence
) -> None:
    fs.write_file("/Memories/a.md", "lazy")
    second = FileSystemState(
        SCOPE, configs=[FileSystemConfig(base_directory="Memories", persistence=store)]
    )
    assert second.stats()["not_loaded_files"] == 1
    [indexed] = [e for e in second.list_entries() if e.path == "/Memories/a.md"]
    assert not indexed.loaded and indexed.content is None
    assert second.read_file("/Memories/a.md").content == "lazy"
    assert second.stats()["not_loaded_files"] == 0


def test_a_file_stored_by_someone_else_after_indexing_is_found_on_read(
    fs: FileSystemState, store: MemoryPersistence
) -> None:
    store.write(
        FileEntry.new_memory_file("/Memories/late.md", "late"), stored_opts("Memories")
    )
    assert fs.read_file("/Memories/late.md").content == "late"
    assert fs.file_exists("/Memories/late.md")


def test_refresh_merges_other_writers_changes_and_keeps_unsaved_ones(
    store: MemoryPersistence,
) -> None:
    config = FileSystemConfig(
        base_directory="Memories", persistence=store, debounce_ms=60_000
    )
    mine = FileSystemState(SCOPE, configs=[config])
    theirs = FileSystemState(SCOPE, configs=[config])
    mine.write_file("/Memories/shared.md", "v1")
    mine.write_file("/Memories/doomed.md", "x")
    mine.write_file("/Memories/editing.md", "v1")
    mine.write_file("/Memories/editing.md", "unsaved")  # debounced: dirty
    theirs.write_file("/Memories/new.md", "theirs")
    theirs.write_file("/Memories/shared.md", "v2, longer")
    theirs.delete_file("/Memories/doomed.md")
    # Their turn ends (a filesystem indexes storage on first use, so theirs knew
    # shared.md and debounced its overwrite).
    theirs.flush_all()
    mine.refresh()
    assert mine.read_file("/Memories/new.md").content == "theirs"
    assert mine.read_file("/Memories/shared.md").content == "v2, longer"
    assert not mine.file_exists("/Memories/doomed.md")
    assert mine.read_file("/Memories/editing.md").content == "unsaved"


def test_reset_drops_memory_files_and_unsaved_changes(store: MemoryPersistence) -> None:
    config = FileSystemConfig(
        base_directory="Memories", persistence=store, debounce_ms=60_000
    )
    fs = FileSystemState(SCOPE, configs=[config])
    fs.write_file("/Memories/kept.md", "stored")
    fs.write_file("/Memories/kept.md", "unsaved edit")
    fs.write_file("/scratch.txt", "memory only")
    fs.reset()
    assert fs.list_files() == ["/Memories/kept.md"]
    assert fs.read_file("/Memories/kept.md").content == "stored"
    assert fs.pending_paths == []


# Dirty tracking and debounce -----------------------------------------------------------


@pytest.fixture
def debounced(store: MemoryPersistence) -> FileSystemState:
    config = FileSystemConfig(
        base_directory="Memories", persistence=store, debounce_ms=60_000
    )
    return FileSystemState(SCOPE, configs=[config])


def test_with_debounce_a_new_file_is_stored_at_once_but_an_edit_waits(
    debounced: FileSystemState, store: MemoryPersistence
) -> None:
    created = debounced.write_file("/Memories/a.md", "first")
    assert not created.dirty
    edited = debounced.write_file("/Memories/a.md", "second")
    assert edited.dirty_content and not edited.dirty_non_content
    assert debounced.pending_paths == ["/Memories/a.md"]
    assert debounced.stats()["dirty_files"] == 1
    assert store.load(edited, stored_opts("Memories")).content == "first"
    assert debounced.flush_all() == 1
    assert store.load(edited, stored_opts("Memories")).content == "second"
    assert not debounced.read_file("/Memories/a.md").dirty
    assert debounced.pending_paths == []


def test_a_metadata_only_change_is_stored_without_rewriting_content(
    debounced: FileSystemState, store: MemoryPersistence
) -> None:
    debounced.write_file("/Memories/a.md", "body")
    writes = store.writes
    entry = debounced.update_custom_metadata(
        "/Memories/a.md", {"tags": ["draft"]}, persist="debounce"
    )
    assert entry.dirty_non_content and not entry.dirty_content
    debounced.flush_all()
    assert store.writes == writes  # update_metadata_in_storage, not write
    assert store.load(entry, stored_opts("Memories")).custom == {"tags": ["draft"]}


def test_an_entry_update_is_stored_immediately_by_default(
    fs: FileSystemState, store: MemoryPersistence
) -> None:
    fs.write_file("/Memories/a.md", "body")
    entry = fs.update_entry("/Memories/a.md", {"title": "My Doc", "file_type": "note"})
    assert entry.title == "My Doc" and not entry.dirty
    stored = store.load(entry, stored_opts("Memories"))
    assert (stored.title, stored.file_type) == ("My Doc", "note")


def test_the_debounce_timer_stores_an_edit_on_its_own(store: MemoryPersistence) -> None:
    config = FileSystemConfig(
        base_directory="Memories", persistence=store, debounce_ms=20
    )
    fs = FileSystemState(SCOPE, configs=[config])
    fs.write_file("/Memories/a.md", "one")
    entry = fs.write_file("/Memories/a.md", "two")
    deadline = time.monotonic() + 5
    while fs.pending_paths and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.load(entry, stored_opts("Memories")).content == "two"
    assert not fs.read_file("/Memories/a.md").dirty


@pytest.mark.parametrize(
    ("attrs", "message"),
    [
        ({"content": "x"}, "only title, id, file_type"),
        ({"title": "a/b"}, "cannot contain"),
        ({"title": 5}, "must be a string"),
    ],
)
def test_update_entry_accepts_only_entry_fields(
    fs: FileSystemState, attrs: dict, message: str
) -> None:
    fs.write_file("/a.txt", "x")
    with pytest.raises(InvalidEntry, match=message):
        fs.update_entry("/a.txt", attrs)


def test_an_update_that_changes_nothing_returns_the_entry_as_is(
    fs: FileSystemState,
) -> None:
    entry = fs.write_file("/a.txt", "x", title="T")
    assert fs.update_entry("/a.txt", {"title": "T"}) is entry


# Events, configs, threads ------------------------------------------------------------------


def test_changes_are_announced_as_events_with_the_scope() -> None:
    seen: list[tuple[str, dict]] = []
    fs = FileSystemState(("project", 7))
    with event_handlers(lambda name, data: seen.append((name, data))):
        fs.write_file("/d/a.txt", "x")
        fs.move_file("/d/a.txt", "/d/b.txt")
        fs.delete_file("/d/b.txt")
    assert seen == [
        ("file_updated", {"path": "/d", "scope": ["project", 7]}),
        ("file_updated", {"path": "/d/a.txt", "scope": ["project", 7]}),
        ("file_deleted", {"path": "/d/a.txt", "scope": ["project", 7]}),
        ("file_updated", {"path": "/d/b.txt", "scope": ["project", 7]}),
        ("file_deleted", {"path": "/d/b.txt", "scope": ["project", 7]}),
    ]


def test_a_subscriber_hears_changes_until_it_unsubscribes(fs: FileSystemState) -> None:
    heard: list[str] = []
    unsubscribe = fs.subscribe(
        lambda name, data: heard.append(f"{name} {data['path']}")
    )
    fs.write_file("/a.txt", "x")
    unsubscribe()
    fs.write_file("/b.txt", "x")
    assert heard == ["file_updated /a.txt"]


def test_a_raising_subscriber_does_not_break_a_write(fs: FileSystemState) -> None:
    def boom(name: str, data: dict) -> None:
        raise RuntimeError("listener bug")

    fs.subscribe(boom)
    fs.write_file("/a.txt", "x")
    assert fs.read_file("/a.txt").content == "x"


def test_configs_are_unique_per_base_directory_and_default(
    store: MemoryPersistence,
) -> None:
    fs = FileSystemState(
        SCOPE, configs=[FileSystemConfig(base_directory="a", persistence=store)]
    )
    with pytest.raises(ConfigurationError, match="already has"):
        fs.register_persistence(FileSystemConfig(base_directory="a", persistence=store))
    fs.register_persistence(
        FileSystemConfig(default=True, persistence=MemoryPersistence())
    )
    with pytest.raises(ConfigurationError, match="Only one"):
        fs.register_persistence(
            FileSystemConfig(default=True, base_directory="b", persistence=store)
        )


def test_registering_a_config_indexes_what_it_stores(store: MemoryPersistence) -> None:
    store.write(FileEntry.new_memory_file("/docs/a.md", "x"), stored_opts("docs"))
    fs = FileSystemState(SCOPE)
    fs.register_persistence(FileSystemConfig(base_directory="docs", persistence=store))
    assert fs.list_files() == ["/docs/a.md"]


def test_the_deepest_base_directory_wins(store: MemoryPersistence) -> None:
    outer = FileSystemConfig(base_directory="team", persistence=store)
    inner = FileSystemConfig(
        base_directory="team/private", persistence=MemoryPersistence()
    )
    fs = FileSystemState(SCOPE, configs=[outer, inner])
    assert fs.config_for_path("/team/private/x") is inner
    assert fs.config_for_path("/team/x") is outer
    assert fs.config_for_path("/x") is None


def test_concurrent_writers_lose_nothing(fs: FileSystemState) -> None:
    def writer(n: int) -> None:
        for i in range(50):
            fs.write_file(f"/t{n}/f{i}.txt", "x" * (i + 1))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(fs.list_files()) == 400
    assert fs.stats()["total_size"] == 8 * sum(range(1, 51))
