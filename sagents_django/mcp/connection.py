"""One MCP server's session in this process: connect, list, call, reconnect.

Why an owner task per connection: the SDK's client is an async context manager
whose transport (a subprocess and its pipes, or an HTTP client) and task group must
be entered and left by one task. So each connection has a task that opens the
client, hands it over, watches the server's tool list, and closes it when told to
(or when the server goes away); calls are made from the turns' tasks on the same
loop, as the SDK allows.

Every wait is bounded: connecting by ``connect_timeout`` (a server that never
answers the handshake is stopped), a listing or a call by ``timeout`` (the call is
cancelled, and the SDK tells the server so), closing by ``CLOSE_SECONDS``. A server
that cannot be reached is tried again after a delay that doubles per failure (up to
a minute), so a down server costs a turn nothing but an error result. A call is
never retried by itself: it may have done its work before the connection broke.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from sagents_django import __version__

from .config import McpServer, host_of
from .guard import Guard
from .results import TEXT_BUDGET
from .status import ServerStatus

logger = logging.getLogger(__name__)

BACKOFF_FIRST = 1.0
BACKOFF_MAX = 60.0
CLOSE_SECONDS = 10.0
"""How long a closing connection gets to stop its server (the SDK's own stdio
shutdown takes at most about 6 s: stdin closed, SIGTERM, SIGKILL)."""
MAX_PAGES = 50
"""Pages of a tool listing read at most (a server paging forever stops here)."""
RELISTEN_SECONDS = 5.0
"""Pause before a lost tool-list subscription is opened again."""

Progress = Callable[[float, float | None, str | None], Awaitable[None]]


class McpUnavailable(Exception):
    """The server cannot be reached now (the message is for the model)."""


class McpCallFailed(Exception):
    """A call did not come back with a result (the message is for the model)."""


@dataclass(frozen=True, kw_only=True)
class Listing:
    """The tools a server listed, as the SDK parsed them (after the guard)."""

    tools: tuple[Any, ...]
    names: frozenset[str]
    at: float
    """``loop.time()`` when it was read."""


@dataclass(eq=False, kw_only=True)
class _Session:
    """One opening of the connection: its owner task and what it shares."""

    guard: Guard
    stop: asyncio.Event
    owner: asyncio.Task[None] | None = None
    client: Any = None
    released: bool = False
    """Closed on purpose (not lost)."""


class Connection:
    """One server's client in this process (used on the runtime loop only)."""

    def __init__(self, server: McpServer, hosts: frozenset[str]) -> None:
        self.server = server
        self.hosts = hosts
        target = host_of(server.url) if server.url else server.command[0]
        self.status = ServerStatus(
            name=server.name, transport=server.transport, target=target
        )
        self.listing: Listing | None = None
        self._stale = True
        self._session: _Session | None = None
        self._connect_lock = asyncio.Lock()
        self._list_lock = asyncio.Lock()
        self._failures = 0
        self._retry_at = 0.0
        self._reported: tuple[str, ...] = ()
        self._secrets = _secrets(server)
        self._stopping: set[asyncio.Future[None]] = set()

    # Connecting ------------------------------------------------------------------
    def alive(self) -> bool:
        session = self._session
        return (
            session is not None
            and session.client is not None
            and session.owner is not None
            and not session.owner.done()
            and not session.guard.closed
        )

    async def client(self) -> Any:
        """The connected SDK client; ``McpUnavailable`` when it cannot be had."""
        if self.alive():
            assert self._session is not None
            return self._session.client
        async with self._connect_lock:
            if self.alive():
                assert self._session is not None
                return self._session.client
            if time.monotonic() < self._retry_at:
                raise McpUnavailable(self._down())
            await self._release()
            self.status = replace(self.status, state="connecting")
            try:
                session = await self._open()
            except Exception as exc:
                self._failed(f"could not connect: {self.describe(exc)}")
                raise McpUnavailable(self._down()) from None
            self._session = session
            self._failures, self._retry_at = 0, 0.0
            self._stale = True  # whatever changed while it was away
            client = session.client
            self.status = replace(
                self.status,
                state="connected",
                protocol_version=client.protocol_version,
                connected_at=time.time(),
                retry_at=None,
            )
            logger.info(
                "MCP server %r connected (%s, protocol %s)",
                self.server.name,
                self.server.transport,
                client.protocol_version,
            )
            return client

    async def _open(self) -> _Session:
        ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        stop = asyncio.Event()
        guard = Guard(
            max_tools=self.server.max_tools,
            max_chars=TEXT_BUDGET,
            allowed=self.server.tools,
            on_closed=stop.set,
        )
        session = _Session(guard=guard, stop=stop)
        session.owner = asyncio.create_task(
            self._own(session, ready), name=f"sagents-mcp-{self.server.name}"
        )
        try:
            async with asyncio.timeout(self.server.connect_timeout):
                session.client = await ready
        except TimeoutError:
            self._stop_later(session)
            raise TimeoutError(
                f"no answer to the handshake within {self.server.connect_timeout:g} "
                "seconds"
            ) from None
        except BaseException:
            self._stop_later(session)
            raise
        return session

    def _stop_later(self, session: _Session) -> None:
        """Stop a session that never connected without making the caller wait
        (``close`` waits for these)."""
        task = asyncio.ensure_future(_stop(session))
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    async def _own(self, session: _Session, ready: asyncio.Future[Any]) -> None:
        from mcp import Client
        from mcp.types import Implementation

        from .transports import open_transport

        try:
            async with Client(
                session.guard.wrap(open_transport(self.server, self.hosts)),
                mode="auto",
                read_timeout_seconds=self.server.timeout,
                message_handler=self._on_message,
                client_info=Implementation(name="sagents-django", version=__version__),
                cache=None,  # the listing is kept here, refreshed on change
            ) as client:
                if ready.done():  # the caller stopped waiting
                    return
                ready.set_result(client)
                await self._serve(client, session.stop)
            why = "the server closed the connection"
        except Exception as exc:
            if not ready.done():
                ready.set_exception(_leaf(exc))
                return
            why = f"the connection failed: {self.describe(exc)}"
        if not session.released and self._session is session:
            self._session = None
            self._lost(why)

    async def _serve(self, client: Any, stop: asyncio.Event) -> None:
        """Keep the client open, watching the tool list, until told to stop."""
        from mcp.types.version import MODERN_PROTOCOL_VERSIONS

        tools = client.server_capabilities.tools
        watcher = None
        if (
            client.protocol_version in MODERN_PROTOCOL_VERSIONS
            and tools is not None
            and tools.list_changed
        ):
            watcher = asyncio.create_task(self._listen(client))
        try:
            await stop.wait()
        finally:
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(BaseException):
                    await watcher

    async def _listen(self, client: Any) -> None:
        """A 2026-era server announces tool-list changes on a subscription."""
        from mcp.client.subscriptions import ListenNotSupportedError

        while True:
            try:
                async with client.listen(tools_list_changed=True) as subscription:
                    async for _event in subscription:
                        self._stale = True
            except ListenNotSupportedError:
                return
            except Exception as exc:
                logger.info(
                    "MCP server %r: tool-list subscription lost (%s); its list is "
                    "read again on the next use",
                    self.server.name,
                    self.describe(exc),
                )
            self._stale = True
            await asyncio.sleep(RELISTEN_SECONDS)

    async def _on_message(self, message: Any) -> None:
        # A handshake-era server announces tool-list changes as a notification.
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            self._stale = True

    async def _release(self) -> None:
        """Close the current session, if any (bounded)."""
        session, self._session = self._session, None
        if session is not None:
            await _stop(session)

    async def close(self) -> None:
        self.status = replace(self.status, state="closed")
        await self._release()
        if self._stopping:
            await asyncio.wait(self._stopping, timeout=CLOSE_SECONDS * 2)

    # Listing ---------------------------------------------------------------------
    def fresh(self) -> bool:
        listing = self.listing
        return (
            listing is not None
            and not self._stale
            and asyncio.get_running_loop().time() - listing.at < self.server.list_ttl
        )

    async def tools(self) -> Listing:
        """The server's tools, read again when stale; ``McpUnavailable`` when it
        cannot be read."""
        if self.fresh():
            assert self.listing is not None
            return self.listing
        async with self._list_lock:
            if self.fresh():
                assert self.listing is not None
                return self.listing
            client = await self.client()
            self._stale = False  # a change announced while reading marks it again
            try:
                async with asyncio.timeout(self.server.timeout):
                    tools = await self._read_tools(client)
            except Exception as exc:
                self._stale = True
                why = (
                    f"its tool list did not come within {self.server.timeout:g} seconds"
                    if isinstance(exc, TimeoutError)
                    else f"its tool list could not be read: {self.describe(exc)}"
                )
                self._failed(why)
                await self._release()
                raise McpUnavailable(self._down()) from None
            self.listing = Listing(
                tools=tuple(tools),
                names=frozenset(t.name for t in tools),
                at=asyncio.get_running_loop().time(),
            )
            self._listed()
            return self.listing

    async def _read_tools(self, client: Any) -> list[Any]:
        assert self._session is not None
        guard = self._session.guard
        guard.begin_listing()
        found: list[Any] = []
        cursor = None
        for _ in range(MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            found.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None or len(found) >= self.server.max_tools:
                break
        return found[: self.server.max_tools]

    def _listed(self) -> None:
        assert self._session is not None and self.listing is not None
        guard = self._session.guard
        reasons = tuple(guard.rejected)
        if guard.left_out:
            reasons += (
                f"{guard.left_out} more tools beyond max_tools "
                f"({self.server.max_tools}) were left out",
            )
        self.status = replace(
            self.status,
            tools=len(self.listing.tools),
            left_out=reasons,
            left_out_count=guard.rejected_count + guard.left_out,
            listed_at=time.time(),
            malformed_messages=guard.malformed,
        )
        if reasons and reasons != self._reported:
            logger.warning(
                "MCP server %r: %d tools left out: %s",
                self.server.name,
                guard.rejected_count + guard.left_out,
                "; ".join(reasons),
            )
        self._reported = reasons

    def note_left_out(self, problems: tuple[str, ...]) -> None:
        """Tools of the listing that could not be made into the agent's tools."""
        self.status = replace(
            self.status,
            tools=max(self.status.tools - len(problems), 0),
            left_out=self.status.left_out + problems,
            left_out_count=self.status.left_out_count + len(problems),
        )

    # Calling ---------------------------------------------------------------------
    async def call(
        self, name: str, arguments: dict[str, Any], *, progress: Progress | None
    ) -> Any:
        """Call the server's tool ``name``; its ``CallToolResult``. The error
        results of tools are results; what is not a result raises
        ``McpUnavailable``, ``ToolGone`` or ``McpCallFailed``."""
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED

        listing = await self.tools()
        if name not in listing.names:
            raise ToolGone(name)
        client = await self.client()
        guard = self._session.guard if self._session is not None else None
        malformed = guard.malformed if guard is not None else 0
        try:
            async with asyncio.timeout(self.server.timeout):
                return await client.call_tool(
                    name, arguments, progress_callback=progress
                )
        except TimeoutError:
            why = f"no result within {self.server.timeout:g} seconds (the call was cancelled)"
            raise McpCallFailed(why + _meanwhile(guard, malformed)) from None
        except MCPError as exc:
            why = self.scrub(str(exc)) + _meanwhile(guard, malformed)
            if exc.code == CONNECTION_CLOSED:
                await self._broken(f"the connection broke: {why}")
            raise McpCallFailed(why) from None
        except Exception as exc:
            why = self.describe(exc) + _meanwhile(guard, malformed)
            if not self.alive():
                await self._broken(f"the connection broke: {why}")
            raise McpCallFailed(why) from None

    async def _broken(self, why: str) -> None:
        self._lost(why)
        await self._release()

    # Reporting -------------------------------------------------------------------
    def _failed(self, why: str) -> None:
        self._failures += 1
        delay = min(BACKOFF_FIRST * 2 ** (self._failures - 1), BACKOFF_MAX)
        self._retry_at = time.monotonic() + delay
        self.status = self.status.with_error(why, retry_at=time.time() + delay)
        logger.warning(
            "MCP server %r is unavailable: %s (next try in %gs)",
            self.server.name,
            why,
            delay,
        )

    def _lost(self, why: str) -> None:
        self._stale = True  # read the list again from the next connection
        if self.status.state == "closed":
            return
        self.status = self.status.with_error(why, retry_at=None)
        logger.warning("MCP server %r: %s", self.server.name, why)

    def _down(self) -> str:
        return (
            f"MCP server {self.server.name!r} is unavailable "
            f"({self.status.last_error or 'not connected'}); try again later"
        )

    def describe(self, exc: BaseException) -> str:
        leaf = _leaf(exc)
        text = str(leaf) or type(leaf).__name__
        return self.scrub(f"{type(leaf).__name__}: {text}"[:500])

    def scrub(self, text: str) -> str:
        """``text`` without any header value, environment value or the URL."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


async def _stop(session: _Session) -> None:
    """Tell the owner task to leave the client, wait for it (bounded), then
    cancel it if it has not."""
    session.released = True
    session.stop.set()
    owner = session.owner
    if owner is None or owner.done():
        return
    if session.client is None:  # still in the handshake: nothing to finish
        owner.cancel()
    done, _ = await asyncio.wait([owner], timeout=CLOSE_SECONDS)
    if not done:
        owner.cancel()
        await asyncio.wait([owner], timeout=CLOSE_SECONDS)


class ToolGone(Exception):
    """The server no longer lists the tool the model called."""


def _secrets(server: McpServer) -> tuple[str, ...]:
    """What ``scrub`` takes out: header and environment values (and the credential
    word of one such as "Bearer <token>"), and the URL; longest first."""
    values = [*server.headers.values(), *server.env.values(), server.url or ""]
    words = [word for value in values for word in value.split() if len(word) >= 8]
    found = {s for s in (*values, *words) if len(s) >= 4}
    return tuple(sorted(found, key=len, reverse=True))


def _meanwhile(guard: Guard | None, before: int) -> str:
    """What the server sent that was not a message, while the call waited."""
    if guard is None or guard.malformed <= before:
        return ""
    return (
        f"; meanwhile it sent a message that is not JSON-RPC ({guard.last_malformed})"
    )


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (anyio raises groups of them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
