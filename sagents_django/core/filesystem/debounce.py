"""Debounced writes: a deadline per dirty path and one timer thread per filesystem.

Only configs with ``debounce_ms`` use this (the default is write-through). Sagents
keeps a timer per file in its GenServer and flushes every pending write when the
server terminates; with no resident process we keep deadlines and a single daemon
timer that fires at the earliest one, the FileSystem middleware flushes around every
model call and the runtime at every turn's end, so a dirty file waits at most one
step. What is still pending when the process stops is stored by ``flush_pending_writes``:
a Celery worker's shutdown, the runtime loop's exit and a drained web process call
it, and so does an exit hook installed with the first debounced write (a daemon
timer dies with the interpreter, and its write with it).
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections.abc import Callable

logger = logging.getLogger(__name__)

_live: weakref.WeakSet[Debouncer] = weakref.WeakSet()
"""Debouncers of this process (a pending timer keeps its filesystem alive)."""
_exit_hook = False
_hook_lock = threading.Lock()


def has_pending_writes() -> bool:
    """Whether any filesystem of this process holds a debounced write (lock-free)."""
    return any(len(debouncer) for debouncer in list(_live))


def flush_pending_writes() -> int:
    """Store every debounced write this process holds, in every filesystem; how many
    were stored. A failing one is logged (and stays pending), never raised: this
    runs while a process stops."""
    stored = 0
    for debouncer in list(_live):
        if not len(debouncer):
            continue
        try:
            stored += debouncer.flush()
        except Exception:
            logger.exception("Could not flush pending file writes")
    return stored


def _install_exit_hook() -> None:
    global _exit_hook
    with _hook_lock:
        if not _exit_hook:
            _exit_hook = True
            atexit.register(flush_pending_writes)


class Debouncer:
    """Pending paths with their deadlines; the owner holds its lock around calls."""

    def __init__(
        self, fire: Callable[[], None], flush: Callable[[], int] | None = None
    ) -> None:
        self._fire = fire
        self.flush: Callable[[], int] = flush or (lambda: 0)
        """The owner's ``flush_all`` (for ``flush_pending_writes``)."""
        self._deadlines: dict[str, float] = {}
        self._timer: threading.Timer | None = None
        self._timer_at = 0.0
        _live.add(self)

    def __contains__(self, path: object) -> bool:
        return path in self._deadlines

    def __len__(self) -> int:
        return len(self._deadlines)

    def schedule(self, path: str, delay_ms: int) -> None:
        """(Re)start ``path``'s wait: a new edit postpones its write."""
        deadline = time.monotonic() + delay_ms / 1000
        if not _exit_hook:
            _install_exit_hook()
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
