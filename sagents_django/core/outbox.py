"""Messages a tool queues for a turn right after this one (upstream Sagents v0.10's
``queue_message_from_tool``).

A tool calls ``context.queue_message("...")``: the message is not added to this
turn (the model would read it as the person's words in the middle of a step) but
kept in the execution's ``Outbox`` and returned as ``AgentResult.queued_messages``.
Whoever runs the agent decides what to do with them; the runtime records them with
the step's tool results (so a taken-over turn neither loses nor repeats them) and
runs them as the next turn, as it runs messages a person sends during a turn. A
sub-agent's tools queue into the parent's outbox: one turn, one queue.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

from .messages import Message

__all__ = ["Outbox", "QueuedFromTool"]


@dataclass(frozen=True, kw_only=True, slots=True)
class QueuedFromTool:
    """A user message a tool queued."""

    message: Message
    display: bool = True
    """Whether the transcript shows it (``display=False``: the model alone reads it,
    e.g. a playbook a tool loads)."""
    tool_name: str | None = None
    call_id: str | None = None


class Outbox:
    """The messages queued during one turn, in order; tools may run in threads."""

    def __init__(self) -> None:
        self._items: list[QueuedFromTool] = []
        self._lock = threading.Lock()

    def put(self, item: QueuedFromTool) -> None:
        with self._lock:
            self._items.append(item)

    def since(self, count: int) -> list[QueuedFromTool]:
        """The messages after the first ``count``."""
        with self._lock:
            return self._items[count:]

    def __len__(self) -> int:
        return len(self._items)


_current: ContextVar[Outbox | None] = ContextVar("sagents_outbox", default=None)


def current() -> Outbox | None:
    """The outbox of the turn running in this context (a sub-agent's parent's)."""
    return _current.get()


@contextlib.contextmanager
def using(outbox: Outbox) -> Iterator[None]:
    token = _current.set(outbox)
    try:
        yield
    finally:
        _current.reset(token)
