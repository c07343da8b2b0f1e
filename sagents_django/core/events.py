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
import concurrent.futures
import contextlib
import contextvars
import inspect
import logging
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

logger = logging.getLogger(__name__)

DISPLAY_MESSAGE = (
    '{"id": str, "conversation_id": str, "message_type": "user|assistant|tool|system", '
    '"content_type": "text|thinking|tool_call|tool_result|error|todo_snapshot|...", '
    '"content": {...}, "sequence": int, "status": "completed|pending|executing|'
    'failed|interrupted|cancelled|...", "metadata": {...}, "inserted_at": iso8601, '
    '"run_id": str|null}'
)
"""The JSON of one display-message row (``runtime.publisher.display_message_json``),
as ``display_message_saved``, ``display_message_updated`` and ``message_queued``
carry it and the socket's ``history`` reply lists it."""

RUN = '"run_id": str, "trigger": "message|execute|resume|queued|..."'

#: Event name -> payload shape (documentation that code and tests can read).
EVENTS: dict[str, str] = {
    # Agent events (Sagents AgentServer)
    "status_changed": (
        '{"status": "idle|running|interrupted|cancelled|error", "run_id": str, '
        '"data"?: interrupt_data (interrupted) | {"error": str} (error)}'
    ),
    "todos_updated": '{"todos": [{"id", "content", "status"}]}',
    "todo_snapshot": (
        '{"display_item": {"type": "todo_snapshot", "message_type": "system", '
        '"content": {"todos": [...], "summary": {"total": int, <status>: int}}}} '
        "(TodoList(inline=True): the plan as a transcript item)"
    ),
    "llm_deltas": '{"deltas": [MessageDelta.to_dict()]}',
    "llm_message": '{"message": Message.to_dict()}',
    "llm_token_usage": '{"usage": TokenUsage.to_dict()}',
    "tool_execution_update": (
        '{"status": "executing|completed|failed", "call_id", "name", '
        '"display_text"?, "arguments"?, "result"?, "error"?, '
        '"progress"?: {"progress": number, "total": number|null, "message": str|null}}'
    ),
    "display_message_saved": '{"display_message": ' + DISPLAY_MESSAGE + "}",
    "display_message_updated": '{"display_message": ' + DISPLAY_MESSAGE + "}",
    "conversation_title_generated": '{"title": str, "agent_id": str}',
    "agent_shutdown": (
        '{"agent_id": str, "reason": "no_viewers", "interrupt_restorable": bool|null, '
        '"last_activity_at": iso8601|null, "shutdown_at": iso8601}'
    ),
    "agent_state_update": (
        '{"message_count": int, "todos": [...], "metadata_keys": [str], '
        '"interrupted": bool} (debug stream, each step end) | {"reason": "reset"}'
    ),
    "debug": '{"event": str, "data": ...}',
    # Runtime events (runs, the double-text queue, failures)
    "run_started": "{" + RUN + "}",
    "run_finished": (
        "{" + RUN + ', "status": "completed|interrupted|cancelled|error", '
        '"error": str, "usage": TokenUsage.to_dict(), "cost": decimal str, '
        '"next_run_id": str|null}'
    ),
    "message_queued": (
        '{"run_id": str, "display_message": ' + DISPLAY_MESSAGE + ", "
        '"policy": "enqueue|interrupt"}'
    ),
    "error": '{"error": str, "error_type": str, "retryable": bool}',
    # Spend budgets (``SpendBudget``): the call that would pass a limit
    "budget_warning": (
        '{"message": str, "scope": "site|owner|user|conversation", '
        '"period": "day|month|total", "limit": decimal str, "spent": decimal str, '
        '"remaining": decimal str, "estimate": decimal str}'
    ),
    "budget_exhausted": (
        '{"message": str, "scope", "period", "limit", "spent", "remaining", '
        '"estimate"} (the turn ends before the model is called)'
    ),
    "branch_switched": (
        '{"reason": "edit|regenerate|switch", "message_id": int} (the branch shown '
        "changed: redraw the transcript from the database)"
    ),
    # Filesystem events (Sagents FileSystemServer)
    "file_updated": '{"path": str, "scope": [kind, id]}',
    "file_deleted": '{"path": str, "scope": [kind, id]}',
    # A sub-agent's own event, tagged with the sub-agent and the parent's task call
    "subagent_event": (
        '{"subagent": name, "task_call_id": str, "event": name, "data": payload}'
    ),
}

