"""This process's MCP connections, and the calls the agents' tools make through them.

Why on the runtime loop: a process runs all its turns on one loop
(``runtime.loop``), and a session with a server belongs to the loop it was opened
on. So every connection lives there, one per configured server, and code running
elsewhere (a factory in a database thread, an agent run on another loop in a
script) hands its work over and waits for it: a tool call waits on a future that,
when the waiting task is cancelled (Stop, a time budget), cancels the call on the
runtime loop, and the SDK tells the server.

The connections are bounded by the configured servers: one each, replaced when the
server's settings change, closed when it leaves them. The database's servers
(``stored``) are bounded by number: past ``MAX_STORED_CONNECTIONS``, the least
recently offered is closed. A forked child starts with none (a parent's pipes are
not its own).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Coroutine, Iterable
from typing import Any, TypeVar

from sagents_django.core import events, tracing
from sagents_django.core.messages import ToolResult
from sagents_django.core.tools import ToolContext

from .config import McpServer
from .connection import Connection, Listing, McpCallFailed, McpUnavailable, ToolGone
from .results import result_text
from .status import ServerStatus
from .stored import is_stored
from .tools import McpTool, build_tools

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

MAX_STORED_CONNECTIONS = 64
"""Connections to database servers one process keeps open at most."""
PROGRESS_INTERVAL = 0.25
"""Seconds between two progress events of one call (a server may send many)."""


class Registry:
    """The connections of this process (used on the runtime loop only)."""

    def __init__(self) -> None:
        self.connections: dict[str, Connection] = {}
        self._tools: dict[str, tuple[Listing, tuple[McpTool, ...]]] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._stored: dict[str, tuple[McpServer, frozenset[str]]] = {}
        """The database servers offered, least recently first (to reopen a
        closed connection, and to bound them)."""

    def connection(self, server: McpServer, hosts: frozenset[str]) -> Connection:
        found = self.connections.get(server.name)
        if found is not None and found.server == server and found.hosts == hosts:
            return found
        if found is not None:
            self._retire(found)
        made = self.connections[server.name] = Connection(server, hosts)
        return made

    def configured(self, names: Iterable[str]) -> None:
        """Close the connections of servers no longer in the settings."""
        keep = set(names)
        for name in [n for n in self.connections if n not in keep and not is_stored(n)]:
            self._retire(self.connections.pop(name))

    def _used(self, server: McpServer, hosts: frozenset[str]) -> None:
        """Note a database server's offer; close the least recently offered
        beyond ``MAX_STORED_CONNECTIONS``."""
        self._stored.pop(server.name, None)
        self._stored[server.name] = (server, hosts)
        while len(self._stored) > MAX_STORED_CONNECTIONS:
            oldest = next(iter(self._stored))
            del self._stored[oldest]
            found = self.connections.pop(oldest, None)
            if found is not None:
                self._retire(found)

    def _retire(self, connection: Connection) -> None:
        self._tools.pop(connection.server.name, None)
        task = asyncio.create_task(connection.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    # Offering --------------------------------------------------------------------
    async def offer(
        self, servers: list[McpServer], hosts: frozenset[str]
    ) -> list[McpTool]:
        """The tools of ``servers``: each server's current list, its last one while
        it cannot be reached, none when it never could (logged, in its status)."""
        found = await asyncio.gather(*(self._offer(s, hosts) for s in servers))
        return [tool for tools in found for tool in tools]

    def offered(self, servers: list[McpServer]) -> list[McpTool]:
        """The tools last listed by ``servers``, without waiting for anything."""
        return [
            tool
            for server in servers
            if server.name in self._tools
            for tool in self._tools[server.name][1]
        ]

    async def _offer(
        self, server: McpServer, hosts: frozenset[str]
    ) -> tuple[McpTool, ...]:
        if is_stored(server.name):
            self._used(server, hosts)
        connection = self.connection(server, hosts)
        listing: Listing | None
        try:
            listing = await connection.tools()
        except McpUnavailable:
            listing = connection.listing  # its last list: calls answer the error
        if listing is None:
            return ()
        cached = self._tools.get(server.name)
        if cached is not None and cached[0] is listing:
            return cached[1]
        tools, problems = build_tools(server, listing.tools, tool_function)
        if problems:
            logger.warning(
                "MCP server %r: tools left out: %s", server.name, "; ".join(problems)
            )
            connection.note_left_out(problems)
        self._tools[server.name] = (listing, tools)
        return tools

    # Calling ---------------------------------------------------------------------
    async def call(
        self,
        server: str,
        remote: str,
        arguments: dict[str, Any],
        progress: Any,
    ) -> tuple[str, bool]:
        """Call ``remote`` on ``server``: the text the model reads, and whether
        it is an error."""
        connection = self.connections.get(server) or self._reopen(server)
        if connection is None:
            return f"MCP server {server!r} is not configured any more.", True
        try:
            result = await connection.call(remote, arguments, progress=progress)
        except McpUnavailable as exc:
            return str(exc), True
        except ToolGone:
            return (
                f"MCP server {server!r} no longer offers the tool {remote!r}; "
                "use another tool.",
                True,
            )
        except McpCallFailed as exc:
            return (
                f"The call to {remote!r} on MCP server {server!r} failed: {exc}",
                True,
            )
        text = connection.scrub(result_text(result))
        if result.is_error:
            return (
                f"MCP server {server!r} answered with an error from {remote!r}: "
                f"{text or 'no details'}",
                True,
            )
        return text, False

    def _reopen(self, server: str) -> Connection | None:
        """A connection to ``server`` for a tool whose connection was closed
        (``close_servers``), if the settings still name it (a database server:
        as it was last offered)."""
        from .config import configured_servers

        if is_stored(server):
            if server not in self._stored:
                return None
            return self.connection(*self._stored[server])

        servers, hosts = configured_servers()
        found = servers.get(server)
        return self.connection(found, hosts) if found is not None else None

    def statuses(self) -> list[ServerStatus]:
        return [c.status for c in self.connections.values()]

    async def close(self) -> None:
        connections, self.connections = list(self.connections.values()), {}
        self._tools.clear()
        await asyncio.gather(*(c.close() for c in connections), *self._closing)


_registry: Registry | None = None
_pid: int | None = None


def registry() -> Registry:
    """This process's registry (on the runtime loop)."""
    global _registry, _pid
    if _registry is None or _pid != os.getpid():
        _registry, _pid = Registry(), os.getpid()
    return _registry


