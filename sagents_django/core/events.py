"""The event catalogue, and how code inside a turn announces an event.

Events are what a UI subscribes to. Their names and payloads follow Sagents' AgentServer
and FileSystemServer events; payloads are JSON-ready dicts. The runtime turns them into
channel-layer messages ``{"type": "agent.event", "event": name, "data": payload}``.

Middleware and tools announce events with ``emit(name, data)``: it reaches every
``on_agent_event`` handler of the execution that is running (a context variable, so
hooks need no extra argument). Outside an execution ``emit`` does nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
from collections.abc import Callable, Iterator
from typing import Any

logger = logging.getLogger(__name__)

#: Event name -> payload shape (documentation that code and tests can read).
EVENTS: dict[str, str] = {
    # Agent events (Sagents AgentServer)
    "status_changed": '{"status": "idle|running|interrupted|cancelled|error", "data": ...}',
    "todos_updated": '{"todos": [{"id", "content", "status"}]}',
    "llm_deltas": '{"deltas": [MessageDelta.to_dict()]}',
    "llm_message": '{"message": Message.to_dict()}',
    "llm_token_usage": '{"usage": TokenUsage.to_dict()}',
    "tool_execution_update": (
        '{"status": "executing|completed|failed", "call_id", "name", '
        '"display_text"?, "arguments"?, "result"?, "error"?}'
    ),
    "display_message_saved": '{"display_message": {...}}',
    "display_message_updated": '{"display_message": {...}}',
    "conversation_title_generated": '{"title": str, "agent_id": str}',
    "agent_shutdown": '{"agent_id", "reason", "last_activity_at"}',
    "debug": '{"event": str, "data": ...}',
    # Filesystem events (Sagents FileSystemServer)
    "file_updated": '{"path": str, "scope": [kind, id]}',
    "file_deleted": '{"path": str, "scope": [kind, id]}',
    # A sub-agent's own event, tagged with the sub-agent and the parent's task call
    "subagent_event": (
        '{"subagent": name, "task_call_id": str, "event": name, "data": payload}'
    ),
}

Handler = Callable[[str, dict[str, Any]], Any]

_handlers: contextvars.ContextVar[tuple[Handler, ...]] = contextvars.ContextVar(
    "sagents_event_handlers", default=()
)
_pending: set[asyncio.Task[Any]] = set()


def emit(name: str, data: dict[str, Any]) -> None:
    """Announce an event to the running execution's handlers (sync-safe).

    A handler that returns an awaitable is scheduled on the running loop; a handler
    that raises is logged and skipped.
    """
    dispatch(_handlers.get(), name, data)


def dispatch(handlers: tuple[Handler, ...], name: str, data: dict[str, Any]) -> None:
    """Call ``handlers`` as ``emit`` does (for code that forwards events elsewhere)."""
    for handler in handlers:
        try:
            result = handler(name, data)
            if inspect.isawaitable(result):
                task = asyncio.ensure_future(result)
                _pending.add(task)
                task.add_done_callback(_pending.discard)
        except Exception:
            logger.exception("Event handler %r raised for %s", handler, name)


def current_handlers() -> tuple[Handler, ...]:
    """The handlers ``emit`` reaches here (a sub-agent forwards to its parent's)."""
    return _handlers.get()


@contextlib.contextmanager
def event_handlers(*handlers: Handler) -> Iterator[None]:
    """Route ``emit`` to ``handlers`` (added to any outer ones) inside the block."""
    token = _handlers.set((*_handlers.get(), *handlers))
    try:
        yield
    finally:
        _handlers.reset(token)


@contextlib.contextmanager
def isolated_events(*handlers: Handler) -> Iterator[None]:
    """Route ``emit`` to ``handlers`` only (a sub-agent re-tags its events)."""
    token = _handlers.set(tuple(handlers))
    try:
        yield
    finally:
        _handlers.reset(token)


async def drain() -> None:
    """Wait for event handlers scheduled by ``emit`` (called at the end of a turn)."""
    while _pending:
        await asyncio.gather(*list(_pending), return_exceptions=True)
