"""The FileSystem middleware: every tool through a real Agent and a scripted model."""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from sagents_django.core import Agent, Message, ToolCall, ToolResult
from sagents_django.core.events import event_handlers
from sagents_django.core.exceptions import ConfigurationError
from sagents_django.core.filesystem import (
    FileEntry,
    FileSystemConfig,
    FileSystemState,
    MemoryPersistence,
    get_filesystem,
    stop_filesystem,
)
from sagents_django.core.middleware.filesystem import (
    ALL_TOOLS,
    FileSystem,
    default_entry_to_map,
    maybe_add_field,
)
from sagents_django.core.testing import ScriptedModel

_ids = itertools.count()


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(call_id=f"call-{next(_ids)}", name=name, arguments=arguments)


def make_agent(
    *steps: ToolCall | list[ToolCall], middleware: Any = FileSystem, **options: Any
) -> Agent:
    replies: list[Any] = [
        Message.assistant(tool_calls=step if isinstance(step, list) else [step])
        for step in steps
    ]
    return Agent(
        model=ScriptedModel([*replies, "Done."]),
        middleware=[middleware],
        replace_default_middleware=True,
        **options,
    )


async def run(
    *steps: ToolCall | list[ToolCall], middleware: Any = FileSystem, **options: Any
) -> list[ToolResult]:
    """Run one turn; the results of every tool call, in order."""
    result = await make_agent(*steps, middleware=middleware, **options).aexecute(
        [Message.user("Go")]
    )
    assert result.ok, result.error
    return [r for m in result.state.messages for r in m.tool_results]


async def one(step: ToolCall, fs: FileSystemState) -> ToolResult:
    [result] = await run(step, middleware=FileSystem(filesystem=fs))
    return result


@pytest.fixture
def fs() -> Iterator[FileSystemState]:
    yield FileSystemState(("test", uuid.uuid4().hex))


@pytest.fixture
def scope() -> Iterator[tuple[str, str]]:
    key = ("user", uuid.uuid4().hex)
    yield key
    stop_filesystem(key)


# Set-up -----------------------------------------------------------------------------


def test_the_agent_gets_every_tool_with_the_reference_argument_names(
    fs: FileSystemState,
) -> None:
    agent = make_agent(middleware=FileSystem(filesystem=fs))
    assert list(agent.tools_by_name) == list(ALL_TOOLS)
    required = {
        name: agent.tools_by_name[name].parameters.get("required", [])
        for name in ALL_TOOLS
    }
    assert required == {
        "ls": [],
        "read_file": ["file_path"],
        "write_file": ["file_path", "content"],
        "edit_file": ["file_path", "old_string", "new_string"],
        "search_text": ["pattern"],
        "edit_lines": ["file_path", "start_line", "end_line", "new_content"],
        "delete_file": ["file_path"],
        "move_file": ["old_path", "new_path"],
    }
    assert "## Filesystem Tools" in agent.assembled_system_prompt


def test_enabled_tools_and_custom_descriptions_shape_the_tool_list(
    fs: FileSystemState,
) -> None:
    middleware = FileSystem(
        filesystem=fs,
        enabled_tools=["ls", "read_file"],
        custom_tool_descriptions={"read_file": "Read one of the user's documents."},
    )
    agent = make_agent(middleware=middleware)
    assert list(agent.tools_by_name) == ["ls", "read_file"]
    assert (
        agent.tools_by_name["read_file"].description
        == "Read one of the user's documents."
    )


def test_an_unknown_tool_name_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="Unknown filesystem tool 'rm'"):
        FileSystem(enabled_tools=["ls", "rm"])


def test_the_scope_comes_from_the_option_then_the_agent_then_the_agent_id(
    scope: tuple[str, str],
) -> None:
    by_option = FileSystem(filesystem_scope=scope)
    make_agent(middleware=by_option, filesystem_scope=("user", "ignored"))
    assert by_option.filesystem is get_filesystem(scope)
    by_agent = FileSystem()
    make_agent(middleware=by_agent, filesystem_scope=list(scope))
    assert by_agent.filesystem is get_filesystem(scope)
    by_id = FileSystem()
    agent = make_agent(middleware=by_id, agent_id=f"agent-{scope[1]}")
    assert by_id.filesystem.scope_key == ("agent", f"agent-{scope[1]}")
    stop_filesystem(("agent", agent.agent_id))


