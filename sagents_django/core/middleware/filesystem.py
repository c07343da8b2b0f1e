"""FileSystem: tools over a virtual filesystem shared by every agent of a scope.

Tools: ``ls``, ``read_file``, ``write_file``, ``edit_file``, ``search_text``,
``edit_lines``, ``delete_file``, ``move_file`` (argument names as in Sagents). The
middleware holds no files: when attached it takes the ``filesystem=`` given, or the
registry's filesystem for ``filesystem_scope`` (option, else the agent's, else
``("agent", agent_id)``), so a file written in one conversation is there for the
next turn of another conversation of the same scope.

Every path the model sends goes through the filesystem's validation; anything
refused, missing, read-only or too large comes back as an error tool result with a
message the model can act on, never an exception. Tool functions are ``async`` and
run the filesystem call in a worker thread (its events still reach the turn's
handlers: ``events.emit`` is thread-safe). Changes waiting on a debounce are flushed
around every model call, so none outlives the turn.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..exceptions import ConfigurationError
from ..filesystem.config import FileSystemConfig
from ..filesystem.entries import FileEntry
from ..filesystem.errors import FileNotFound, FileSystemError, PathIsDirectory
from ..filesystem.paths import is_within, normalize_file_path, normalize_path
from ..filesystem.prompts import (
    DESCRIPTIONS,
    DISPLAY_TEXT,
    LONG_TERM_MEMORY_PROMPT,
    SCHEMAS,
    SYSTEM_PROMPT,
)
from ..filesystem.registry import get_filesystem
from ..filesystem.state import (
    DEFAULT_MAX_FILE_SIZE,
    DEFAULT_MAX_TOTAL_SIZE,
    FileSystemState,
)
from ..filesystem.text import (
    DEFAULT_READ_LIMIT,
    Searcher,
    format_search_results,
    number_lines,
    pattern_matcher,
    replace_lines,
    replace_text,
)
from ..messages import ToolResult
from ..tools import Tool
from .base import Middleware

if TYPE_CHECKING:
    from ..agent import Agent
    from ..state import State

ALL_TOOLS: tuple[str, ...] = (
    "ls",
    "read_file",
    "write_file",
    "edit_file",
    "search_text",
    "edit_lines",
    "delete_file",
    "move_file",
)
MAX_LS_ENTRIES = 1000
"""More would flood the model's context; it is told to narrow with a pattern."""
EntryToMap = Callable[[FileEntry], dict[str, Any]]


def default_entry_to_map(entry: FileEntry) -> dict[str, Any]:
    """A FileEntry as JSON for the model: path, title, entry_type, file_type,
    persistence, size (when known) and id (when set); never the content."""
    data: dict[str, Any] = {
        "path": entry.path,
        "title": entry.title,
        "entry_type": entry.entry_type,
        "file_type": entry.file_type,
        "persistence": entry.persistence,
    }
    if entry.metadata is not None and entry.metadata.size is not None:
        data["size"] = entry.metadata.size
    return maybe_add_field(data, "id", entry.id)


