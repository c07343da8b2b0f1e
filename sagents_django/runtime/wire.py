"""A lean Redis connection for the frames a turn publishes: one per loop and URL.

Why not redis-py's: every event a turn publishes is one Redis call (the stamping
script of ``inflight.stamp``), and redis-py's generic command path (argument
encoding, the connection pool, the retry wrapper, a timer per command for its socket
timeout, the RESP parser's stream reads) cost about as much CPU as the rest of the
frame's publishing (``bench/stream_latency.py``). Here a command is packed once
into bytes, written on a connection this loop owns, and its reply is parsed from
the bytes the socket delivered; commands written in the same loop tick leave in
one write. Replies come back in the order the commands were written, each to its
caller.

What it does not do, on purpose: retry. A command whose connection broke may or
may not have run, and running a ``PUBLISH`` twice would show a frame twice; so it
fails, and its caller counts it as lost (``layer.numbering``: the client sees a gap).
The next command connects again. A Redis that stops answering fails the commands
waiting on it after ``TIMEOUT`` seconds (redis-py's default socket timeout), checked
by one timer per connection, not one per command.

Only plain TCP URLs (``redis://[[user]:password@]host[:port][/db]``) are spoken
here; for any other (TLS, a Unix socket) ``writer`` returns None and the caller
uses redis-py.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import weakref
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote, urlparse

TIMEOUT = 5.0
"""Seconds a command waits for its reply (and a connection to open)."""

Arg = bytes | str | int


class ReplyError(Exception):
    """Redis answered a command with an error."""


def pack(*args: Arg) -> bytes:
    """One command in RESP, ready to write."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, str):
            arg = arg.encode()
        elif isinstance(arg, int):
            arg = b"%d" % arg
        parts += (b"$%d\r\n" % len(arg), arg, b"\r\n")
    return b"".join(parts)


class _Protocol(asyncio.Protocol):
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.waiting: collections.deque[tuple[asyncio.Future[Any], float]] = (
            collections.deque()
        )
        self.buffer = b""
        self.outgoing: list[bytes] = []
        self.lost: BaseException | None = None
        self._watchdog: asyncio.TimerHandle | None = None

    # asyncio.Protocol ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: BaseException | None) -> None:
        self.fail(exc or ConnectionError("Redis closed the connection"))

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer + data if self.buffer else data
        at, end = 0, len(buffer)
        waiting = self.waiting
        while at < end:
            line_end = buffer.find(b"\r\n", at)
            if line_end < 0:
                break
            kind = buffer[at : at + 1]
            if kind == b"$":
                size = int(buffer[at + 1 : line_end])
                if size < 0:
                    reply: Any = None
                    at = line_end + 2
                else:
                    if line_end + 2 + size + 2 > end:
                        break
                    reply = buffer[line_end + 2 : line_end + 2 + size]
                    at = line_end + 2 + size + 2
            else:
                text = buffer[at + 1 : line_end]
                at = line_end + 2
                if kind == b":":
                    reply = int(text)
                elif kind == b"+":
                    reply = text
                elif kind == b"-":
                    reply = ReplyError(text.decode(errors="replace"))
                else:  # nothing sent here is answered with an array or RESP3
                    self.fail(ConnectionError(f"Unexpected Redis reply {kind!r}"))
                    return
            if not waiting:
                self.fail(ConnectionError("A Redis reply nobody waited for"))
                return
            future, _sent = waiting.popleft()
            if not future.done():
                if isinstance(reply, ReplyError):
                    future.set_exception(reply)
                else:
                    future.set_result(reply)
        self.buffer = buffer[at:]

    # Writing ----------------------------------------------------------------------
    def send(self, commands: Sequence[bytes]) -> list[asyncio.Future[Any]]:
        """Queue ``commands`` for this tick's write; a future per reply."""
        if self.lost is not None:
            raise ConnectionError("The Redis connection is closed") from self.lost
        now = self.loop.time()
        futures = [self.loop.create_future() for _ in commands]
        self.waiting.extend((future, now) for future in futures)
        if not self.outgoing:
            self.loop.call_soon(self._flush)
        self.outgoing += commands
        if self._watchdog is None:
            self._watchdog = self.loop.call_at(now + TIMEOUT, self._check)
        return futures

    def _flush(self) -> None:
        outgoing, self.outgoing = self.outgoing, []
        if outgoing and self.transport is not None and self.lost is None:
            self.transport.write(b"".join(outgoing))

    def _check(self) -> None:
        self._watchdog = None
        if not self.waiting:
            return
        oldest = self.waiting[0][1]
        if self.loop.time() - oldest >= TIMEOUT:
            self.fail(TimeoutError("Redis did not answer in time"))
        else:
            self._watchdog = self.loop.call_at(oldest + TIMEOUT, self._check)

    def fail(self, exc: BaseException) -> None:
        if self.lost is None:
            self.lost = exc
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        while self.waiting:
            future, _sent = self.waiting.popleft()
            if not future.done():
                future.set_exception(ConnectionError(str(exc)))
        self.outgoing = []
        if self.transport is not None:
            self.transport.abort()