async def test_two_agents_of_one_scope_see_each_others_files(
    scope: tuple[str, str],
) -> None:
    await run(
        call("write_file", file_path="/shared.md", content="from A"),
        filesystem_scope=scope,
    )
    [result] = await run(
        call("read_file", file_path="/shared.md"), filesystem_scope=scope
    )
    assert result.content == "     1\tfrom A"


def test_long_term_memory_needs_storage_for_its_prefix(scope: tuple[str, str]) -> None:
    with pytest.raises(ConfigurationError, match="long_term_memory needs storage"):
        make_agent(middleware=FileSystem(long_term_memory=True, filesystem_scope=scope))


def test_long_term_memory_tells_the_model_where_memories_live(
    scope: tuple[str, str],
) -> None:
    config = FileSystemConfig(
        base_directory="memories", persistence=MemoryPersistence()
    )
    agent = make_agent(
        middleware=FileSystem(
            long_term_memory=True, configs=[config], filesystem_scope=scope
        )
    )
    assert "Files under `/memories/` are kept across conversations" in (
        agent.assembled_system_prompt
    )


# ls -----------------------------------------------------------------------------------


async def test_ls_on_an_empty_filesystem_says_so(fs: FileSystemState) -> None:
    assert (await one(call("ls"), fs)).content == "No files in filesystem"


async def test_ls_lists_entries_as_json_without_content(fs: FileSystemState) -> None:
    fs.write_file("/notes/a.md", "secret content")
    result = await one(call("ls"), fs)
    assert json.loads(result.content) == [
        {
            "path": "/notes",
            "title": "notes",
            "entry_type": "directory",
            "file_type": None,
            "persistence": "memory",
            "size": 0,
        },
        {
            "path": "/notes/a.md",
            "title": None,
            "entry_type": "file",
            "file_type": None,
            "persistence": "memory",
            "size": 14,
        },
    ]


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("*.md", ["/Chapter 1/summary.md", "/todo.md"]),
        ("*summary*", ["/Chapter 1/summary.md"]),
        ("Chapter 1/*", ["/Chapter 1/draft.txt", "/Chapter 1/summary.md"]),
        ("/Chapter 1", ["/Chapter 1/draft.txt", "/Chapter 1/summary.md"]),
        ("todo", ["/todo.md"]),
    ],
)
async def test_ls_filters_with_a_pattern(
    fs: FileSystemState, pattern: str, expected: list[str]
) -> None:
    for path in ["/Chapter 1/summary.md", "/Chapter 1/draft.txt", "/todo.md"]:
        fs.write_file(path, "x")
    result = await one(call("ls", pattern=pattern), fs)
    assert [e["path"] for e in json.loads(result.content)] == expected


async def test_ls_with_an_unmatched_pattern_says_so(fs: FileSystemState) -> None:
    fs.write_file("/a.txt", "x")
    assert (
        await one(call("ls", pattern="*.pdf"), fs)
    ).content == "No files match pattern: *.pdf"


async def test_ls_caps_a_huge_listing_and_says_how_to_narrow_it(
    fs: FileSystemState,
) -> None:
    for i in range(12):
        fs.write_file(f"/f{i:02}.txt", "x")
    [result] = await run(
        call("ls"), middleware=FileSystem(filesystem=fs, max_ls_entries=5)
    )
    listing, note = result.content.split("\n")
    assert len(json.loads(listing)) == 5
    assert note == "(7 more entries not shown; narrow the listing with a pattern)"


async def test_entry_to_map_lets_the_application_add_fields(
    fs: FileSystemState,
) -> None:
    def with_genre(entry: FileEntry) -> dict[str, Any]:
        data = default_entry_to_map(entry)
        data = maybe_add_field(data, "genre", entry.custom.get("genre"))
        return maybe_add_field(data, "tags", entry.custom.get("tags"))

    fs.write_file("/story.md", "x", custom={"genre": "noir"})
    [result] = await run(
        call("ls"), middleware=FileSystem(filesystem=fs, entry_to_map=with_genre)
    )
    [entry] = json.loads(result.content)
    assert entry["genre"] == "noir" and "tags" not in entry


def test_the_default_entry_map_includes_id_only_when_set() -> None:
    entry = FileEntry.new_memory_file("/a.txt", "x")
    assert "id" not in default_entry_to_map(entry)
    assert default_entry_to_map(entry.__class__(path="/b", id="7"))["id"] == "7"


