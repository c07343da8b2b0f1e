"""The FileSystem middleware's persistence callbacks (Sagents' FilesystemCallbacks):
``persistence=`` objects and inline ``on_write`` / ``on_read`` / ``on_delete`` /
``on_list`` functions, with ``context``, ``cache_reads`` and
``fail_on_persistence_error``, through a real Agent and a scripted model."""

from __future__ import annotations

import itertools
import json
import uuid
from typing import Any

import pytest

from sagents_django.core import Agent, Message, ToolCall, ToolResult
from sagents_django.core.exceptions import ConfigurationError
from sagents_django.core.filesystem import (
    FileNotFound,
    FilesystemCallbacks,
    FileSystemConfig,
    FileSystemState,
    MemoryPersistence,
)
from sagents_django.core.middleware.filesystem import FileSystem
from sagents_django.core.testing import ScriptedModel

_ids = itertools.count()


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(call_id=f"call-{next(_ids)}", name=name, arguments=arguments)


async def run(middleware: FileSystem, *steps: ToolCall) -> list[ToolResult]:
    """One turn, one tool call per step; every tool result, in order."""
    agent = Agent(
        model=ScriptedModel(
            [*(Message.assistant(tool_calls=[s]) for s in steps), "Done."]
        ),
        middleware=[middleware],
        replace_default_middleware=True,
    )
    result = await agent.aexecute([Message.user("Go")])
    assert result.ok, result.error
    return [r for m in result.state.messages for r in m.tool_results]


class Store(FilesystemCallbacks):
    """A site's own storage: a dict, and a log of every call with its context."""

    def __init__(self, files: dict[str, str] | None = None) -> None:
        self.files = dict(files or {})
        self.calls: list[tuple[Any, ...]] = []
        self.broken: set[str] = set()

    def _check(self, name: str) -> None:
        if name in self.broken:
            raise ConnectionError(f"{name}: storage is down")

    def on_write(self, file_path: str, content: str, context: dict[str, Any]) -> Any:
        self.calls.append(("write", file_path, content, context))
        self._check("on_write")
        self.files[file_path] = content
        return {"id": 1}

    def on_read(self, file_path: str, context: dict[str, Any]) -> str | None:
        self.calls.append(("read", file_path, context))
        self._check("on_read")
        return self.files.get(file_path)

    def on_delete(self, file_path: str, context: dict[str, Any]) -> Any:
        self.calls.append(("delete", file_path, context))
        self._check("on_delete")
        self.files.pop(file_path, None)

    def on_list(self, context: dict[str, Any]) -> list[str]:
        self.calls.append(("list", context))
        self._check("on_list")
        return sorted(self.files)


@pytest.fixture
def fs() -> FileSystemState:
    return FileSystemState(("test", uuid.uuid4().hex))


def middleware(fs: FileSystemState, **options: Any) -> FileSystem:
    return FileSystem(filesystem=fs, context={"user_id": 42}, **options)


# Writes, edits, deletes and moves tell on_write / on_delete --------------------------


async def test_every_change_a_tool_makes_reaches_the_site_with_its_context(
    fs: FileSystemState,
) -> None:
    store = Store()
    results = await run(
        middleware(fs, persistence=store),
        call("write_file", file_path="/notes.md", content="one\ntwo"),
        call("edit_file", file_path="/notes.md", old_string="two", new_string="2"),
        call(
            "edit_lines",
            file_path="/notes.md",
            start_line=1,
            end_line=1,
            new_content="1",
        ),
        call("move_file", old_path="/notes.md", new_path="/done/notes.md"),
        call("delete_file", file_path="/done/notes.md"),
    )

    assert not any(r.is_error for r in results), [r.content for r in results]
    ctx = {"user_id": 42}
    assert store.calls == [
        ("write", "/notes.md", "one\ntwo", ctx),
        ("write", "/notes.md", "one\n2", ctx),
        ("write", "/notes.md", "1\n2", ctx),
        ("write", "/done/notes.md", "1\n2", ctx),
        ("delete", "/notes.md", ctx),
        ("delete", "/done/notes.md", ctx),
    ]
    assert store.files == {}
    assert fs.list_files() == []


