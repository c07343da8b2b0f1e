"""Time budgets: how long one file tool call may run before it answers with an error.

A tool call runs in a worker thread and cannot be killed, so the budget is kept in
two ways. The operation checks its ``Deadline`` between bounded steps (a search
between chunks of text, ``ls`` between batches of entries) and stops with
``TimeBudgetExceeded`` once it has passed; and the middleware stops waiting at the
deadline, so the turn goes on even if a step overruns (its thread then stops at the
next check). Steps that change files (a move, a delete) are never cut in the middle:
they finish, and the model is told they may still complete.
"""

from __future__ import annotations

import time

from ..limits import FILE_TOOL_TIME_BUDGET
from .errors import FileSystemError


class TimeBudgetExceeded(FileSystemError):
    """A file tool call ran out of time; the message says what to try instead."""


class Deadline:
    """A point in time after which an operation stops."""

    __slots__ = ("expires", "seconds")

    def __init__(self, seconds: float = FILE_TOOL_TIME_BUDGET) -> None:
        self.seconds = seconds
        self.expires = time.monotonic() + seconds

    def remaining(self) -> float:
        return self.expires - time.monotonic()

    def check(self, hint: str) -> None:
        """Raise ``TimeBudgetExceeded`` (with ``hint`` for the model) once expired."""
        if time.monotonic() >= self.expires:
            raise TimeBudgetExceeded(
                f"Stopped after {self.seconds:g} seconds, the time budget of one "
                f"call; {hint}"
            )