class Writer:
    """Commands to one Redis from one loop, pipelined on one connection."""

    def __init__(self, host: str, port: int, setup: list[bytes]) -> None:
        self.host, self.port, self.setup = host, port, setup
        self._protocol: _Protocol | None = None
        self._connecting: asyncio.Future[_Protocol] | None = None
        self._shas: dict[str, bytes] = {}

    async def execute(self, *commands: bytes) -> list[Any]:
        """The replies to ``commands`` (packed), sent in one write. A reply that is
        an error raises ``ReplyError``; a connection that breaks, ``ConnectionError``
        (the commands may or may not have run)."""
        protocol = self._protocol
        if protocol is None or protocol.lost is not None:
            protocol = await self._connect()
        futures = protocol.send(commands)
        if len(futures) == 1:
            return [await futures[0]]
        return list(await asyncio.gather(*futures))

    async def evalsha(
        self, script: str, keys: Sequence[Arg], args: Sequence[Arg]
    ) -> Any:
        """Run ``script`` by its hash; loaded first when Redis does not have it."""
        sha = self._shas.get(script)
        if sha is None:
            sha = self._shas[script] = (
                hashlib.sha1(script.encode()).hexdigest().encode()
            )
        try:
            [reply] = await self.execute(pack(b"EVALSHA", sha, len(keys), *keys, *args))
        except ReplyError as exc:
            if not str(exc).startswith("NOSCRIPT"):
                raise
            [reply] = await self.execute(pack(b"EVAL", script, len(keys), *keys, *args))
        return reply

    async def _connect(self) -> _Protocol:
        if self._connecting is None or self._connecting.done():
            self._connecting = asyncio.ensure_future(self._open())
            # Read by whoever awaits it; marked read for a caller that gave up.
            self._connecting.add_done_callback(
                lambda done: done.cancelled() or done.exception()
            )
        # Shielded: one caller giving up does not abort the others' connection.
        return await asyncio.shield(self._connecting)

    async def _open(self) -> _Protocol:
        loop = asyncio.get_running_loop()
        _transport, protocol = await asyncio.wait_for(
            loop.create_connection(lambda: _Protocol(loop), self.host, self.port),
            TIMEOUT,
        )
        if self.setup:  # AUTH, SELECT: their replies are checked before any use
            try:
                for future in protocol.send(self.setup):
                    await asyncio.wait_for(future, TIMEOUT)
            except BaseException:
                protocol.fail(ConnectionError("Redis refused the connection's setup"))
                raise
        self._protocol = protocol
        return protocol

    def close(self) -> None:
        if self._protocol is not None:
            self._protocol.fail(ConnectionError("closed"))
            if self._protocol.transport is not None:
                self._protocol.transport.close()
            self._protocol = None


_writers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Writer | None]]
_writers = weakref.WeakKeyDictionary()


def writer(url: str) -> Writer | None:
    """This loop's writer for ``url`` (None: a URL spoken through redis-py)."""
    loop = asyncio.get_running_loop()
    by_url = _writers.get(loop)
    if by_url is None:
        by_url = _writers[loop] = {}
    try:
        return by_url[url]
    except KeyError:
        made = by_url[url] = _make(url)
        return made


def close_this_loops() -> None:
    """Close the running loop's connections (a loop about to close)."""
    for made in (_writers.pop(asyncio.get_running_loop(), None) or {}).values():
        if made is not None:
            made.close()


def _make(url: str) -> Writer | None:
    parsed = urlparse(url)
    if parsed.scheme != "redis" or parsed.query or not parsed.hostname:
        return None
    setup: list[bytes] = []
    if parsed.password is not None:
        auth: list[Arg] = [b"AUTH"]
        if parsed.username:
            auth.append(unquote(parsed.username))
        setup.append(pack(*auth, unquote(parsed.password)))
    db = unquote(parsed.path or "").strip("/")
    if db:
        if not db.isdigit():
            return None
        if int(db):
            setup.append(pack(b"SELECT", int(db)))
    return Writer(unquote(parsed.hostname), parsed.port or 6379, setup)
