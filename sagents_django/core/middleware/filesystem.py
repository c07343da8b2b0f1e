"""FileSystem: tools over a virtual filesystem shared by every agent of a scope.

Tools: ``ls``, ``read_file``, ``write_file``, ``edit_file``, ``search_text``,
``edit_lines``, ``delete_file``, ``move_file`` (argument names as in Sagents). The
middleware holds no files: when attached it takes the ``filesystem=`` given, or the
registry's filesystem for ``filesystem_scope`` (option, else the agent's, else
``("agent", agent_id)``), so a file written in one conversation is there for the
next turn of another conversation of the same scope.

Every path the model sends goes through the filesystem's validation; anything
refused, missing, read-only, too large or too slow comes back as an error tool result
with a message the model can act on, never an exception. Tool functions are
``async`` and run the filesystem call (``filesystem.operations``) in a worker thread
(its events still reach the turn's handlers: ``events.emit`` is thread-safe), within
a time budget (``time_budget``, ``limits.FILE_TOOL_TIME_BUDGET`` by default) and
without holding the GIL for long, so the event loop keeps running. Attaching the
middleware does no I/O: storage is listed on the first tool call. Changes waiting on
a debounce are flushed around every model call, so none outlives the turn.

Persistence callbacks (``persistence=``, ``on_write=``, ``on_read=``, ``on_delete=``,
``on_list=``, with ``context=``, ``cache_reads=`` and ``fail_on_persistence_error=``)
tell a site's own storage what the tools do (``filesystem.callbacks``); they are
``persistence_callbacks`` here (``callbacks()`` is every middleware's LLM hook).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..exceptions import ConfigurationError
from ..filesystem.budget import Deadline
from ..filesystem.callbacks import PersistenceCallbacks
from ..filesystem.config import FileSystemConfig
from ..filesystem.entries import FileEntry
from ..filesystem.errors import FileSystemError
from ..filesystem.operations import FileOperations
from ..filesystem.paths import normalize_file_path
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
from ..limits import FILE_TOOL_TIME_BUDGET
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
IDEMPOTENT_TOOLS = frozenset({"ls", "read_file", "search_text", "write_file"})
"""Safe to run twice (a read, or a write of the whole file): a turn taken over
after a crash runs them again; an interrupted edit, delete or move is not repeated."""
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
        time_budget: float = FILE_TOOL_TIME_BUDGET,
        persistence: Any = None,
        on_write: Callable[..., Any] | None = None,
        on_read: Callable[..., Any] | None = None,
        on_delete: Callable[..., Any] | None = None,
        on_list: Callable[..., Any] | None = None,
        context: Mapping[str, Any] | None = None,
        cache_reads: bool = True,
        fail_on_persistence_error: bool = False,
    ) -> None:
        persistence_options: dict[str, Any] = {
            "persistence": persistence,
            "on_write": on_write,
            "on_read": on_read,
            "on_delete": on_delete,
            "on_list": on_list,
            "context": context,
            "cache_reads": cache_reads,
            "fail_on_persistence_error": fail_on_persistence_error,
        }
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
            time_budget=time_budget,
            **persistence_options,
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
        if not isinstance(time_budget, int | float) or not time_budget > 0:
            raise ConfigurationError(
                f"time_budget must be a positive number of seconds, not {time_budget!r}"
            )
        self.time_budget = float(time_budget)
        self.persistence_callbacks = PersistenceCallbacks(**persistence_options)
        """The persistence callbacks (falsy when none was given)."""
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
        if self._filesystem is not None and self._filesystem.has_pending():
            await asyncio.to_thread(self._filesystem.flush_all)

    def debug_summary(self) -> dict[str, Any]:
        fs = self.filesystem
        return {
            "scope": fs.scope_json,
            "tools": self.enabled_tools,
            "configs": [c.describe() for c in fs.get_persistence_configs().values()],
            "stats": fs.stats(),
            "callbacks": (
                self.persistence_callbacks.describe()
                if self.persistence_callbacks
                else None
            ),
        }

    # Tools ------------------------------------------------------------------------
    def tools(self) -> list[Tool]:
        return [self._tool(name) for name in self.enabled_tools]

    def _tool(self, name: str) -> Tool:
        async def function(args: dict[str, Any], _context: Any) -> str | ToolResult:
            return await self._run(name, args)

        return Tool(
            name=name,
            description=self.custom_tool_descriptions.get(name, DESCRIPTIONS[name]),
            function=function,
            parameters=SCHEMAS[name],
            display_text=DISPLAY_TEXT[name],
            idempotent=name in IDEMPOTENT_TOOLS,
        )

    async def _run(self, name: str, args: dict[str, Any]) -> str | ToolResult:
        deadline = Deadline(self.time_budget)

        def work() -> str | ToolResult:
            try:
                if not self._refreshed:
                    # Once per turn: see what other workers stored meanwhile.
                    self._refreshed = True
                    self.filesystem.refresh()
                operations = FileOperations(
                    self.filesystem,
                    entry_to_map=self.entry_to_map,
                    max_ls_entries=self.max_ls_entries,
                    callbacks=self.persistence_callbacks or None,
                )
                return operations.by_name()[name](args, deadline)
            except FileSystemError as exc:
                return _error(str(exc))

        # The call runs in a worker thread (the events it emits reach the turn's
        # loop: ``events.emit`` is thread-safe), checks its deadline between bounded
        # steps, and is no longer waited for a little after it: a thread cannot be
        # killed, but the turn never waits for one past its budget.
        try:
            return await asyncio.wait_for(
                asyncio.to_thread(work), self.time_budget + _GRACE_SECONDS
            )
        except TimeoutError:
            return _error(
                f"{name} did not finish within {self.time_budget:g} seconds, the time "
                "budget of one call. If it changes files it may still complete: "
                "check with ls or read_file before trying again."
            )


_GRACE_SECONDS = 0.25
"""How long past its budget a call is waited for, so that the call's own, more
precise message (from its deadline check) usually wins."""


def _error(text: str) -> ToolResult:
    return ToolResult(tool_call_id="", name="", content=text, is_error=True)