# read_file and write_file ----------------------------------------------------------------


async def test_write_then_read_returns_numbered_lines(fs: FileSystemState) -> None:
    written, read = await run(
        call("write_file", file_path="/poem.txt", content="roses\nviolets"),
        call("read_file", file_path="/poem.txt"),
        middleware=FileSystem(filesystem=fs),
    )
    assert not written.is_error
    assert json.loads(written.content)["path"] == "/poem.txt"
    assert read.content == "     1\troses\n     2\tviolets"


async def test_read_file_pages_with_offset_and_limit(fs: FileSystemState) -> None:
    fs.write_file("/ten.txt", "\n".join(str(i) for i in range(1, 11)))
    result = await one(call("read_file", file_path="/ten.txt", offset=8, limit=5), fs)
    assert result.content == "Showing lines 9 to 10 of 10:\n     9\t9\n    10\t10"


async def test_write_file_overwrites_an_existing_file(fs: FileSystemState) -> None:
    fs.write_file("/a.txt", "old")
    assert not (
        await one(call("write_file", file_path="/a.txt", content="new"), fs)
    ).is_error
    assert fs.read_file("/a.txt").content == "new"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"file_path": "/missing.txt"}, "File not found: /missing.txt"),
        ({"file_path": "/dir"}, "/dir is a directory; use ls"),
        ({"file_path": "/a.txt", "offset": -1}, "Invalid arguments"),
        ({"file_path": 42}, "Invalid arguments"),
    ],
)
async def test_read_file_errors_are_results_the_model_can_act_on(
    fs: FileSystemState, arguments: dict[str, Any], message: str
) -> None:
    fs.write_file("/a.txt", "x")
    fs.write_file("/dir/b.txt", "x")
    result = await one(call("read_file", **arguments), fs)
    assert result.is_error and message in result.content


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("../outside.txt", "traversal"),
        ("/a/../../etc/passwd", "traversal"),
        ("~/notes.txt", "home directory"),
        ("/nul\x00byte.txt", "NUL"),
        ("/a//b.txt", "empty segment"),
        ("/ padded.txt", "whitespace"),
        ("   ", "empty"),
        ("/", "root directory"),
        ("/" + "n" * 300, "too long"),
    ],
)
async def test_write_file_refuses_hostile_paths_and_changes_nothing(
    fs: FileSystemState, path: str, message: str
) -> None:
    result = await one(call("write_file", file_path=path, content="x"), fs)
    assert result.is_error and message in result.content
    assert fs.list_entries() == []


async def test_a_read_only_directory_refuses_the_tools_that_change_files() -> None:
    shelf = MemoryPersistence()
    shelf.write(
        FileEntry.new_memory_file("/shared/guide.md", "Guide"),
        {"scope_key": ("t", 1), "base_directory": "shared"},
    )
    fs = FileSystemState(
        ("t", 1),
        configs=[
            FileSystemConfig(base_directory="shared", persistence=shelf, readonly=True)
        ],
    )
    results = await run(
        call("read_file", file_path="/shared/guide.md"),
        call("write_file", file_path="/shared/new.md", content="x"),
        call(
            "edit_file",
            file_path="/shared/guide.md",
            old_string="Guide",
            new_string="Mine",
        ),
        call("delete_file", file_path="/shared/guide.md"),
        middleware=FileSystem(filesystem=fs),
    )
    assert [r.is_error for r in results] == [False, True, True, True]
    assert all("read-only directory /shared" in r.content for r in results[1:])
    assert fs.read_file("/shared/guide.md").content == "Guide"


async def test_size_limits_come_back_as_clear_errors(fs: FileSystemState) -> None:
    small = FileSystemState(("t", uuid.uuid4().hex), max_file_size=8, max_total_size=12)
    results = await run(
        call("write_file", file_path="/big.txt", content="123456789"),
        call("write_file", file_path="/a.txt", content="12345678"),
        call("write_file", file_path="/b.txt", content="12345"),
        middleware=FileSystem(filesystem=small),
    )
    assert [r.is_error for r in results] == [True, False, True]
    assert "limit per file is 8 bytes" in results[0].content
    assert "limit is 12 bytes" in results[2].content


# edit_file, edit_lines, search_text ----------------------------------------------------