Handler = Callable[[str, dict[str, Any]], Any]
# A handler is remembered with the loop that registered it: sync tools run in worker
# threads (with no loop), and what their events schedule must run on the turn's loop.
Bound = tuple[Handler, "asyncio.AbstractEventLoop | None"]

_handlers: contextvars.ContextVar[tuple[Bound, ...]] = contextvars.ContextVar(
    "sagents_event_handlers", default=()
)
_pending: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, set[Any]] = (
    weakref.WeakKeyDictionary()
)
_lock = threading.Lock()


def emit(name: str, data: dict[str, Any]) -> None:
    """Announce an event to the running execution's handlers (thread-safe).

    A handler that returns an awaitable has it scheduled on the loop the handler was
    registered from; a handler that raises is logged and skipped.
    """
    dispatch(_handlers.get(), name, data)


def dispatch(handlers: tuple[Bound, ...], name: str, data: dict[str, Any]) -> None:
    """Call ``handlers`` as ``emit`` does (for code that forwards events elsewhere)."""
    for handler, loop in handlers:
        try:
            result = handler(name, data)
            if inspect.isawaitable(result):
                _schedule(result, loop)
        except Exception:
            logger.exception("Event handler %r raised for %s", handler, name)


def _schedule(awaitable: Any, loop: asyncio.AbstractEventLoop | None) -> None:
    running = _running_loop()
    if running is not None and (loop is None or loop is running):
        future: Any = asyncio.ensure_future(awaitable)
        target = running
    elif loop is not None and not loop.is_closed():
        future = asyncio.run_coroutine_threadsafe(awaitable, loop)
        target = loop
    else:
        if inspect.iscoroutine(awaitable):
            awaitable.close()
        logger.warning("An event handler's coroutine had no loop to run on")
        return
    with _lock:
        pending = _pending.setdefault(target, set())
        pending.add(future)
    future.add_done_callback(lambda f: _forget(target, f))


def _forget(loop: asyncio.AbstractEventLoop, future: Any) -> None:
    with _lock:
        _pending.get(loop, set()).discard(future)


def current_handlers() -> tuple[Bound, ...]:
    """The handlers ``emit`` reaches here (a sub-agent forwards to its parent's)."""
    return _handlers.get()


@contextlib.contextmanager
def event_handlers(*handlers: Handler) -> Iterator[None]:
    """Route ``emit`` to ``handlers`` (added to any outer ones) inside the block."""
    loop = _running_loop()
    token = _handlers.set((*_handlers.get(), *((h, loop) for h in handlers)))
    try:
        yield
    finally:
        _handlers.reset(token)


@contextlib.contextmanager
def isolated_events(*handlers: Handler) -> Iterator[None]:
    """Route ``emit`` to ``handlers`` only (a sub-agent re-tags its events)."""
    loop = _running_loop()
    token = _handlers.set(tuple((h, loop) for h in handlers))
    try:
        yield
    finally:
        _handlers.reset(token)


async def drain() -> None:
    """Wait for what ``emit`` scheduled on this loop (called at the end of a turn)."""
    loop = asyncio.get_running_loop()
    while True:
        with _lock:
            pending = list(_pending.get(loop, ()))
        if not pending:
            return
        await asyncio.gather(
            *(
                asyncio.wrap_future(f)
                if isinstance(f, concurrent.futures.Future)
                else f
                for f in pending
            ),
            return_exceptions=True,
        )
        with _lock:
            _pending.get(loop, set()).difference_update(pending)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