def maybe_add_field(data: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """``data`` with ``key`` set to ``value``, unless ``value`` is None."""
    return data if value is None else {**data, key: value}


class FileSystem(Middleware):
    """Adds the filesystem tools and their system prompt."""

    def __init__(
        self,
        *,
        enabled_tools: Iterable[str] | None = None,
        custom_tool_descriptions: Mapping[str, str] | None = None,
        entry_to_map: EntryToMap | None = None,
        long_term_memory: bool = False,
        memories_prefix: str = "memories",
        filesystem_scope: Any = None,
        filesystem: FileSystemState | None = None,
        configs: Iterable[FileSystemConfig] = (),
        max_file_size: int | None = DEFAULT_MAX_FILE_SIZE,
        max_total_size: int | None = DEFAULT_MAX_TOTAL_SIZE,
        max_ls_entries: int = MAX_LS_ENTRIES,
    ) -> None:
        super().__init__(
            enabled_tools=enabled_tools,
            custom_tool_descriptions=custom_tool_descriptions,
            entry_to_map=entry_to_map,
            long_term_memory=long_term_memory,
            memories_prefix=memories_prefix,
            filesystem_scope=filesystem_scope,
            filesystem=filesystem,
            configs=configs,
            max_file_size=max_file_size,
            max_total_size=max_total_size,
            max_ls_entries=max_ls_entries,
        )
        self.enabled_tools = list(ALL_TOOLS if enabled_tools is None else enabled_tools)
        self.custom_tool_descriptions = dict(custom_tool_descriptions or {})
        for name in [*self.enabled_tools, *self.custom_tool_descriptions]:
            if name not in ALL_TOOLS:
                raise ConfigurationError(
                    f"Unknown filesystem tool {name!r}; available: {', '.join(ALL_TOOLS)}"
                )
        if entry_to_map is not None and not callable(entry_to_map):
            raise ConfigurationError("entry_to_map must be a function of a FileEntry")
        self.entry_to_map: EntryToMap = entry_to_map or default_entry_to_map
        self.long_term_memory = long_term_memory
        try:
            self.memories_prefix = normalize_file_path(memories_prefix)[1:]
        except FileSystemError as exc:
            raise ConfigurationError(
                f"Bad memories_prefix {memories_prefix!r}: {exc}"
            ) from None
        if filesystem is not None and not isinstance(filesystem, FileSystemState):
            raise ConfigurationError(
                f"filesystem must be a FileSystemState, not {filesystem!r}"
            )
        self.filesystem_scope = filesystem_scope
        self.configs = list(configs)
        self.max_file_size = max_file_size
        self.max_total_size = max_total_size
        self.max_ls_entries = max_ls_entries
        self._filesystem = filesystem
        self._refreshed = False

    # Lifecycle --------------------------------------------------------------------
    def attach(self, agent: Agent) -> None:
        self._refreshed = False  # an agent is built per turn: refresh once per turn
        if self._filesystem is None:
            scope = (
                self.filesystem_scope
                or getattr(agent, "filesystem_scope", None)
                or ("agent", agent.agent_id)
            )
            self._filesystem = get_filesystem(
                scope,
                configs=self.configs,
                max_file_size=self.max_file_size,
                max_total_size=self.max_total_size,
            )
        else:
            known = self._filesystem.get_persistence_configs()
            for config in self.configs:
                if config.key not in known:
                    self._filesystem.register_persistence(config)
        if (
            self.long_term_memory
            and self._filesystem.config_for_path(f"/{self.memories_prefix}/x") is None
        ):
            raise ConfigurationError(
                f"long_term_memory needs storage for /{self.memories_prefix}: add "
                f"FileSystemConfig(base_directory={self.memories_prefix!r}, "
                "persistence=...) to configs"
            )

    @property
    def filesystem(self) -> FileSystemState:
        if self._filesystem is None:
            raise ConfigurationError(
                "The FileSystem middleware is not attached to an agent yet"
            )
        return self._filesystem

    def system_prompt(self) -> str | list[str] | None:
        if self.long_term_memory:
            return [
                SYSTEM_PROMPT,
                LONG_TERM_MEMORY_PROMPT.format(prefix=self.memories_prefix),
            ]
        return SYSTEM_PROMPT

    async def before_model(self, state: State) -> State:
        await self._flush()
        return state

    async def after_model(self, state: State) -> State:
        await self._flush()
        return state

    async def _flush(self) -> None:
        if self._filesystem is not None and self._filesystem.pending_paths:
            await asyncio.to_thread(self._filesystem.flush_all)

    def debug_summary(self) -> dict[str, Any]:
        fs = self.filesystem
        return {
            "scope": fs.scope_json,
            "tools": self.enabled_tools,
            "configs": [c.describe() for c in fs.get_persistence_configs().values()],
            "stats": fs.stats(),
        }

    # Tools ------------------------------------------------------------------------
    def tools(self) -> list[Tool]:
        operations: dict[str, Callable[[dict[str, Any]], str]] = {
            "ls": self._ls,
            "read_file": self._read_file,
            "write_file": self._write_file,
            "edit_file": self._edit_file,
            "search_text": self._search_text,
            "edit_lines": self._edit_lines,
            "delete_file": self._delete_file,
            "move_file": self._move_file,
        }
        return [self._tool(name, operations[name]) for name in self.enabled_tools]

    def _tool(self, name: str, operation: Callable[[dict[str, Any]], str]) -> Tool:
        async def function(args: dict[str, Any], _context: Any) -> str | ToolResult:
            return await self._run(operation, args)

        return Tool(
            name=name,
            description=self.custom_tool_descriptions.get(name, DESCRIPTIONS[name]),
            function=function,
            parameters=SCHEMAS[name],
            display_text=DISPLAY_TEXT[name],
        )

    async def _run(
        self, operation: Callable[[dict[str, Any]], str], args: dict[str, Any]
    ) -> str | ToolResult:
        def work() -> str | ToolResult:
            try:
                if not self._refreshed:
                    # Once per turn: see what other workers stored meanwhile.
                    self._refreshed = True
                    self.filesystem.refresh()
                return operation(args)
            except FileSystemError as exc:
                return ToolResult(
                    tool_call_id="", name="", content=str(exc), is_error=True
                )

        # The events the call emits reach the turn's loop from the worker thread
        # (``events.emit`` is thread-safe).
        return await asyncio.to_thread(work)

    def _ls(self, args: dict[str, Any]) -> str:
        pattern = args.get("pattern") or None
        entries = self.filesystem.list_entries()
        if pattern:
            directory = _directory_named(self.filesystem, pattern)
            if directory is not None:
                entries = [
                    e
                    for e in entries
                    if is_within(e.path, directory) and e.path != directory
                ]
            else:
                match = pattern_matcher(pattern)
                entries = [e for e in entries if match(e.path)]
        if not entries:
            return (
                f"No files match pattern: {pattern}"
                if pattern
                else "No files in filesystem"
            )
        shown = entries[: self.max_ls_entries]
        text = json.dumps(
            [self.entry_to_map(e) for e in shown], ensure_ascii=False, default=str
        )
        if len(entries) > len(shown):
            text += (
                f"\n({len(entries) - len(shown)} more entries not shown; narrow the "
                "listing with a pattern)"
            )
        return text

    def _file(self, path: Any) -> FileEntry:
        entry = self.filesystem.read_file(path)
        if entry.is_directory:
            raise PathIsDirectory(
                f"{entry.path} is a directory; use ls to see its files."
            )
        return entry

    def _read_file(self, args: dict[str, Any]) -> str:
        entry = self._file(args["file_path"])
        offset = int(args.get("offset") or 0)
        limit = int(args.get("limit") or DEFAULT_READ_LIMIT)
        return number_lines(entry.content or "", offset, limit)

    def _write_file(self, args: dict[str, Any]) -> str:
        entry = self.filesystem.write_file(args["file_path"], args["content"])
        return json.dumps(self.entry_to_map(entry), ensure_ascii=False, default=str)

    def _edit_file(self, args: dict[str, Any]) -> str:
        with self.filesystem.locked():
            entry = self._file(args["file_path"])
            text, count = replace_text(
                entry.content or "",
                args["old_string"],
                args["new_string"],
                replace_all=bool(args.get("replace_all", False)),
            )
            self.filesystem.write_file(entry.path, text)
        more = f" ({count} replacements)" if count > 1 else ""
        return f"File edited successfully: {entry.path}{more}"

    def _edit_lines(self, args: dict[str, Any]) -> str:
        start, end = int(args["start_line"]), int(args["end_line"])
        with self.filesystem.locked():
            entry = self._file(args["file_path"])
            text, count = replace_lines(
                entry.content or "", start, end, args["new_content"]
            )
            self.filesystem.write_file(entry.path, text)
        return (
            f"File edited successfully: {entry.path}\n"
            f"Replaced {count} lines ({start}-{end})"
        )

    def _search_text(self, args: dict[str, Any]) -> str:
        searcher = Searcher(
            args["pattern"], case_sensitive=bool(args.get("case_sensitive", True))
        )
        context_lines = int(args.get("context_lines") or 0)
        max_results = int(args.get("max_results") or 50)
        if args.get("file_path"):
            entry = self._file(args["file_path"])
            matches, truncated = searcher.matches(
                entry.content or "",
                context_lines=context_lines,
                max_results=max_results,
            )
            return format_search_results(
                [(entry.path, matches)], max_results, truncated
            )
        results, total, truncated = [], 0, False
        for path in self.filesystem.list_files():
            if total >= max_results:
                truncated = True
                break
            try:
                entry = self.filesystem.read_file(path)
            except FileNotFound:
                continue  # deleted meanwhile
            matches, more = searcher.matches(
                entry.content or "",
                context_lines=context_lines,
                max_results=max_results - total,
            )
            if matches:
                results.append((path, matches))
                total += len(matches)
            truncated = truncated or more
        return format_search_results(results, max_results, truncated)

    def _delete_file(self, args: dict[str, Any]) -> str:
        path = normalize_file_path(args["file_path"])
        self.filesystem.delete_file(path)
        return f"File deleted successfully: {path}"

    def _move_file(self, args: dict[str, Any]) -> str:
        old, new = (
            normalize_file_path(args["old_path"]),
            normalize_file_path(args["new_path"]),
        )
        moved = self.filesystem.move_file(old, new)
        return f"Moved successfully: {old} -> {new} ({len(moved)} entries)"


def _directory_named(filesystem: FileSystemState, pattern: str) -> str | None:
    """The directory ``pattern`` names, when it names one (no wildcard)."""
    if "*" in pattern:
        return None
    try:
        path = normalize_path(pattern)
    except FileSystemError:
        return None
    return path if filesystem.is_directory(path) else None