async def test_edit_file_replaces_a_unique_string(fs: FileSystemState) -> None:
    fs.write_file("/a.txt", "hello world")
    result = await one(
        call("edit_file", file_path="/a.txt", old_string="world", new_string="there"),
        fs,
    )
    assert result.content == "File edited successfully: /a.txt"
    assert fs.read_file("/a.txt").content == "hello there"


@pytest.mark.parametrize(
    ("arguments", "message", "replace_all_content"),
    [
        ({"old_string": "x", "new_string": "y"}, "String appears 3 times", None),
        ({"old_string": "x", "new_string": "y", "replace_all": True}, None, "y y y"),
        (
            {"old_string": "zzz", "new_string": "y"},
            "String not found in file: 'zzz'",
            None,
        ),
    ],
)
async def test_edit_file_handles_ambiguous_and_missing_strings(
    fs: FileSystemState,
    arguments: dict[str, Any],
    message: str | None,
    replace_all_content: str | None,
) -> None:
    fs.write_file("/a.txt", "x x x")
    result = await one(call("edit_file", file_path="/a.txt", **arguments), fs)
    if message:
        assert result.is_error and message in result.content
        assert fs.read_file("/a.txt").content == "x x x"
    else:
        assert result.content == "File edited successfully: /a.txt (3 replacements)"
        assert fs.read_file("/a.txt").content == replace_all_content


async def test_edit_file_on_a_missing_file_is_an_error(fs: FileSystemState) -> None:
    result = await one(
        call("edit_file", file_path="/nope.txt", old_string="a", new_string="b"), fs
    )
    assert result.is_error and result.content == "File not found: /nope.txt"


async def test_edit_lines_replaces_a_range(fs: FileSystemState) -> None:
    fs.write_file("/a.txt", "1\n2\n3\n4")
    result = await one(
        call(
            "edit_lines",
            file_path="/a.txt",
            start_line=2,
            end_line=3,
            new_content="two",
        ),
        fs,
    )
    assert result.content == "File edited successfully: /a.txt\nReplaced 2 lines (2-3)"
    assert fs.read_file("/a.txt").content == "1\ntwo\n4"


async def test_edit_lines_beyond_the_file_is_an_error(fs: FileSystemState) -> None:
    fs.write_file("/a.txt", "1\n2")
    result = await one(
        call(
            "edit_lines", file_path="/a.txt", start_line=2, end_line=5, new_content="x"
        ),
        fs,
    )
    assert (
        result.is_error
        and "end_line 5 is beyond file length (2 lines)" in result.content
    )
    assert fs.read_file("/a.txt").content == "1\n2"


async def test_search_text_searches_one_file_or_all(fs: FileSystemState) -> None:
    fs.write_file("/a.txt", "alpha\nTODO: one")
    fs.write_file("/b/c.txt", "todo: two\nomega")
    one_file, everywhere, context = await run(
        call("search_text", pattern="TODO", file_path="/a.txt"),
        call("search_text", pattern="todo", case_sensitive=False),
        call("search_text", pattern="omega", context_lines=1),
        middleware=FileSystem(filesystem=fs),
    )
    assert one_file.content == "File: /a.txt\n     2\tTODO: one"
    assert everywhere.content == (
        "File: /a.txt\n     2\tTODO: one\n\nFile: /b/c.txt\n     1\ttodo: two"
    )
    assert context.content == "File: /b/c.txt\n     1 |\ttodo: two\n     2\tomega"


async def test_search_text_errors_are_results(fs: FileSystemState) -> None:
    fs.write_file("/a.txt", "x")
    bad_regex, missing, nothing = await run(
        call("search_text", pattern="(unclosed"),
        call("search_text", pattern="x", file_path="/nope.txt"),
        call("search_text", pattern="zzz"),
        middleware=FileSystem(filesystem=fs),
    )
    assert bad_regex.is_error and "Invalid regex pattern" in bad_regex.content
    assert missing.is_error and missing.content == "File not found: /nope.txt"
    assert not nothing.is_error and nothing.content == "No matches found"


# delete_file and move_file ---------------------------------------------------------------


async def test_delete_file_deletes_and_reports_missing_and_non_empty(
    fs: FileSystemState,
) -> None:
    fs.write_file("/a.txt", "x")
    fs.write_file("/d/b.txt", "x")
    deleted, missing, non_empty = await run(
        call("delete_file", file_path="/a.txt"),
        call("delete_file", file_path="/a.txt"),
        call("delete_file", file_path="/d"),
        middleware=FileSystem(filesystem=fs),
    )
    assert deleted.content == "File deleted successfully: /a.txt"
    assert missing.is_error and missing.content == "File not found: /a.txt"
    assert non_empty.is_error and "Directory /d is not empty" in non_empty.content
    assert fs.list_files() == ["/d/b.txt"]