async def on_runtime_loop(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Await ``coroutine`` on the runtime loop, from any loop (cancelling the
    waiting task cancels it there)."""
    from sagents_django.runtime import loop

    if loop.on_runtime_loop():
        return await coroutine
    return await asyncio.wrap_future(loop.submit(coroutine))


# The tools' function ----------------------------------------------------------------
def tool_function(server: str, remote: str) -> Any:
    """The function of the ``McpTool`` for ``remote`` on ``server``."""

    async def call_mcp_tool(
        arguments: dict[str, Any], context: ToolContext
    ) -> ToolResult:
        call = context.tool_call
        progress = _progress_events(call, events.current_handlers())
        attributes = {
            "sagents.mcp.server": server,
            "sagents.mcp.tool": remote,
        }
        with tracing.span("sagents.mcp_call", attributes) as span:
            text, failed = await on_runtime_loop(
                registry().call(server, remote, arguments, progress)
            )
            if failed:
                tracing.mark_error(span, "mcp_error")
        return ToolResult(
            tool_call_id=call.call_id if call else "",
            name=call.name if call else "",
            content=text,
            is_error=failed,
        )

    return call_mcp_tool


def _progress_events(call: Any, handlers: Any) -> Any:
    """A progress callback publishing ``tool_execution_update`` events (at most
    one per ``PROGRESS_INTERVAL``) to the handlers of the calling turn."""
    if call is None or not handlers:
        return None
    last = 0.0

    async def report(progress: float, total: float | None, message: str | None) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last < PROGRESS_INTERVAL:
            return
        last = now
        shown = f"{progress:g}/{total:g}" if total else f"{progress:g}"
        text = f"{message[:200]} ({shown})" if message else shown
        events.dispatch(
            handlers,
            "tool_execution_update",
            {
                "status": "executing",
                "call_id": call.call_id,
                "name": call.name,
                "display_text": text,
                "progress": {
                    "progress": progress,
                    "total": total,
                    "message": message[:200] if message else None,
                },
            },
        )

    return report
