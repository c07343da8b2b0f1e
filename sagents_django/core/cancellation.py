"""Cancellation: a token that stops a turn now, set from any thread.

Why an event and not a polled flag: a flag is only read when something happens (a
chunk arrives, a step ends), so a silent stream, a retry's backoff sleep or a long tool
keeps the turn running long after Stop was pressed. A ``CancelToken`` is set from
anywhere (the runtime's listener thread, another task, a signal handler) and the turn
reacts within one turn of its event loop: every wait of the turn runs inside
``token.scope()``, which cancels the waiting task when the token fires and reports it
as ``Cancelled`` where the scope ends. There the turn records what it had (partial
text, finished tool results) and stops.

Nothing is created per chunk or per wait: a scope is one list entry on the token, and
firing cancels, for each task, only its innermost open scope (so that the code closest
to the wait records what it had). Tasks that are cancelled this way are "uncancelled"
when their scope ends, as ``asyncio.timeout`` does, so a caller's own cancellation is
never swallowed.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from types import TracebackType

__all__ = ["CancelToken", "Cancelled"]


class Cancelled(Exception):
    """The token of a ``CancelToken.scope()`` fired while its block ran."""

    def __init__(self, reason: str | None = None) -> None:
        super().__init__(reason or "cancelled")
        self.reason = reason


class CancelToken:
    """Stops the turns it is passed to (``Agent.aexecute(..., cancel=token)``).

    ``cancel()`` may be called from any thread, any number of times; the first call
    wins and its ``reason`` is kept. A token is passed down to sub-agents, so one
    ``cancel()`` stops the whole tree. A token stays cancelled: use a new one per turn.
    """

    __slots__ = ("_cancelled", "_lock", "_reason", "_scopes", "_waiters")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._reason: str | None = None
        self._scopes: list[_Scope] = []
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    @property
    def cancelled(self) -> bool:
        """Whether ``cancel()`` was called."""
        return self._cancelled

    @property
    def reason(self) -> str | None:
        """The reason given to the first ``cancel()`` call."""
        return self._reason

    def cancel(self, reason: str | None = None) -> bool:
        """Cancel (thread-safe); True for the call that cancelled, False after."""
        with self._lock:
            if self._cancelled:
                return False
            self._reason = reason
            self._cancelled = True  # before the scopes are read (see _Scope)
            loops = {scope.loop for scope in list(self._scopes)}
            loops.update(loop for loop, _future in self._waiters)
        for loop in loops:
            _call_soon(loop, self._fire, loop)
        return True

    async def wait(self) -> None:
        """Return once the token is cancelled."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        entry = (loop, future)
        with self._lock:
            if self._cancelled:
                return
            self._waiters.append(entry)
        try:
            await future
        finally:
            with self._lock:
                self._waiters.remove(entry)

    def scope(self) -> _Scope:
        """``async with token.scope():`` runs a block that the token interrupts.

        When the token fires inside the block, the block's task is cancelled and the
        ``async with`` raises ``Cancelled`` (also at entry, when the token had already
        fired). A block that swallows the cancellation ends normally.
        """
        return _Scope(self)

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        """On ``loop``: cancel each task's innermost scope and wake the waiters."""
        scopes = [s for s in list(self._scopes) if s.loop is loop]
        with self._lock:
            waiters = [f for waiting, f in self._waiters if waiting is loop]
        innermost: dict[asyncio.Task[object], _Scope] = {}
        for scope in scopes:  # opened later = nested deeper in the same task
            innermost[scope.task] = scope
        for scope in innermost.values():
            scope.fire()
        for future in waiters:
            if not future.done():
                future.set_result(None)

    def __repr__(self) -> str:
        state = f"cancelled {self._reason!r}" if self._cancelled else "active"
        return f"<CancelToken {state}>"


class _Scope:
    """One block that a token interrupts (see ``CancelToken.scope``)."""

    __slots__ = ("active", "cancelling", "fired", "loop", "task", "token")

    def __init__(self, token: CancelToken) -> None:
        self.token = token
        self.active = False
        self.fired = False
        self.cancelling = 0

    async def __aenter__(self) -> _Scope:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("A cancel scope must run inside an asyncio task")
        self.task = task
        self.loop = task.get_loop()
        token = self.token
        # No lock: list appends are atomic, and cancel() sets the flag before it
        # reads the list, so either it sees this scope or this scope sees the flag.
        token._scopes.append(self)
        if token._cancelled:
            token._scopes.remove(self)
            raise Cancelled(token._reason)
        self.cancelling = task.cancelling()
        self.active = True
        return self

    def fire(self) -> None:
        # Runs as a loop callback, so the task is suspended at an await inside the
        # block (an open scope has not reached its __aexit__ yet).
        if self.active and not self.fired:
            self.fired = True
            self.task.cancel("cancelled by its CancelToken")

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        self.active = False
        token = self.token
        token._scopes.remove(self)
        if not self.fired:
            return False
        remaining = self.task.uncancel()
        if exc_type is None:
            return False
        if issubclass(exc_type, asyncio.CancelledError) and remaining > self.cancelling:
            return False  # someone else cancelled this task too: theirs goes on
        raise Cancelled(token._reason) from (
            None if issubclass(exc_type, asyncio.CancelledError) else exc
        )


def _call_soon(
    loop: asyncio.AbstractEventLoop, callback: Callable[..., object], *args: object
) -> None:
    # Always scheduled, even from the loop's own thread: the callback must run while
    # the interrupted task is suspended, never in the middle of its step.
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    try:
        if running is loop:
            loop.call_soon(callback, *args)
        else:
            loop.call_soon_threadsafe(callback, *args)
    except RuntimeError:
        pass  # the loop is closed: nothing there to interrupt
