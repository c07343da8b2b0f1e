"""How this process reaches one MCP server: a subprocess, or HTTP to an allowed host.

A stdio server is started from its configured argument list, never through a shell
(``stdio``; the SDK's own transport on Windows).

An HTTP server is reached through an HTTP client whose transport refuses any
request to a host outside ``SAGENTS["MCP_ALLOWED_HOSTS"]`` and cuts any response
body longer than the server's ``max_message_bytes``. The SDK itself follows a
redirect only within the endpoint's origin; the host check holds even if that
changed. Both bounds fail the request with an error that names them.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx2

from .config import McpServer

READ_TIMEOUT = 300.0
"""Seconds an HTTP read may wait (the server's event stream idles between events;
each call has its own, shorter time budget)."""


def open_transport(
    server: McpServer, hosts: frozenset[str]
) -> AbstractAsyncContextManager[Any]:
    """The SDK transport of ``server`` (an async context manager of its streams)."""
    if server.transport == "http":
        return _http(server, hosts)
    if sys.platform == "win32":  # no process groups: the SDK's transport
        from mcp.client.stdio import StdioServerParameters, stdio_client

        parameters = StdioServerParameters(
            command=server.command[0],
            args=list(server.command[1:]),
            env=dict(server.env),
            cwd=server.cwd,
            encoding_error_handler="replace",
        )
        return stdio_client(parameters, errlog=sys.__stderr__ or sys.stderr)
    from .stdio import stdio_transport

    return stdio_transport(
        server.command,
        env=dict(server.env),
        cwd=server.cwd,
        max_bytes=server.max_message_bytes,
    )


@asynccontextmanager
async def _http(server: McpServer, hosts: frozenset[str]) -> AsyncIterator[Any]:
    from mcp.client.streamable_http import streamable_http_client

    assert server.url is not None
    transport = GuardedTransport(
        httpx2.AsyncHTTPTransport(),
        hosts=hosts,
        max_bytes=server.max_message_bytes,
        server=server.name,
    )
    timeout = httpx2.Timeout(
        server.timeout, connect=server.connect_timeout, read=READ_TIMEOUT
    )
    async with (
        httpx2.AsyncClient(
            headers=dict(server.headers),
            timeout=timeout,
            transport=transport,
            follow_redirects=False,
        ) as client,
        streamable_http_client(
            server.url,
            http_client=client,
            max_sse_event_size=server.max_message_bytes,
        ) as streams,
    ):
        yield streams


class RefusedHost(httpx2.ConnectError):
    """A request to a host outside ``MCP_ALLOWED_HOSTS`` (nothing was sent)."""


class ResponseTooLarge(httpx2.SSEError, httpx2.StreamError):
    """A response body over the server's ``max_message_bytes`` (cut there).

    Both an event-stream and a body error, so the SDK fails the one request it
    answered with this message, whichever way the server answered."""


class GuardedTransport(httpx2.AsyncBaseTransport):
    """An HTTP transport for allowed hosts only, with bounded response bodies."""

    def __init__(
        self,
        inner: httpx2.AsyncBaseTransport,
        *,
        hosts: frozenset[str],
        max_bytes: int,
        server: str,
    ) -> None:
        self.inner = inner
        self.hosts = hosts
        self.max_bytes = max_bytes
        self.server = server

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        host = (request.url.host or "").lower()
        if host not in self.hosts:
            raise RefusedHost(
                f"MCP server {self.server!r}: a request to host {host!r} was refused "
                "(not in SAGENTS['MCP_ALLOWED_HOSTS'])",
                request=request,
            )
        response = await self.inner.handle_async_request(request)
        stream = response.stream
        assert isinstance(stream, httpx2.AsyncByteStream)
        response.stream = _Bounded(stream, self.max_bytes, self.server)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Bounded(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, limit: int, server: str) -> None:
        self.inner = inner
        self.limit = limit
        self.server = server

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self.inner:
            seen += len(chunk)
            if seen > self.limit:
                raise ResponseTooLarge(
                    f"MCP server {self.server!r} sent a response larger than "
                    f"{self.limit} bytes (its max_message_bytes); it was not read"
                )
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()