async def test_move_file_moves_a_directory_with_its_children(
    fs: FileSystemState,
) -> None:
    fs.write_file("/drafts/a.md", "A")
    fs.write_file("/drafts/deep/b.md", "B")
    result = await one(call("move_file", old_path="/drafts", new_path="/published"), fs)
    assert result.content == "Moved successfully: /drafts -> /published (4 entries)"
    assert fs.list_files() == ["/published/a.md", "/published/deep/b.md"]


async def test_move_file_refuses_an_existing_target_and_hostile_paths(
    fs: FileSystemState,
) -> None:
    fs.write_file("/a.txt", "a")
    fs.write_file("/b.txt", "b")
    taken, hostile = await run(
        call("move_file", old_path="/a.txt", new_path="/b.txt"),
        call("move_file", old_path="/a.txt", new_path="../../a.txt"),
        middleware=FileSystem(filesystem=fs),
    )
    assert taken.is_error and taken.content == "Target already exists: /b.txt"
    assert hostile.is_error and "traversal" in hostile.content
    assert fs.list_files() == ["/a.txt", "/b.txt"]


# Events, parallel calls, debounce -------------------------------------------------------


async def test_tool_changes_reach_event_handlers_with_the_scope(
    fs: FileSystemState,
) -> None:
    seen: list[tuple[str, dict]] = []
    with event_handlers(lambda name, data: seen.append((name, data))):
        await run(
            call("write_file", file_path="/a.txt", content="x"),
            call("move_file", old_path="/a.txt", new_path="/b.txt"),
            call("delete_file", file_path="/b.txt"),
            middleware=FileSystem(filesystem=fs),
        )
    scope = fs.scope_json
    assert seen == [
        ("file_updated", {"path": "/a.txt", "scope": scope}),
        ("file_deleted", {"path": "/a.txt", "scope": scope}),
        ("file_updated", {"path": "/b.txt", "scope": scope}),
        ("file_deleted", {"path": "/b.txt", "scope": scope}),
    ]


async def test_async_event_handlers_receive_tool_events() -> None:
    received: list[str] = []

    async def on_event(execution: Any, name: str, data: dict) -> None:
        received.append(f"{name} {data['path']}")

    fs = FileSystemState(("t", uuid.uuid4().hex))
    agent = make_agent(
        call("write_file", file_path="/a.txt", content="x"),
        middleware=FileSystem(filesystem=fs),
    )
    result = await agent.aexecute(
        [Message.user("Go")], callbacks=[{"on_agent_event": on_event}]
    )
    assert result.ok
    assert received == ["file_updated /a.txt"]


async def test_parallel_tool_calls_in_one_step_all_land(fs: FileSystemState) -> None:
    step = [
        call("write_file", file_path=f"/p/{i}.txt", content=str(i)) for i in range(10)
    ]
    results = await run(step, middleware=FileSystem(filesystem=fs))
    assert not any(r.is_error for r in results)
    assert len(fs.list_files()) == 10


async def test_debounced_edits_are_flushed_before_the_turn_ends() -> None:
    store = MemoryPersistence()
    config = FileSystemConfig(default=True, persistence=store, debounce_ms=60_000)
    fs = FileSystemState(("t", uuid.uuid4().hex), configs=[config])
    await run(
        call("write_file", file_path="/a.txt", content="one"),
        call("edit_file", file_path="/a.txt", old_string="one", new_string="two"),
        middleware=FileSystem(filesystem=fs),
    )
    assert fs.pending_paths == []
    stored = store.load(
        FileEntry.new_indexed_file("/a.txt"), config.build_storage_opts(fs.scope_key)
    )
    assert stored.content == "two"


def test_debug_summary_shows_scope_tools_and_stats(fs: FileSystemState) -> None:
    middleware = FileSystem(filesystem=fs, enabled_tools=["ls"])
    make_agent(middleware=middleware)
    fs.write_file("/a.txt", "x")
    summary = middleware.debug_summary()
    assert summary["scope"] == fs.scope_json
    assert summary["tools"] == ["ls"]
    assert summary["stats"]["total_files"] == 1
