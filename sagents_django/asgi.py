"""Draining on SIGTERM: ASGI middleware around the site's application.

Why it is built this way: the ASGI server installs its own SIGTERM handler when it
starts, after the application is imported, and on SIGTERM stops without waiting
for a load balancer: daphne (Twisted) cuts open sockets and refuses what is still
sent; uvicorn shuts down gracefully but closes the sockets with 1012 at once.
daphne sends no ASGI lifespan events to hook either. So the handler is chained:
on the first call of the application (on the server's main thread, after the
server set its own handlers), ``DrainOnSigterm`` puts its handler in front of the
server's. Under daphne that is the first request the process serves; under
uvicorn, the ASGI ``lifespan`` call at startup (the Channels router then refuses
lifespan, which uvicorn logs and goes past, unless ``--lifespan on`` makes it
fatal). On SIGTERM it

1. starts draining (``runtime.draining``): readiness answers 503 at once, and
   whatever else listens for the drain is told;
2. keeps serving for ``SAGENTS["DRAIN_SECONDS"]``, so the load balancer sees the
   failing readiness and sends new requests and sockets elsewhere;
3. closes every WebSocket with ``protocol.CLOSE_DRAINING`` (4503), on which the
   chat pages and the protocol's clients reconnect (to another process) and resync
   from the database; a socket that opens from then on is closed the same way;
4. answers any HTTP request that arrives from then on with 503 itself (Django is
   not entered) and waits up to ``CLOSE_GRACE`` for the requests already in
   Django and for the sockets' disconnect handlers (viewers are released, not
   left to expire): a request the server would kill at stop leaves Django's
   disconnect listener failing with a traceback in the log; stores the file
   writes still waiting on a
   debounce (``core.filesystem.flush_pending_writes``), then hands the signal to
   the server's own handler, which stops the process as it would have.

A second SIGTERM goes to the server's handler at once. Only public interfaces are
used: ``signal``, the event loop and ASGI messages: daphne and uvicorn are both
tested (``tests/web/test_draining.py``), and another server that runs the
application on its main thread should drain the same way. A daphne that served
no request has nothing to drain: its handler stays alone.
Importing this module loads nothing of Django: it may come before
``get_asgi_application()``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from types import FrameType
from typing import Any, Final

logger = logging.getLogger(__name__)

Message = MutableMapping[str, Any]
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Application = Callable[[Scope, Receive, Send], Awaitable[None]]

CLOSE_GRACE: Final = 2.0
"""Seconds the closed sockets' disconnect handlers get before the process stops."""


class DrainOnSigterm:
    """Wrap the ASGI application: ``application = DrainOnSigterm(router)``."""

    def __init__(self, application: Application) -> None:
        self.application = application

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        _install()
        if scope["type"] == "http":
            await self._serve_http(scope, receive, send)
            return
        if scope["type"] != "websocket":
            await self.application(scope, receive, send)
            return
        socket = _Socket(send)
        socket.closing = _closing
        _sockets.add(socket)
        try:
            await self.application(scope, receive, socket.send)
        finally:
            _sockets.discard(socket)

    async def _serve_http(self, scope: Scope, receive: Receive, send: Send) -> None:
        global _requests
        if _closing:
            await _unavailable(send)
            return
        _requests += 1
        try:
            await self.application(scope, receive, send)
        finally:
            _requests -= 1


async def _unavailable(send: Send) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 503,
            "headers": [(b"content-type", b"text/plain"), (b"connection", b"close")],
        }
    )
    await send({"type": "http.response.body", "body": b"Draining\n"})


