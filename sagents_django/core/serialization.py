"""StateSerializer: conversation state to and from JSON-ready dicts.

Code lives in code, data lives in data: only messages, todos, metadata and a pending
interrupt are written; the agent (model, tools, middleware) is rebuilt from code, and
``agent_id`` is supplied again on load. The envelope is versioned::

    {"version": 1, "state": {...}, "serialized_at": "2026-11-22T10:00:00+00:00"}

Loading validates shape and bounds (nesting depth) and never imports or instantiates
anything named by the data. Interrupted tool results that no middleware claims through
``restorable_interrupt`` become error results, so the model sees a recoverable failure.
A pending HITL or sub-agent interrupt is read into its current JSON form (see
``approvals``), so states written before the interrupt types load like new ones; one
that cannot be read is kept as stored (``resume`` then explains what is wrong).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from .approvals import CustomInterrupt, interrupt_from_dict
from .exceptions import SerializationError, StateVersionError
from .limits import MAX_STATE_DEPTH
from .messages import Message
from .middleware.base import MiddlewareEntry, is_restorable
from .state import State
from .todo import Todo

CURRENT_VERSION = 1
MAX_DEPTH = MAX_STATE_DEPTH
"""Deeper nesting in stored state is refused (a guard against hostile payloads);
``limits.MAX_STATE_DEPTH``, under the name this module always exported."""


def current_version() -> int:
    return CURRENT_VERSION


def serialize_state(state: State) -> dict[str, Any]:
    """The state as a dict with string keys (no agent_id)."""
    return {
        "messages": [m.to_dict() for m in state.messages],
        "todos": [t.to_dict() for t in state.todos],
        "metadata": state.metadata,
        "interrupt_data": state.interrupt_data,
    }


def serialize_server_state(state: State) -> dict[str, Any]:
    """The versioned envelope stored by persistence."""
    return {
        "version": CURRENT_VERSION,
        "state": serialize_state(state),
        "serialized_at": datetime.now(UTC).isoformat(),
    }


def deserialize_state(agent_id: str | None, data: Any) -> State:
    """A State from ``serialize_state`` output; raises SerializationError."""
    if not isinstance(data, dict):
        raise SerializationError(
            f"Serialized state must be a dict, not {type(data).__name__}"
        )
    _check_depth(data)
    try:
        messages = [Message.from_dict(m) for m in _list(data, "messages")]
        todos = [Todo.from_dict(t) for t in _list(data, "todos")]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SerializationError(f"Serialized state is malformed: {exc!r}") from exc
    metadata = data.get("metadata")
    metadata = {} if metadata is None else metadata
    interrupt = data.get("interrupt_data")
    if not isinstance(metadata, dict):
        raise SerializationError("Serialized state metadata must be a dict")
    if interrupt is not None and not isinstance(interrupt, dict):
        raise SerializationError(
            "Serialized state interrupt_data must be a dict or null"
        )
    for message in messages:
        if message.role not in ("system", "user", "assistant", "tool"):
            raise SerializationError(f"Unknown message role {message.role!r}")
    return State(
        messages=messages,
        todos=todos,
        metadata=metadata,
        interrupt_data=_current_form(interrupt),
        agent_id=agent_id,
    )


def deserialize_server_state(
    agent_id: str | None,
    data: Any,
    *,
    middleware: Iterable[MiddlewareEntry] = (),
) -> State:
    """Read an envelope; demote interrupts that none of ``middleware`` can resume."""
    if not isinstance(data, dict):
        raise SerializationError(
            f"Serialized state must be a dict, not {type(data).__name__}"
        )
    version = data.get("version")
    if type(version) is not int or version != CURRENT_VERSION:  # True == 1 in Python
        raise StateVersionError(
            f"Serialized state has version {version!r}; this code reads version "
            f"{CURRENT_VERSION}"
        )
    if "state" not in data:
        raise SerializationError("Serialized state envelope has no 'state' key")
    state = deserialize_state(agent_id, data["state"])
    entries = list(middleware)
    return state.demote_interrupts(lambda d: is_restorable(entries, d))


class StateSerializer:
    """The reference's module as a namespace."""

    current_version = staticmethod(current_version)
    serialize_state = staticmethod(serialize_state)
    serialize_server_state = staticmethod(serialize_server_state)
    deserialize_state = staticmethod(deserialize_state)
    deserialize_server_state = staticmethod(deserialize_server_state)


def _current_form(interrupt: dict[str, Any] | None) -> dict[str, Any] | None:
    if interrupt is None:
        return None
    try:
        typed = interrupt_from_dict(interrupt)
    except SerializationError:
        return interrupt
    return interrupt if isinstance(typed, CustomInterrupt) else typed.to_dict()


def _list(data: dict[str, Any], key: str) -> list[Any]:
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise SerializationError(f"Serialized state {key!r} must be a list")
    return value


def _check_depth(data: Any) -> None:
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise SerializationError(
                f"Serialized state nests deeper than {MAX_DEPTH} levels"
            )
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise SerializationError(
                        f"Serialized state has a non-string key {key!r}"
                    )
                if isinstance(item, (dict, list)):
                    stack.append((item, depth + 1))
        elif isinstance(value, list):
            stack.extend(
                (item, depth + 1) for item in value if isinstance(item, (dict, list))
            )
