"""What the runtime needs from a store: the persistence protocols.

The core owns the shapes, not the storage: ``AgentPersistence`` keeps a
conversation's serialized state, ``DisplayMessagePersistence`` keeps what people see
(one row per display item). Both are ``typing.Protocol``s, so an implementation need
not subclass anything; ``sagents_django.persistence`` implements them over the
Django models, and a test can pass a plain object with the same methods.

The scope-first contract: every method takes the integrator's scope (opaque here)
as its first argument and must treat a conversation outside it as not found. A
``PersistenceContext`` carries the identifiers every call needs.

Methods are synchronous: the runtime calls them from a worker. Async code wraps
them (``await sync_to_async(persistence.save_message)(scope, message, context)``).
Implementations never raise into the agent: a failed write is logged (and recorded
where an operator sees it, if the store can) and answered with None (or ``[]`` for
``save_message``), and the turn goes on; a caller that gets None from
``persist_state`` must not report the turn as saved.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol, Required, TypedDict, runtime_checkable

from .messages import Message

Lifecycle = Literal[
    "on_completion",
    "on_error",
    "on_interrupt",
    "on_title_generated",
    "on_shutdown",
    "on_step",
]
LIFECYCLES: tuple[str, ...] = (
    "on_completion",
    "on_error",
    "on_interrupt",
    "on_title_generated",
    "on_shutdown",
    "on_step",
)
"""Why state is persisted: a turn completed, failed or paused for a person, the
title changed, the worker is shutting down, or a step ended (a checkpoint)."""

ToolStatus = Literal["executing", "completed", "failed", "interrupted", "cancelled"]
TOOL_STATUSES: tuple[str, ...] = (
    "executing",
    "completed",
    "failed",
    "interrupted",
    "cancelled",
)


@dataclass(frozen=True, kw_only=True, slots=True)
class PersistenceContext:
    """Identifiers passed to every persistence call."""

    agent_id: str
    """The agent's id (``conversation-<uuid>`` for a conversation's agent)."""
    conversation_id: str | None = None
    """The conversation the rows belong to; None when the agent has none."""
    lifecycle: Lifecycle | None = None
    """For ``persist_state``: why the state is being saved."""
    revision: int | None = None
    """For ``persist_state``: the revision of the state the caller read (0: none).
    A store that counts revisions saves only over that one (compare-and-set), so
    a stale writer never overwrites a newer state; None writes unconditionally."""
    run_id: str | None = None
    """The run (turn) the call belongs to, when there is one: failures name it."""


class ToolInfo(TypedDict, total=False):
    """What ``update_tool_status`` receives; fields beyond ``call_id`` by status:
    executing: name, display_text; completed: name, result (and display_text);
    failed: name, error; interrupted: display_text; cancelled: name."""

    call_id: Required[str]
    name: str
    display_text: str
    result: str
    error: str


class SyntheticMessage(TypedDict, total=False):
    """A display row the agent did not produce (a cancellation notice, an error,
    the user's answer to a question)."""

    message_type: Required[str]
    content_type: Required[str]
    content: Required[dict[str, Any]]
    metadata: dict[str, Any]
    status: str


@runtime_checkable
class AgentPersistence(Protocol):
    """Stores the serialized state of an agent's conversation."""

    def load_state(
        self, scope: Any, context: PersistenceContext
    ) -> dict[str, Any] | None:
        """The envelope written by ``serialize_server_state``, or None when there is
        none (a new conversation, or one outside ``scope``)."""
        ...

    def persist_state(
        self, scope: Any, state_data: dict[str, Any], context: PersistenceContext
    ) -> Any:
        """Save ``state_data`` (an envelope) for ``context.conversation_id``; returns
        the stored record, or None when the write failed (logged, never raised)."""
        ...


@runtime_checkable
class DisplayMessagePersistence(Protocol):
    """Stores display messages and the lifecycle of tool-call cards."""

    def save_message(
        self, scope: Any, message: Message, context: PersistenceContext
    ) -> list[Any]:
        """Save one row per ``extract_display_items(message)`` item, numbered by
        ``sequence`` in display order; tool calls start "pending". Returns the saved
        rows (the runtime publishes each), ``[]`` when nothing was saved."""
        ...

    def update_tool_status(
        self,
        scope: Any,
        status: ToolStatus,
        tool_info: ToolInfo,
        context: PersistenceContext,
    ) -> Any:
        """Move the tool-call row of ``tool_info["call_id"]`` to ``status``; returns
        the updated row, or None when there is no such call in the scope."""
        ...

    def resolve_tool_result(
        self, scope: Any, tool_call_id: str, content: str, context: PersistenceContext
    ) -> Any:
        """Replace an interrupted tool result's placeholder with ``content`` (after a
        sub-agent resumes and finishes); returns the row, or None."""
        ...

    def save_synthetic_message(
        self, scope: Any, message: SyntheticMessage, context: PersistenceContext
    ) -> Any:
        """Save a row the agent did not produce; returns it, or None."""
        ...
