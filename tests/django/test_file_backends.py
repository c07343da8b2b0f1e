"""The Django filesystem backends: StoredFile rows and any Django Storage.

Shared behaviour runs against three backends (the database, FileSystemStorage on a
temporary directory, InMemoryStorage); what only one of them can show (query counts,
rows, keys on disk) has its own tests. The whole module runs on SQLite and on
PostgreSQL.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.files.storage import FileSystemStorage, InMemoryStorage
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sagents_django.core import Agent, Message, ToolCall
from sagents_django.core.exceptions import ConfigurationError
from sagents_django.core.filesystem import (
    FileEntry,
    FileExists,
    FileNotFound,
    FileSystemConfig,
    FileSystemState,
    InvalidEntry,
    InvalidPath,
    PersistenceError,
    UnsafePath,
    stop_filesystem,
)
from sagents_django.core.middleware.filesystem import FileSystem
from sagents_django.core.testing import ScriptedModel
from sagents_django.filesystems import DatabasePersistence, StoragePersistence
from sagents_django.filesystems.encoding import ESCAPED
from sagents_django.filesystems.records import record_name
from sagents_django.models import StoredFile

pytestmark = pytest.mark.django_db

Backend = DatabasePersistence | StoragePersistence
NUL_TEXT = "before\x00after\x00"
UNICODE = "Grüße, 日本語, emoji 🎉, RTL שלום\n" * 3


def make_backend(kind: str, tmp_path: Path) -> Backend:
    if kind == "database":
        return DatabasePersistence()
    if kind == "filesystem-storage":
        return StoragePersistence(FileSystemStorage(location=tmp_path / "media"))
    return StoragePersistence(InMemoryStorage())


@pytest.fixture(params=["database", "filesystem-storage", "memory-storage"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return make_backend(request.param, tmp_path)


@pytest.fixture
def scope() -> tuple[str, str]:
    return ("user", uuid.uuid4().hex[:12])


FileSystemFactory = Callable[..., FileSystemState]


@pytest.fixture
def new_fs(backend: Backend, scope: tuple[str, str]) -> FileSystemFactory:
    """A fresh FileSystemState over ``backend`` (a second call is a second worker)."""

    def build(
        for_scope: Any = None, *, base_directory: str | None = None
    ) -> FileSystemState:
        config = FileSystemConfig(
            default=base_directory is None,
            base_directory=base_directory,
            persistence=backend,
        )
        return FileSystemState(
            for_scope or scope, configs=[config], max_file_size=4 * 1024 * 1024
        )

    return build


def opts_for(scope: Any, base_directory: str | None = None) -> dict[str, Any]:
    config = FileSystemConfig(
        default=base_directory is None,
        base_directory=base_directory,
        persistence=DatabasePersistence(),
    )
    return config.build_storage_opts(scope)


def paths(entries: list[FileEntry]) -> list[str]:
    return sorted(e.path for e in entries)


# Every backend ----------------------------------------------------------------------


def test_each_persistence_operation_works_on_the_backend_directly(
    backend: Backend, scope: tuple[str, str]
) -> None:
    opts = opts_for(scope)
    entry = FileEntry.new_persisted_file(
        "/notes/a.md", "# A", title="Alpha", custom={"tag": "x"}
    )
    stored = backend.write(entry, opts)
    assert (stored.dirty, stored.persistence) == (False, "persisted")
    assert stored.metadata is not None and stored.metadata.size == 3

    [listed] = backend.list_persisted_entries(opts)
    assert (listed.path, listed.loaded, listed.content, listed.title) == (
        "/notes/a.md",
        False,
        None,
        "Alpha",
    )
    assert listed.custom == {"tag": "x"} and listed.size == 3

    loaded = backend.load(listed, opts)
    assert (loaded.content, loaded.loaded, loaded.title) == ("# A", True, "Alpha")

    retitled = backend.update_metadata_in_storage(loaded.with_custom({"more": 1}), opts)
    assert retitled is not None and not retitled.dirty
    [relisted] = backend.list_persisted_entries(opts)
    assert relisted.custom == {"tag": "x", "more": 1}
    assert backend.load(relisted, opts).content == "# A"

    backend.delete(loaded, opts)
    assert backend.list_persisted_entries(opts) == []
    with pytest.raises(FileNotFound):
        backend.load(listed, opts)
    backend.delete(loaded, opts)  # a missing entry is not an error


def test_a_second_filesystem_of_the_scope_sees_files_and_loads_them_lazily(
    new_fs: FileSystemFactory,
) -> None:
    first = new_fs()
    first.write_file("/notes/today.md", "# Today", title="Today's notes")
    first.write_file("/data.json", '{"a": 1}')
    first.create_directory("/empty")

    second = new_fs()
    assert second.stats()["not_loaded_files"] == 2
    assert second.list_files() == ["/data.json", "/notes/today.md"]
    assert second.is_directory("/empty")
    entry = second.read_file("/notes/today.md")
    assert (entry.content, entry.title) == ("# Today", "Today's notes")
    assert entry.metadata is not None
    assert entry.metadata.mime_type == "text/markdown"
    assert second.stats()["not_loaded_files"] == 1


def test_a_file_another_worker_wrote_after_indexing_is_found_on_read(
    new_fs: FileSystemFactory,
) -> None:
    reader = new_fs()
    new_fs().write_file("/late.txt", "written later", title="Late")
    entry = reader.read_file("/late.txt")
    assert (entry.content, entry.title) == ("written later", "Late")


def test_refresh_sees_other_workers_changes_and_deletions(
    new_fs: FileSystemFactory,
) -> None:
    first, second = new_fs(), new_fs()
    first.write_file("/a.txt", "one")
    first.write_file("/b.txt", "bee")
    second.refresh()
    assert second.read_file("/a.txt").content == "one"
    first.write_file("/a.txt", "two, longer")
    first.delete_file("/b.txt")
    second.refresh()
    assert second.read_file("/a.txt").content == "two, longer"
    assert second.list_files() == ["/a.txt"]


def test_a_metadata_update_keeps_the_content_and_reaches_other_workers(
    new_fs: FileSystemFactory,
) -> None:
    new_fs().write_file("/song.md", "la la la")
    second = new_fs()
    second.update_custom_metadata("/song.md", {"genre": "pop"})
    second.update_entry("/song.md", {"file_type": "lyrics", "title": "Song"})
    assert second.stats()["not_loaded_files"] == 1  # no content was needed

    third = new_fs()
    [entry] = [e for e in third.list_entries() if e.path == "/song.md"]
    assert (entry.custom, entry.file_type, entry.title) == (
        {"genre": "pop"},
        "lyrics",
        "Song",
    )
    assert third.read_file("/song.md").content == "la la la"


def test_moving_a_directory_moves_every_file_below_it(
    new_fs: FileSystemFactory,
) -> None:
    first = new_fs()
    first.write_file("/drafts/a.md", "A", title="Alpha")
    first.write_file("/drafts/deep/b.md", "B")
    first.write_file("/drafted.md", "not inside")
    moved = first.move_file("/drafts", "/final")
    assert "/final/deep/b.md" in [e.path for e in moved]

    second = new_fs()
    assert second.list_files() == ["/drafted.md", "/final/a.md", "/final/deep/b.md"]
    assert not second.is_directory("/drafts")
    entry = second.read_file("/final/a.md")
    assert (entry.content, entry.title) == ("A", "Alpha")
    assert second.read_file("/final/deep/b.md").content == "B"


def test_moving_a_file_onto_another_is_refused(new_fs: FileSystemFactory) -> None:
    fs = new_fs()
    fs.write_file("/a.txt", "a")
    fs.write_file("/b.txt", "b")
    with pytest.raises(FileExists):
        fs.move_file("/a.txt", "/b.txt")
    again = new_fs()
    assert again.read_file("/a.txt").content == "a"
    assert again.read_file("/b.txt").content == "b"


def test_two_scopes_never_see_each_others_files(
    new_fs: FileSystemFactory, scope: tuple[str, str]
) -> None:
    mine = new_fs()
    mine.write_file("/secret.txt", "mine")
    for other in [("user", scope[1] + "x"), ("team", scope[1]), ("user", "1")]:
        theirs = new_fs(other)
        assert theirs.list_files() == []
        with pytest.raises(FileNotFound):
            theirs.read_file("/secret.txt")
        theirs.write_file("/secret.txt", "theirs")
        theirs.delete_file("/secret.txt")
    assert new_fs().read_file("/secret.txt").content == "mine"


def test_a_config_with_a_base_directory_lists_only_its_own_files(
    new_fs: FileSystemFactory,
) -> None:
    new_fs().write_file("/outside.txt", "default config")
    memories = new_fs(base_directory="Memories")
    memories.write_file("/Memories/profile.md", "likes tea")
    again = new_fs(base_directory="Memories")
    assert again.list_files() == ["/Memories/profile.md"]
    assert again.read_file("/Memories/profile.md").content == "likes tea"


@pytest.mark.parametrize(
    "path",
    [
        "/../escape.txt",
        "/a/../../escape.txt",
        "relative.txt",
        "/a//b.txt",
        "/nul\x00.txt",
        "/trailing/",
        "/",
        "",
        "/~/home.txt",
    ],
)
def test_the_backend_itself_refuses_hostile_paths(
    backend: Backend, scope: tuple[str, str], path: str
) -> None:
    opts = opts_for(scope)
    entry = FileEntry(path=path, content="x", persistence="persisted")
    for operation in (backend.write, backend.load, backend.delete):
        with pytest.raises(InvalidPath):
            operation(entry, opts)
    assert backend.list_persisted_entries(opts) == []


def test_the_backend_refuses_paths_outside_its_base_directory(
    backend: Backend, scope: tuple[str, str]
) -> None:
    opts = opts_for(scope, base_directory="Memories")
    with pytest.raises(UnsafePath, match="outside /Memories"):
        backend.write(FileEntry(path="/Other/x.md", content="x"), opts)
    with pytest.raises(UnsafePath):
        backend.write(FileEntry(path="/Memoriesx/x.md", content="x"), opts)


def test_a_hostile_path_from_the_model_is_a_tool_error_and_stores_nothing(
    new_fs: FileSystemFactory,
) -> None:
    fs = new_fs()
    for path in ["/../../etc/passwd", "/a/./b", "/x\x00y"]:
        with pytest.raises(InvalidPath):
            fs.write_file(path, "x")
    assert new_fs().list_files() == []


def test_content_with_nul_bytes_and_lone_surrogates_round_trips(
    new_fs: FileSystemFactory,
) -> None:
    fs = new_fs()
    fs.write_file("/nul.bin", NUL_TEXT)
    fs.write_file("/surrogate.txt", "half a pair: \ud800 end")
    fs.write_file("/marker.txt", ESCAPED + "looks escaped but is not")
    again = new_fs()
    assert again.read_file("/nul.bin").content == NUL_TEXT
    assert again.read_file("/surrogate.txt").content == "half a pair: \ud800 end"
    assert again.read_file("/marker.txt").content == (
        ESCAPED + "looks escaped but is not"
    )
    assert again.read_file("/nul.bin").size == len(NUL_TEXT.encode())


def test_metadata_with_a_nul_byte_is_refused_with_a_message_naming_it(
    new_fs: FileSystemFactory,
) -> None:
    fs = new_fs()
    fs.write_file("/a.md", "text")
    with pytest.raises(InvalidEntry, match="contains a NUL character"):
        fs.update_custom_metadata("/a.md", {"note": "bad\x00value"})
    with pytest.raises(InvalidEntry, match="NUL"):
        fs.write_file("/b.md", "text", custom={"k\x00": 1})
    assert new_fs().list_files() == ["/a.md"]


def test_unicode_paths_and_content_and_a_two_megabyte_file_round_trip(
    new_fs: FileSystemFactory,
) -> None:
    big = ("0123456789abcdef" * 64 + "\n") * 2000  # about 2 MB
    fs = new_fs()
    fs.write_file("/notes/日本語 ✓.md", UNICODE)
    fs.write_file("/big.txt", big)
    again = new_fs()
    assert again.read_file("/notes/日本語 ✓.md").content == UNICODE
    entry = again.read_file("/big.txt")
    assert entry.content == big and entry.size == len(big) > 2_000_000


def test_overwriting_a_file_keeps_one_copy(new_fs: FileSystemFactory) -> None:
    fs = new_fs()
    for text in ["one", "two", "three"]:
        fs.write_file("/again.txt", text)
    again = new_fs()
    assert again.list_files() == ["/again.txt"]
    assert again.read_file("/again.txt").content == "three"


def test_a_deleted_directory_can_become_a_file(new_fs: FileSystemFactory) -> None:
    fs = new_fs()
    fs.write_file("/thing/inner.txt", "x")
    fs.delete_file("/thing", recursive=True)
    fs.write_file("/thing", "now a file")
    assert new_fs().read_file("/thing").content == "now a file"


def test_a_scope_that_is_not_a_kind_and_id_pair_is_refused(
    backend: Backend,
) -> None:
    with pytest.raises(ConfigurationError, match=r"\(kind, id\) scope"):
        backend.write(FileEntry(path="/a", content=""), opts_for("just-a-string"))


# Through an agent turn --------------------------------------------------------------


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(
        call_id=f"call-{uuid.uuid4().hex[:8]}", name=name, arguments=arguments
    )


async def run_turn(scope: tuple[str, str], backend: Backend, *steps: ToolCall) -> Any:
    """One turn of an agent built on the event loop, as the runtime builds them."""
    replies: list[Any] = [Message.assistant(tool_calls=[step]) for step in steps]
    agent = Agent(
        model=ScriptedModel([*replies, "Done."]),
        middleware=[
            FileSystem(
                filesystem_scope=scope,
                configs=[FileSystemConfig(default=True, persistence=backend)],
            )
        ],
        replace_default_middleware=True,
    )
    result = await agent.aexecute([Message.user("Go")])
    assert result.ok, result.error
    return [r for m in result.state.messages for r in m.tool_results]


@pytest.fixture
def agent_scope() -> Iterator[tuple[str, str]]:
    key = ("user", uuid.uuid4().hex[:12])
    yield key
    stop_filesystem(key)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", ["database", "filesystem-storage"])
async def test_an_agent_turn_writes_and_reads_files_through_the_backend(
    kind: str, tmp_path: Path, agent_scope: tuple[str, str]
) -> None:
    backend = make_backend(kind, tmp_path)
    written, read = await run_turn(
        agent_scope,
        backend,
        call("write_file", file_path="/plan.md", content="# Plan\nstep one"),
        call("read_file", file_path="/plan.md"),
    )
    assert not written.is_error and not read.is_error
    assert read.content == "     1\t# Plan\n     2\tstep one"

    # A later turn in a fresh process (no filesystem in the registry) lists the file
    # while the agent is built on the event loop, and reads it from storage.
    stop_filesystem(agent_scope)
    [listing, again] = await run_turn(
        agent_scope,
        backend,
        call("ls"),
        call("read_file", file_path="/plan.md"),
    )
    assert '"path": "/plan.md"' in listing.content
    assert again.content == read.content
    if kind == "database":
        assert await sync_to_async(stored_content)(agent_scope, "/plan.md") == (
            "# Plan\nstep one"
        )


def stored_content(scope: tuple[str, str], path: str) -> str:
    """A row's content, read from a helper thread that must not keep a connection
    open after the test (PostgreSQL could not drop the test database)."""
    try:
        return StoredFile.objects.get(
            scope_kind=scope[0], scope_id=scope[1], path=path
        ).content
    finally:
        connection.close()


@pytest.mark.django_db(transaction=True)
async def test_the_database_backend_works_when_called_on_the_event_loop(
    scope: tuple[str, str],
) -> None:
    backend = DatabasePersistence()
    opts = opts_for(scope)
    backend.write(FileEntry.new_persisted_file("/loop.txt", "on the loop"), opts)
    [listed] = backend.list_persisted_entries(opts)
    assert backend.load(listed, opts).content == "on the loop"
    config = FileSystemConfig(default=True, persistence=backend)
    assert FileSystemState(scope, configs=[config]).list_files() == ["/loop.txt"]


@pytest.mark.django_db(transaction=True)
def test_a_worker_thread_keeps_no_connection_a_backend_call_opened(
    scope: tuple[str, str],
) -> None:
    if connection.vendor == "sqlite" and connection.is_in_memory_db():
        pytest.skip("Django never closes an in-memory SQLite connection")
    backend = DatabasePersistence()
    opts = opts_for(scope)
    backend.write(FileEntry.new_persisted_file("/t.txt", "x"), opts)
    left_open: list[bool] = []

    def worker() -> None:
        backend.list_persisted_entries(opts)
        left_open.append(connection.connection is not None)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert left_open == [False]


# The database backend ---------------------------------------------------------------


@pytest.fixture
def db_fs(scope: tuple[str, str]) -> FileSystemFactory:
    def build(for_scope: Any = None) -> FileSystemState:
        config = FileSystemConfig(default=True, persistence=DatabasePersistence())
        return FileSystemState(for_scope or scope, configs=[config])

    return build


def test_files_are_rows_of_their_scope_with_the_full_path(
    db_fs: FileSystemFactory,
) -> None:
    db_fs(("project", 7)).write_file(
        "/docs/a.md", "# A", title="Doc A", custom={"tags": ["x"]}
    )
    row = StoredFile.objects.get(scope_kind="project", scope_id="7", path="/docs/a.md")
    assert (row.content, row.size, row.mime_type) == ("# A", 3, "text/markdown")
    assert row.custom_metadata["custom"] == {"tags": ["x"]}
    assert row.custom_metadata["title"] == "Doc A"
    directory = StoredFile.objects.get(scope_id="7", path="/docs")
    assert directory.mime_type == "inode/directory"


def test_a_listing_is_one_query_without_content_and_a_read_is_one_more(
    db_fs: FileSystemFactory, django_assert_num_queries: Any
) -> None:
    writer = db_fs()
    for index in range(5):
        writer.write_file(f"/f{index}.txt", "x" * 1000)

    with django_assert_num_queries(0):
        reader = db_fs()  # building does no I/O: storage is listed on first use
    with django_assert_num_queries(1) as listing:
        reader.file_exists("/f0.txt")
    [query] = listing.captured_queries
    assert '"content"' not in query["sql"]
    assert reader.stats()["not_loaded_files"] == 5

    with django_assert_num_queries(1):
        assert reader.read_file("/f3.txt").content == "x" * 1000
    with django_assert_num_queries(0):
        reader.read_file("/f3.txt")
    assert reader.stats()["not_loaded_files"] == 4


def test_a_write_is_one_upsert(db_fs: FileSystemFactory) -> None:
    fs = db_fs()
    fs.write_file("/a.txt", "one")
    with CaptureQueriesContext(connection) as queries:
        fs.write_file("/a.txt", "two")
    [query] = queries.captured_queries
    assert "ON CONFLICT" in query["sql"].upper()
    assert StoredFile.objects.get(path="/a.txt").content == "two"


def test_a_metadata_only_update_is_one_update_that_leaves_content_alone(
    db_fs: FileSystemFactory, scope: tuple[str, str]
) -> None:
    db_fs().write_file("/song.md", "la la la")
    before = StoredFile.objects.get(scope_id=scope[1], path="/song.md")
    fs = db_fs()
    assert fs.file_exists("/song.md")  # the first use lists storage
    with CaptureQueriesContext(connection) as queries:
        fs.update_custom_metadata("/song.md", {"genre": "pop"})
    [query] = queries.captured_queries
    assert query["sql"].startswith("UPDATE")
    assert '"content"' not in query["sql"] and '"size"' not in query["sql"]
    after = StoredFile.objects.get(pk=before.pk)
    assert after.custom_metadata["custom"] == {"genre": "pop"}
    assert (after.content, after.updated_at) == (before.content, before.updated_at)


def test_moving_a_directory_renames_its_rows_in_one_statement(
    db_fs: FileSystemFactory, scope: tuple[str, str]
) -> None:
    fs = db_fs()
    fs.write_file("/a/one.txt", "1")
    fs.write_file("/a/sub/two.txt", "2")
    ids = dict(StoredFile.objects.filter(scope_id=scope[1]).values_list("path", "pk"))
    backend = DatabasePersistence()
    with CaptureQueriesContext(connection) as queries:
        backend.move_in_storage(fs.read_file("/a"), "/b", opts_for(scope))
    statements = [q["sql"].split()[0] for q in queries.captured_queries]
    assert [s for s in statements if s not in ("SAVEPOINT", "RELEASE")] == [
        "SELECT",
        "UPDATE",
    ]
    moved = dict(StoredFile.objects.filter(scope_id=scope[1]).values_list("path", "pk"))
    assert moved == {
        "/b": ids["/a"],
        "/b/one.txt": ids["/a/one.txt"],
        "/b/sub": ids["/a/sub"],
        "/b/sub/two.txt": ids["/a/sub/two.txt"],
    }


def test_a_move_that_clashes_inside_the_subtree_changes_no_row(
    db_fs: FileSystemFactory, scope: tuple[str, str]
) -> None:
    fs = db_fs()
    fs.write_file("/a/one.txt", "1")
    fs.write_file("/a/two.txt", "2")
    fs.write_file("/b/two.txt", "in the way")
    before = set(StoredFile.objects.filter(scope_id=scope[1]).values_list("path"))
    with pytest.raises(FileExists):
        DatabasePersistence().move_in_storage(fs.read_file("/a"), "/b", opts_for(scope))
    assert set(StoredFile.objects.filter(scope_id=scope[1]).values_list("path")) == (
        before
    )


def test_directories_differing_only_in_case_stay_apart(
    db_fs: FileSystemFactory,
) -> None:
    # SQLite's LIKE ignores ASCII case: the prefix match must not.
    fs = db_fs()
    fs.write_file("/notes/a.md", "lower")
    fs.write_file("/Notes/b.md", "upper")
    fs.move_file("/notes", "/archive")
    again = db_fs()
    assert again.list_files() == ["/Notes/b.md", "/archive/a.md"]
    memory = FileSystemState(
        again.scope_key,
        configs=[
            FileSystemConfig(base_directory="notes", persistence=DatabasePersistence())
        ],
    )
    memory.write_file("/notes/c.md", "lower again")
    assert FileSystemState(
        again.scope_key,
        configs=[
            FileSystemConfig(base_directory="notes", persistence=DatabasePersistence())
        ],
    ).list_files() == ["/notes/c.md"]


def test_nul_content_is_stored_escaped_and_plain_content_verbatim(
    db_fs: FileSystemFactory, scope: tuple[str, str]
) -> None:
    fs = db_fs()
    fs.write_file("/plain.txt", "plain")
    fs.write_file("/nul.txt", NUL_TEXT)
    rows = dict(
        StoredFile.objects.filter(scope_id=scope[1]).values_list("path", "content")
    )
    assert rows["/plain.txt"] == "plain"
    assert rows["/nul.txt"].startswith(ESCAPED) and "\x00" not in rows["/nul.txt"]
    assert StoredFile.objects.get(scope_id=scope[1], path="/nul.txt").size == len(
        NUL_TEXT
    )


def test_a_path_longer_than_the_column_is_a_clear_error(
    db_fs: FileSystemFactory,
) -> None:
    long_path = "/" + "/".join(["d" * 200] * 6) + "/f.txt"
    with pytest.raises(InvalidPath, match="too long for the database"):
        db_fs().write_file(long_path, "x")


def test_a_scope_id_longer_than_the_column_is_a_configuration_error(
    db_fs: FileSystemFactory,
) -> None:
    with pytest.raises(PersistenceError, match="longer than the 255 characters"):
        db_fs(("user", "x" * 300)).write_file("/a.txt", "x")


# The storage backend ----------------------------------------------------------------


def test_keys_live_under_the_prefix_the_scope_kind_and_the_id(tmp_path: Path) -> None:
    storage = FileSystemStorage(location=tmp_path)
    backend = StoragePersistence(storage, prefix="agent-files")
    fs = FileSystemState(
        ("user", 42), configs=[FileSystemConfig(default=True, persistence=backend)]
    )
    fs.write_file("/notes/today.md", "# Today")
    assert (tmp_path / "agent-files/user/42/notes/today.md").read_text() == "# Today"
    assert sorted(
        str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()
    ) == [
        "agent-files/user/42/.sagents-meta-" + record_name("notes")[14:],
        "agent-files/user/42/notes/today.md",
    ]


def test_a_metadata_update_leaves_the_stored_content_object_alone(
    tmp_path: Path,
) -> None:
    config = FileSystemConfig(
        default=True,
        persistence=StoragePersistence(FileSystemStorage(location=tmp_path)),
    )
    FileSystemState(("user", 1), configs=[config]).write_file("/a.md", "content")
    stored = tmp_path / "sagents/user/1/a.md"
    before = stored.stat()
    FileSystemState(("user", 1), configs=[config]).update_custom_metadata(
        "/a.md", {"genre": "pop"}
    )
    after = stored.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert (tmp_path / "sagents/user/1" / record_name("a.md")).exists()


@pytest.mark.parametrize(
    ("ident", "segment"),
    [("../../etc", "..%2F..%2Fetc"), ("..", "%2E%2E"), ("a/b", "a%2Fb"), (7, "7")],
)
def test_scope_parts_become_one_quoted_key_segment(
    tmp_path: Path, ident: Any, segment: str
) -> None:
    backend = StoragePersistence(FileSystemStorage(location=tmp_path))
    fs = FileSystemState(
        ("user", ident), configs=[FileSystemConfig(default=True, persistence=backend)]
    )
    fs.write_file("/f.txt", "x")
    assert (tmp_path / "sagents" / "user" / segment / "f.txt").read_text() == "x"


def test_names_reserved_for_records_are_refused(tmp_path: Path) -> None:
    fs = FileSystemState(
        ("user", 1),
        configs=[
            FileSystemConfig(
                default=True,
                persistence=StoragePersistence(FileSystemStorage(location=tmp_path)),
            )
        ],
    )
    with pytest.raises(InvalidPath, match="reserved"):
        fs.write_file("/.sagents-meta-forged.json", "{}")
    with pytest.raises(InvalidPath, match="reserved"):
        fs.write_file("/dir/.sagents-anything/x.txt", "{}")
    root = tmp_path / "sagents/user/1"
    assert not (root / ".sagents-meta-forged.json").exists()
    assert not (root / "dir/.sagents-anything").exists()


def test_a_forged_record_is_ignored(tmp_path: Path) -> None:
    storage = FileSystemStorage(location=tmp_path)
    config = FileSystemConfig(default=True, persistence=StoragePersistence(storage))
    FileSystemState(("user", 1), configs=[config]).write_file("/a.txt", "a")
    # A record under the wrong hash for the name it claims.
    storage.save(
        "sagents/user/1/" + record_name("other.txt"),
        _json({"name": "a.txt", "title": "Forged"}),
    )
    [entry] = FileSystemState(("user", 1), configs=[config]).list_entries()
    assert entry.title is None


def test_a_storage_named_by_alias_is_resolved_on_use(
    settings: Any, scope: tuple[str, str]
) -> None:
    settings.STORAGES = {
        **settings.STORAGES,
        "agent-files": {"BACKEND": "django.core.files.storage.InMemoryStorage"},
    }
    backend = StoragePersistence("agent-files")
    config = FileSystemConfig(default=True, persistence=backend)
    FileSystemState(scope, configs=[config]).write_file("/a.txt", "by alias")
    assert FileSystemState(scope, configs=[config]).read_file("/a.txt").content == (
        "by alias"
    )


def test_a_file_too_large_to_read_is_a_persistence_error(
    tmp_path: Path, scope: tuple[str, str]
) -> None:
    backend = StoragePersistence(
        FileSystemStorage(location=tmp_path), max_read_bytes=10
    )
    config = FileSystemConfig(default=True, persistence=backend)
    FileSystemState(scope, configs=[config]).write_file("/big.txt", "x" * 11)
    with pytest.raises(PersistenceError, match="over 10 bytes"):
        FileSystemState(scope, configs=[config]).read_file("/big.txt")


@pytest.mark.parametrize("prefix", ["", "/", "a/../b", "a//b", None])
def test_a_bad_prefix_is_a_configuration_error(prefix: Any) -> None:
    with pytest.raises(ConfigurationError, match="storage prefix"):
        StoragePersistence(InMemoryStorage(), prefix=prefix)


def _json(data: dict[str, Any]) -> Any:
    import json

    from django.core.files.base import ContentFile

    return ContentFile(json.dumps(data).encode())