async def test_inline_functions_work_alone_and_win_over_the_objects_methods(
    fs: FileSystemState,
) -> None:
    store = Store()
    seen: list[tuple[str, str, dict[str, Any]]] = []

    def on_write(path: str, content: str, context: dict[str, Any]) -> None:
        seen.append((path, content, context))

    await run(
        middleware(fs, persistence=store, on_write=on_write),
        call("write_file", file_path="/a.txt", content="A"),
        call("delete_file", file_path="/a.txt"),
    )

    assert seen == [("/a.txt", "A", {"user_id": 42})]
    assert [c[0] for c in store.calls] == ["delete"]


async def test_async_callbacks_are_awaited(fs: FileSystemState) -> None:
    seen: list[str] = []

    async def on_write(path: str, content: str, context: dict[str, Any]) -> None:
        seen.append(path)

    async def on_read(path: str, context: dict[str, Any]) -> str | None:
        return "from the site" if path == "/remote.md" else None

    results = await run(
        middleware(fs, on_write=on_write, on_read=on_read),
        call("write_file", file_path="/a.txt", content="A"),
        call("read_file", file_path="/remote.md"),
    )

    assert seen == ["/a.txt"]
    assert results[1].content == "     1\tfrom the site"


async def test_a_callback_cannot_change_the_context_the_next_call_gets(
    fs: FileSystemState,
) -> None:
    contexts: list[dict[str, Any]] = []

    def on_write(path: str, content: str, context: dict[str, Any]) -> None:
        contexts.append(dict(context))
        context["user_id"] = "someone else"

    await run(
        middleware(fs, on_write=on_write),
        call("write_file", file_path="/a.txt", content="A"),
        call("write_file", file_path="/b.txt", content="B"),
    )

    assert contexts == [{"user_id": 42}, {"user_id": 42}]


# Failures: logged and warned by default, failing and undone in fail mode ------------


async def test_a_failing_write_callback_keeps_the_file_and_warns_the_model(
    fs: FileSystemState, caplog: pytest.LogCaptureFixture
) -> None:
    store = Store()
    store.broken.add("on_write")

    [result] = await run(
        middleware(fs, persistence=store),
        call("write_file", file_path="/a.txt", content="A"),
    )

    assert not result.is_error
    assert result.content.endswith(
        "(persistence warning: the site's storage did not take this change)"
    )
    assert fs.read_file("/a.txt").content == "A"
    assert "Persistence callback on_write failed for /a.txt" in caplog.text


async def test_in_fail_mode_a_failing_write_fails_the_call_and_undoes_it(
    fs: FileSystemState,
) -> None:
    fs.write_file("/kept.txt", "before")
    store = Store()
    store.broken.add("on_write")

    results = await run(
        middleware(fs, persistence=store, fail_on_persistence_error=True),
        call("write_file", file_path="/new.txt", content="new"),
        call("write_file", file_path="/kept.txt", content="after"),
        call("edit_file", file_path="/kept.txt", old_string="before", new_string="x"),
    )

    assert [r.is_error for r in results] == [True, True, True]
    assert results[0].content == (
        "Failed to persist /new.txt: on_write raised ConnectionError: "
        "on_write: storage is down"
    )
    assert fs.list_files() == ["/kept.txt"]
    assert fs.read_file("/kept.txt").content == "before"


async def test_in_fail_mode_a_failing_delete_or_move_is_undone(
    fs: FileSystemState,
) -> None:
    fs.write_file("/a.txt", "A")
    store = Store({"/a.txt": "A"})
    store.broken.add("on_delete")

    results = await run(
        middleware(fs, persistence=store, fail_on_persistence_error=True),
        call("delete_file", file_path="/a.txt"),
        call("move_file", old_path="/a.txt", new_path="/b.txt"),
    )

    assert [r.is_error for r in results] == [True, True]
    assert "on_delete raised ConnectionError" in results[0].content
    assert fs.list_files() == ["/a.txt"]
    assert fs.read_file("/a.txt").content == "A"


async def test_an_undo_keeps_a_files_storage_in_step(fs: FileSystemState) -> None:
    storage = MemoryPersistence()
    stored = FileSystemState(
        ("test", uuid.uuid4().hex),
        configs=[FileSystemConfig(default=True, persistence=storage)],
    )
    stored.write_file("/a.txt", "stored")
    store = Store()
    store.broken.add("on_write")

    [result] = await run(
        FileSystem(
            filesystem=stored, persistence=store, fail_on_persistence_error=True
        ),
        call("write_file", file_path="/a.txt", content="lost"),
    )

    assert result.is_error
    fresh = FileSystemState(
        stored.scope_key,
        configs=[FileSystemConfig(default=True, persistence=storage)],
    )
    assert fresh.read_file("/a.txt").content == "stored"