class _Socket:
    """One WebSocket's ``send``, which the drain can close."""

    __slots__ = ("_send", "accepted", "closed", "closing")

    def __init__(self, send: Send) -> None:
        self._send = send
        self.accepted = False
        self.closed = False
        self.closing = False
        """Close as soon as it is accepted."""

    async def send(self, message: Message) -> None:
        if self.closed:
            return  # the drain closed it: later frames have nowhere to go
        kind = message.get("type")
        if kind == "websocket.close":
            self.closed = True
        await self._send(message)
        if kind == "websocket.accept":
            self.accepted = True
            if self.closing:
                await self.close()

    async def close(self) -> None:
        from sagents_django.protocol import CLOSE_DRAINING

        self.closing = True
        if self.accepted and not self.closed:
            self.closed = True
            await self._send({"type": "websocket.close", "code": CLOSE_DRAINING})


_sockets: set[_Socket] = set()
_requests = 0
"""HTTP requests inside the application now."""
_closing = False
_installed_in: int | None = None
"""The process whose SIGTERM handler is installed (a forked child installs its own)."""
_signalled = False
_tasks: set[asyncio.Task[None]] = set()

Handler = Callable[[int, FrameType | None], Any] | int | None


def _install() -> None:
    global _installed_in
    if _installed_in == os.getpid():
        return
    _installed_in = os.getpid()
    if threading.current_thread() is not threading.main_thread():
        # Signal handlers belong to the main thread: a server running the
        # application elsewhere (runserver's autoreloader) keeps its own.
        return
    loop = asyncio.get_running_loop()
    previous: Handler = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        global _signalled
        if _signalled:  # a second SIGTERM: stop now
            loop.call_soon_threadsafe(_cancel_drain)
            _hand_over(previous, signum, frame)
            return
        _signalled = True
        # Everything else happens on the loop, not inside the signal handler.
        loop.call_soon_threadsafe(_begin, previous, signum)

    signal.signal(signal.SIGTERM, on_sigterm)


def _begin(previous: Handler, signum: int) -> None:
    from sagents_django.runtime import draining

    try:
        draining.start()
    except Exception:
        logger.exception("A drain listener failed")
    task = asyncio.ensure_future(_drain(previous, signum))
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


async def _drain(previous: Handler, signum: int) -> None:
    global _closing
    loop = asyncio.get_running_loop()
    try:
        await asyncio.sleep(_drain_seconds())
        _closing = True
        sockets = list(_sockets)
        logger.info("Draining: closing %d sockets", len(sockets))
        results = await asyncio.gather(
            *(s.close() for s in sockets), return_exceptions=True
        )
        for failed in [r for r in results if isinstance(r, BaseException)]:
            logger.warning("A socket could not be closed", exc_info=failed)
        deadline = loop.time() + CLOSE_GRACE
        while (_sockets or _requests) and loop.time() < deadline:
            await asyncio.sleep(0.05)
    except Exception:  # the process must stop all the same
        logger.exception("The drain failed")
    await _store_pending_files()
    # Cancelled (a second SIGTERM handed over already): nothing more to do.
    _hand_over(previous, signum, None)


async def _store_pending_files() -> None:
    """Debounced file writes of this process reach storage before it stops."""
    from sagents_django.core.filesystem.debounce import flush_pending_writes

    try:
        await asyncio.to_thread(flush_pending_writes)
    except Exception:  # the process must stop all the same
        logger.exception("Storing pending file writes failed")


def _cancel_drain() -> None:
    for task in list(_tasks):
        task.cancel()


def _drain_seconds() -> float:
    from sagents_django.conf import DEFAULTS, sagents_settings

    try:
        return sagents_settings.DRAIN_SECONDS
    except Exception:  # a bad setting must not keep the process from stopping
        logger.exception("SAGENTS['DRAIN_SECONDS'] is not usable")
        return float(DEFAULTS["DRAIN_SECONDS"])


def _hand_over(previous: Handler, signum: int, frame: FrameType | None) -> None:
    """What SIGTERM did before us: the server's handler, or the default (end the
    process); an ignored SIGTERM stays ignored."""
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def reset_for_tests() -> None:
    """Forget a drain and the sockets (an installed handler stays)."""
    global _closing, _signalled, _requests
    _closing = _signalled = False
    _requests = 0
    _sockets.clear()
