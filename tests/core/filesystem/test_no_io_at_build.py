"""Building an agent over a filesystem does no I/O: storage is listed on the first
tool call, and a file's content is loaded when it is read."""

from __future__ import annotations

from typing import Any

from sagents_django.core import Agent, Message, ToolCall
from sagents_django.core.filesystem import (
    FileEntry,
    FileSystemConfig,
    MemoryPersistence,
)
from sagents_django.core.filesystem.scope import canonical_scope
from sagents_django.core.middleware.filesystem import FileSystem
from sagents_django.core.testing import ScriptedModel


class RecordingPersistence(MemoryPersistence):
    """A memory store that records every call made to it."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def write(self, entry: FileEntry, opts: dict[str, Any]) -> FileEntry:
        self.calls.append("write")
        return super().write(entry, opts)

    def load(self, entry: FileEntry, opts: dict[str, Any]) -> FileEntry:
        self.calls.append("load")
        return super().load(entry, opts)

    def delete(self, entry: FileEntry, opts: dict[str, Any]) -> None:
        self.calls.append("delete")
        super().delete(entry, opts)

    def list_persisted_entries(self, opts: dict[str, Any]) -> list[FileEntry]:
        self.calls.append("list_persisted_entries")
        return super().list_persisted_entries(opts)


def _store(recorder: RecordingPersistence, scope: Any) -> None:
    """/kept.md in the recorder, as a previous turn stored it."""
    config = FileSystemConfig(default=True, persistence=recorder)
    opts = config.build_storage_opts(canonical_scope(scope))
    recorder.write(FileEntry.new_persisted_file("/kept.md", "kept"), opts)
    recorder.calls.clear()


def _agent_over(recorder: RecordingPersistence, scope: Any, *replies: Any) -> Agent:
    config = FileSystemConfig(default=True, persistence=recorder)
    memories = FileSystemConfig(base_directory="Memories", persistence=recorder)
    return Agent(
        model=ScriptedModel([*replies, "Done."]),
        middleware=[
            (
                FileSystem,
                {
                    "filesystem_scope": scope,
                    "configs": [config, memories],
                    "long_term_memory": True,
                    "memories_prefix": "Memories",
                },
            )
        ],
        replace_default_middleware=True,
    )


def test_building_an_agent_over_a_filesystem_does_no_io(scope: Any) -> None:
    recorder = RecordingPersistence()
    _store(recorder, scope)
    _agent_over(recorder, scope)
    _agent_over(recorder, scope)  # the registry's filesystem, configs again
    assert recorder.calls == []


def test_a_turn_that_touches_no_file_does_no_io(scope: Any) -> None:
    recorder = RecordingPersistence()
    result = _agent_over(recorder, scope).execute([Message.user("Hi")])
    assert result.status == "completed", result.error
    assert recorder.calls == []


def test_files_are_listed_on_first_use_and_loaded_when_read(scope: Any) -> None:
    recorder = RecordingPersistence()
    _store(recorder, scope)
    agent = _agent_over(
        recorder,
        scope,
        Message.assistant(tool_calls=[ToolCall(call_id="1", name="ls")]),
        Message.assistant(
            tool_calls=[
                ToolCall(
                    call_id="2", name="read_file", arguments={"file_path": "/kept.md"}
                )
            ]
        ),
    )
    result = agent.execute([Message.user("Go")])
    assert result.status == "completed", result.error
    assert "/kept.md" in result.state.messages[2].tool_results[0].content
    assert "kept" in result.state.messages[4].tool_results[0].content
    assert recorder.calls[0] == "list_persisted_entries"
    assert recorder.calls.count("load") == 1