# Reads: on_read for what the filesystem lacks, cached; first without caching --------


async def test_on_read_loads_a_file_the_filesystem_lacks_and_caches_it(
    fs: FileSystemState,
) -> None:
    store = Store({"/remote.md": "hello\nworld"})

    results = await run(
        middleware(fs, persistence=store),
        call("read_file", file_path="/remote.md"),
        call("read_file", file_path="/remote.md", offset=1),
        call("search_text", pattern="world", file_path="/remote.md"),
        call("edit_file", file_path="/remote.md", old_string="world", new_string="you"),
    )

    assert results[0].content == "     1\thello\n     2\tworld"
    assert results[1].content.endswith("     2\tworld")
    assert "/remote.md" in results[2].content
    assert not results[3].is_error
    reads = [c for c in store.calls if c[0] == "read"]
    assert len(reads) == 1  # cached for the rest of the turn
    # The edit put the file in the filesystem and told the site.
    assert fs.read_file("/remote.md").content == "hello\nyou"
    assert store.files["/remote.md"] == "hello\nyou"


async def test_without_cache_reads_on_read_is_asked_first_every_time(
    fs: FileSystemState,
) -> None:
    fs.write_file("/a.md", "in memory")
    store = Store({"/a.md": "at the site"})

    results = await run(
        middleware(fs, persistence=store, cache_reads=False),
        call("read_file", file_path="/a.md"),
        call("read_file", file_path="/a.md"),
        call("read_file", file_path="/only-here.md"),
    )

    assert results[0].content == "     1\tat the site"
    assert [c[1] for c in store.calls if c[0] == "read"] == [
        "/a.md",
        "/a.md",
        "/only-here.md",
    ]
    assert results[2].is_error
    assert results[2].content == "File not found: /only-here.md"


async def test_with_cache_reads_the_filesystem_answers_before_on_read(
    fs: FileSystemState,
) -> None:
    fs.write_file("/a.md", "in memory")
    store = Store({"/a.md": "at the site"})

    [result] = await run(
        middleware(fs, persistence=store), call("read_file", file_path="/a.md")
    )

    assert result.content == "     1\tin memory"
    assert store.calls == []


async def test_a_deleted_file_is_not_read_again_from_the_cache(
    fs: FileSystemState,
) -> None:
    store = Store({"/remote.md": "text"})

    results = await run(
        middleware(fs, persistence=store),
        call("read_file", file_path="/remote.md"),
        call("delete_file", file_path="/remote.md"),
        call("read_file", file_path="/remote.md"),
    )

    assert [r.is_error for r in results] == [False, False, True]
    assert store.files == {}


async def test_bad_on_read_answers_are_not_found_or_errors_never_crashes(
    fs: FileSystemState,
) -> None:
    answers: dict[str, Any] = {
        "/bytes.md": b"raw bytes",
        "/raises-missing.md": FileNotFound("nope"),
        "/huge.md": "x" * (2 * 1024 * 1024),
    }

    asked: list[str] = []

    def on_read(path: str, context: dict[str, Any]) -> Any:
        asked.append(path)
        answer = answers.get(path)
        if isinstance(answer, Exception):
            raise answer
        return answer

    results = await run(
        middleware(fs, on_read=on_read),
        call("read_file", file_path="/bytes.md"),
        call("read_file", file_path="/raises-missing.md"),
        call("read_file", file_path="/huge.md"),
        call("read_file", file_path="../etc/passwd"),
    )

    assert [r.is_error for r in results] == [True, True, True, True]
    assert results[0].content == "File not found: /bytes.md"
    assert results[1].content == "File not found: /raises-missing.md"
    assert "the limit per file is 1048576 bytes" in results[2].content
    assert "path traversal is not allowed" in results[3].content
    assert asked == ["/bytes.md", "/raises-missing.md", "/huge.md"]


async def test_in_fail_mode_a_failing_read_is_an_error_the_model_reads(
    fs: FileSystemState,
) -> None:
    store = Store({"/a.md": "A"})
    store.broken.add("on_read")

    [quiet] = await run(
        middleware(fs, persistence=store), call("read_file", file_path="/a.md")
    )
    [loud] = await run(
        middleware(fs, persistence=store, fail_on_persistence_error=True),
        call("read_file", file_path="/a.md"),
    )

    assert quiet.content == "File not found: /a.md"
    assert loud.is_error
    assert loud.content.startswith("Failed to persist /a.md: on_read raised")


