"""Callback fan-out: every handler registered for a key fires, in registration order.

Handler maps come from middleware (``callbacks()``), from the caller of ``execute`` and
from the runtime's event publisher. Handlers receive the ``Execution`` first, as Sagents'
handlers receive the chain. A handler that raises is logged and skipped: an observer
never breaks a turn.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .exceptions import ConfigurationError

logger = logging.getLogger(__name__)

#: Every key a handler map may use (reference 001, plus ``on_after_middleware``).
CALLBACK_KEYS: frozenset[str] = frozenset(
    (
        # model level
        "on_llm_new_delta",  # (execution, [MessageDelta])
        "on_llm_new_message",  # (execution, Message)
        "on_llm_ratelimit_info",  # (execution, {header: value})
        "on_llm_token_usage",  # (execution, TokenUsage)
        "on_llm_response_headers",  # (execution, {header: value})
        # chain level
        "on_message_processed",  # (execution, Message)
        "on_message_processing_error",  # (execution, Message | None, error text)
        "on_error_message_created",  # (execution, Message)
        "on_tool_call_identified",  # (execution, ToolCall, Tool | None)
        "on_tool_execution_started",  # (execution, ToolCall, Tool | None)
        "on_tool_execution_completed",  # (execution, ToolCall, ToolResult)
        "on_tool_execution_failed",  # (execution, ToolCall, ToolResult)
        "on_tool_response_created",  # (execution, Message)
        "on_retries_exceeded",  # (execution, error text)
        # agent level
        "on_after_middleware",  # (state) after before_model hooks, before the call
        "on_step_end",  # (execution) a step's tools ran; the next model call is due
        "on_agent_event",  # (execution, name, data) for events.emit (see events.py)
    )
)


class Callbacks:
    """The handlers of one execution, grouped by key."""

    __slots__ = ("_handlers",)

    def __init__(self, maps: Iterable[Mapping[str, Callable[..., Any]] | None] = ()):
        self._handlers: dict[str, list[Callable[..., Any]]] = {}
        for handler_map in maps:
            self.add(handler_map)

    def add(self, handler_map: Mapping[str, Callable[..., Any]] | None) -> None:
        if not handler_map:
            return
        for key, handler in handler_map.items():
            if key not in CALLBACK_KEYS:
                raise ConfigurationError(
                    f"Unknown callback key {key!r}; valid keys: "
                    f"{', '.join(sorted(CALLBACK_KEYS))}"
                )
            if not callable(handler):
                raise ConfigurationError(f"Callback {key!r} is not callable")
            self._handlers.setdefault(key, []).append(handler)

    def has(self, key: str) -> bool:
        return key in self._handlers

    async def fire(self, key: str, *args: Any) -> None:
        handlers = self._handlers.get(key)
        if not handlers:
            return
        for handler in handlers:
            try:
                result = handler(*args)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                logger.exception("Callback %s handler %r raised", key, handler)
