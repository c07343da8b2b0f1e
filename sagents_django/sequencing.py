"""Putting a conversation's frames back in ``seq`` order before a socket sends them.

Why the socket does it: two processes publish for one conversation (the web process
saves the person's message, a worker runs the turn). Each takes its number, then
sends, so their messages can cross on the way: ``bench/load.py`` saw 17 of 12,472
frames out of order, late by milliseconds. A client that treats every gap as a loss
would resync for nothing. So each socket holds a frame that comes before the one it
expects for a short while (``WAIT_SECONDS``); the missing frames normally arrive
within it and everything goes out in order. If they do not, they are lost (a full
channel drops messages): the held frames go out and the gap stands, which is what
the client's resync rule is for. A frame that turns up after its place was given
up (or that a resync already covered) is dropped: delivering it would break the
order, and the resync the gap caused reads what it did from the database.

Pure bookkeeping, no I/O: the consumer owns the timer (``due``) and the sending.
"""

from __future__ import annotations

import time
from typing import Any, Final, Generic, TypeVar

T = TypeVar("T")

WAIT_SECONDS: Final = 0.5
"""How long a frame ahead of the next expected number waits for the missing ones.
Frames of two publishers cross by milliseconds (26 ms at the median, 405 ms at most
in a load run that saturated the machine); a real loss delays the frames after it
by this much, so it is kept short: a frame later still counts as lost (the client
resyncs, which is always correct)."""
MAX_HELD: Final = 1000
"""Frames held at most per conversation; beyond, they go out at once (a gap)."""
LATE_SECONDS: Final = 60.0
"""A number at or below the last one delivered, this soon after it, is a late or
repeated frame (dropped). Later, it is the counter starting again (it expires after
a week of silence, ``layer.SEQ_TTL``): counting restarts from it."""


class Sequencer(Generic[T]):
    """One conversation's frames on one socket, released in ``seq`` order."""

    def __init__(self, *, wait: float = WAIT_SECONDS, based: bool = True) -> None:
        self.wait = wait
        self.based = based
        """False: nothing goes out before a ``rebase`` says where counting starts
        (a page that has not yet read what it missed would draw a delta without the
        text before it); frames wait for it, at most ``wait``, then a ``release``
        gives them up as a gap (the client resyncs)."""
        self.last: int | None = None
        """The last number delivered (or covered by a resync); None: none yet."""
        self.held: dict[int, T] = {}
        self.since: float | None = None
        """When the oldest frame now held started waiting."""
        self.last_at = 0.0

    def rebase(self, seq: int) -> list[T]:
        """A resync covered every event up to ``seq``: count from there. Returns the
        held frames now in order (to send after the resync's own frame)."""
        self.last = seq
        self.based = True
        self.last_at = time.monotonic()
        self.held = {n: item for n, item in self.held.items() if n > seq}
        return self._drain()

    def push(self, seq: Any, item: T) -> list[T]:
        """The frames to send now that ``item`` (numbered ``seq``) arrived."""
        if isinstance(seq, bool) or not isinstance(seq, int):
            return [item]  # not a numbered event: nothing to order
        now = time.monotonic()
        if not self.based:
            self.held[seq] = item
            if self.since is None:
                self.since = now
            return self.release() if len(self.held) > MAX_HELD else []
        if self.last is None:
            self.last, self.last_at = seq, now
            return [item]
        if seq <= self.last:
            if now - self.last_at < LATE_SECONDS:
                return []
            self.held.clear()
            self.since = None
            self.last, self.last_at = seq, now
            return [item]
        self.held[seq] = item
        if self.since is None:
            self.since = now
        ready = self._drain()
        if len(self.held) > MAX_HELD:
            ready += self.release()
        return ready

    def due(self) -> float | None:
        """Seconds until the held frames stop waiting (None: nothing is held)."""
        if self.since is None:
            return None
        return max(0.0, self.since + self.wait - time.monotonic())

    def release(self) -> list[T]:
        """Give up waiting: every held frame, in order; the gaps before them stand."""
        items = [self.held[n] for n in sorted(self.held)]
        self.based = True
        if self.held:
            self.last = max(self.held)
            self.last_at = time.monotonic()
        self.held.clear()
        self.since = None
        return items

    def _drain(self) -> list[T]:
        ready: list[T] = []
        assert self.last is not None
        while self.last + 1 in self.held:
            self.last += 1
            ready.append(self.held.pop(self.last))
        if ready:
            self.last_at = time.monotonic()
            # What is still held waits afresh: its predecessors were on time.
            self.since = time.monotonic() if self.held else None
        elif not self.held:
            self.since = None
        return ready