# Listing: on_list adds the site's paths ---------------------------------------------


async def test_ls_and_search_see_the_sites_files_too(fs: FileSystemState) -> None:
    fs.write_file("/local.md", "needle here")
    store = Store({"/remote/a.md": "a needle", "/remote/b.md": "nothing"})

    listing, search = await run(
        middleware(fs, persistence=store),
        call("ls"),
        call("search_text", pattern="needle"),
    )

    assert [e["path"] for e in json.loads(listing.content)] == [
        "/local.md",
        "/remote/a.md",
        "/remote/b.md",
    ]
    assert "/local.md" in search.content
    assert "/remote/a.md" in search.content
    assert "/remote/b.md" not in search.content


async def test_bad_listings_are_left_out_and_a_failing_one_is_ignored(
    fs: FileSystemState,
) -> None:
    fs.write_file("/local.md", "x")

    def weird(context: dict[str, Any]) -> Any:
        return ["/ok.md", "../../escape", 7, "", "/also ok.md"]

    def down(context: dict[str, Any]) -> Any:
        raise ConnectionError("down")

    def not_a_list(context: dict[str, Any]) -> Any:
        return "/a.md"

    [first] = await run(middleware(fs, on_list=weird), call("ls"))
    [second] = await run(middleware(fs, on_list=down), call("ls"))
    [third] = await run(middleware(fs, on_list=not_a_list), call("ls"))
    [fourth] = await run(
        middleware(fs, on_list=down, fail_on_persistence_error=True), call("ls")
    )

    assert [e["path"] for e in json.loads(first.content)] == [
        "/also ok.md",
        "/local.md",
        "/ok.md",
    ]
    assert [e["path"] for e in json.loads(second.content)] == ["/local.md"]
    assert [e["path"] for e in json.loads(third.content)] == ["/local.md"]
    assert fourth.is_error
    assert "on_list raised ConnectionError: down" in fourth.content


# Deleting and moving what only the site holds ---------------------------------------


async def test_a_file_only_the_site_holds_can_be_deleted_and_moved(
    fs: FileSystemState,
) -> None:
    store = Store({"/gone.md": "bye", "/old.md": "moved text"})

    results = await run(
        middleware(fs, persistence=store),
        call("delete_file", file_path="/gone.md"),
        call("move_file", old_path="/old.md", new_path="/new.md"),
        call("delete_file", file_path="/never-existed.md"),
    )

    assert [r.is_error for r in results] == [False, False, True]
    assert results[2].content == "File not found: /never-existed.md"
    assert store.files == {"/new.md": "moved text"}
    assert fs.read_file("/new.md").content == "moved text"


# Configuration ----------------------------------------------------------------------


def test_a_persistence_object_module_or_dotted_path_is_accepted() -> None:
    by_path = FileSystem(persistence=f"{__name__}.Store")
    assert sorted(by_path.persistence_callbacks.hooks) == [
        "on_delete",
        "on_list",
        "on_read",
        "on_write",
    ]

    class OnlyWrites(FilesystemCallbacks):
        def on_write(self, file_path: str, content: str, context: Any) -> None:
            pass

    # The base class's no-ops are left out: never called.
    assert list(FileSystem(persistence=OnlyWrites).persistence_callbacks.hooks) == [
        "on_write"
    ]
    assert not FileSystem().persistence_callbacks


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"persistence": object()}, "has none of on_write, on_read"),
        ({"persistence": "no.such.module.Thing"}, "Cannot import persistence"),
        ({"on_write": "save"}, "on_write must be a function, not 'save'"),
        ({"on_read": lambda p, c: None, "context": ["user", 1]}, "context must be"),
        ({"on_read": lambda p, c: None, "cache_reads": "yes"}, "cache_reads must"),
        (
            {"on_read": lambda p, c: None, "fail_on_persistence_error": 1},
            "fail_on_persistence_error must be True or False",
        ),
    ],
)
def test_bad_callback_options_are_configuration_errors(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        FileSystem(**options)


async def test_the_debug_summary_names_the_callbacks(fs: FileSystemState) -> None:
    mw = middleware(fs, on_write=lambda p, c, x: None, cache_reads=False)
    await run(mw, call("ls"))
    assert mw.debug_summary()["callbacks"] == {
        "hooks": ["on_write"],
        "cache_reads": False,
        "fail_on_persistence_error": False,
    }
