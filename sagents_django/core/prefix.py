"""Work on a history that grows at its end, done once per message.

Every step hands the middleware and the model the whole history; converting,
counting or scanning it again each step made a step's cost grow with the
conversation. What was computed for the history seen last time is reused when that
history is still the start of the new one. The test is a single list comparison,
which CPython runs in C and which takes an object as equal to itself without
calling ``__eq__``: a few microseconds for a thousand messages.
"""

from __future__ import annotations

from collections.abc import Sequence

from .messages import Message

__all__ = ["extends"]


def extends(previous: Sequence[Message], messages: Sequence[Message]) -> bool:
    """Whether ``messages`` begins with ``previous`` (the same messages, or equal
    ones)."""
    count = len(previous)
    if count > len(messages):
        return False
    head = messages[:count]
    if type(head) is not type(previous):
        head = list(head)
        previous = list(previous)
    return head == previous
