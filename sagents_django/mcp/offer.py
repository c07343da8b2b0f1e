"""Where a site's factory gets the tools of its MCP servers.

``mcp_tools(scope)`` is called while an agent is built, which happens in a
synchronous factory on a database thread (the runtime's ``open_turn``), in a view,
or in a script. It hands the work to the runtime loop and waits for it, bounded by
the servers' own time budgets: a server that answers from its cached list costs
nothing; one that is down costs its ``connect_timeout`` once, then nothing until
its next try (the delay doubles per failure, up to a minute), during which its last
list is offered (its tools answer with the error) or, if it never listed, nothing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Iterable
from typing import Any

from sagents_django.core.exceptions import ConfigurationError

from .config import McpServer, configured_servers
from .connection import CLOSE_SECONDS
from .registry import on_runtime_loop, registry
from .status import ServerStatus
from .stored import servers_for
from .tools import McpTool

logger = logging.getLogger(__name__)

_background: set[asyncio.Task[Any]] = set()


def _chosen(
    servers: Iterable[str] | None,
) -> tuple[list[McpServer], frozenset[str], dict[str, McpServer]]:
    configured, hosts = configured_servers()
    if servers is None:
        return list(configured.values()), hosts, configured
    if isinstance(servers, str):
        servers = [servers]  # one name, not its letters
    chosen = []
    for name in servers:
        if name not in configured:
            raise ConfigurationError(
                f"No MCP server {name!r} in SAGENTS['MCP_SERVERS'] (configured: "
                f"{', '.join(sorted(configured)) or 'none'})"
            )
        chosen.append(configured[name])
    return chosen, hosts, configured


def _stored(
    scope: Any, hosts: frozenset[str], configured: dict[str, McpServer]
) -> list[McpServer]:
    """The database's servers ``scope`` may use (a database query)."""
    taken = frozenset(s.prefix for s in configured.values())
    return servers_for(scope, hosts=hosts, taken=taken)


async def _offer(
    chosen: list[McpServer], hosts: frozenset[str], configured: frozenset[str]
) -> list[McpTool]:
    found = registry()
    found.configured(configured)
    return await found.offer(chosen, hosts)


def mcp_tools(scope: Any = None, servers: Iterable[str] | None = None) -> list[McpTool]:
    """The tools of the MCP servers ``scope`` may use, for an agent being built
    (``tools=[*mine, *mcp_tools(scope)]``): every server of the settings, and,
    when ``SAGENTS["MCP_DATABASE_SERVERS"]`` is on, the enabled database rows of
    the scope's user and of its tenant (``stored``). ``servers`` names settings
    servers: only those are offered (and no database row).

    Tools of settings' servers are the same for everyone (gate them by permission
    or with ``interrupt_on``); a row's tools go to its user or tenant only.
    Called on the runtime loop's own thread (from synchronous code running there),
    it can neither wait nor read the database: it offers the settings servers'
    lists this process already has and reads them again in the background.
    """
    from sagents_django.runtime import loop

    chosen, hosts, configured = _chosen(servers)
    names = frozenset(configured)
    if loop.on_runtime_loop():
        if not chosen:
            return []
        task = asyncio.ensure_future(_offer(chosen, hosts, names))
        _background.add(task)
        task.add_done_callback(_background.discard)
        return registry().offered(chosen)
    if servers is None:
        chosen += _stored(scope, hosts, configured)
    if not chosen:
        return []
    future = loop.submit(_offer(chosen, hosts, names))
    bound = max(s.connect_timeout + s.timeout for s in chosen) + CLOSE_SECONDS + 5
    try:
        return future.result(timeout=bound)
    except concurrent.futures.TimeoutError:
        future.cancel()
        logger.error("MCP servers did not list their tools within %gs", bound)
        return []


async def amcp_tools(
    scope: Any = None, servers: Iterable[str] | None = None
) -> list[McpTool]:
    """``mcp_tools`` for async code (any event loop)."""
    from asgiref.sync import sync_to_async

    chosen, hosts, configured = _chosen(servers)
    if servers is None:
        chosen += await sync_to_async(_stored)(scope, hosts, configured)
    if not chosen:
        return []
    return await on_runtime_loop(_offer(chosen, hosts, frozenset(configured)))


def check_servers(servers: list[McpServer]) -> list[ServerStatus]:
    """Connect to ``servers`` from this process and list their tools (an
    operator's "check now"); their statuses after it."""
    from sagents_django.runtime import loop

    if not servers:
        return []
    _, hosts, configured = _chosen(None)
    future = loop.submit(_offer(servers, hosts, frozenset(configured)))
    bound = max(s.connect_timeout + s.timeout for s in servers) + CLOSE_SECONDS + 5
    try:
        future.result(timeout=bound)
    except concurrent.futures.TimeoutError:
        future.cancel()
    names = {s.name for s in servers}
    return [s for s in server_statuses() if s.name in names]


async def _statuses() -> list[ServerStatus]:
    return registry().statuses()


def server_statuses() -> list[ServerStatus]:
    """How each MCP server fares in this process (for an operator's page or a
    health check): state, tools offered, tools left out and why, last error."""
    from sagents_django.runtime import loop

    if loop.on_runtime_loop():
        return registry().statuses()
    return loop.submit(_statuses()).result(timeout=5)


async def _close() -> None:
    await registry().close()


def close_servers() -> None:
    """Close this process's MCP connections (stdio servers stop); the next use
    opens them again."""
    from sagents_django.runtime import loop

    loop.submit(_close()).result(timeout=CLOSE_SECONDS * 2 + 5)
