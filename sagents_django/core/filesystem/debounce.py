"""Debounced writes: a deadline per dirty path and one timer thread per filesystem.

Only configs with ``debounce_ms`` use this (the default is write-through). Sagents
keeps a timer per file in its GenServer; with no resident process we keep deadlines
and a single daemon timer that fires at the earliest one, and the runtime calls
``flush_all`` at step and turn ends, so a dirty file waits at most one step.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Debouncer:
    """Pending paths with their deadlines; the owner holds its lock around calls."""

    def __init__(self, fire: Callable[[], None]) -> None:
        self._fire = fire
        self._deadlines: dict[str, float] = {}
        self._timer: threading.Timer | None = None
        self._timer_at = 0.0

    def __contains__(self, path: object) -> bool:
        return path in self._deadlines

    def __len__(self) -> int:
        return len(self._deadlines)

    def schedule(self, path: str, delay_ms: int) -> None:
        """(Re)start ``path``'s wait: a new edit postpones its write."""
        deadline = time.monotonic() + delay_ms / 1000
        self._deadlines[path] = deadline
        self._arm(min(self._deadlines.values()))

    def discard(self, path: str) -> bool:
        return self._deadlines.pop(path, None) is not None

    def move(self, old: str, new: str) -> None:
        if old in self._deadlines:
            self._deadlines[new] = self._deadlines.pop(old)

    def paths(self) -> list[str]:
        return list(self._deadlines)

    def due(self) -> list[str]:
        now = time.monotonic()
        return [p for p, at in self._deadlines.items() if at <= now]

    def clear(self) -> None:
        self._deadlines.clear()
        self.cancel()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def fired(self) -> None:
        """Called by the owner first thing when the timer ran."""
        self._timer = None

    def rearm(self) -> None:
        """Arm the timer for the earliest deadline left, if any."""
        if self._deadlines:
            self._arm(min(self._deadlines.values()))

    def _arm(self, at: float) -> None:
        if self._timer is not None and self._timer_at <= at:
            return
        self.cancel()
        timer = threading.Timer(max(0.0, at - time.monotonic()), self._fire)
        timer.daemon = True
        timer.name = "sagents-filesystem-debounce"
        self._timer, self._timer_at = timer, at
        timer.start()
