"""A real MCP server for the tests, written with the same SDK (``MCPServer``).

``python notes_server.py stdio`` serves on stdin/stdout; ``python notes_server.py
http`` serves streamable HTTP on 127.0.0.1 (a free port, printed on the first line
of stdout), where ``/moved/mcp`` redirects to ``$REDIRECT_TO``. Its tools stream
progress, fail, hang (writing ``$MARKERS/<name>`` when cancelled), return megabytes,
remove tools from their own list, and include one named like a built-in.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

server = MCPServer("notes")
NOTES: dict[str, str] = {}
MARKERS = Path(os.environ.get("MARKERS", "/tmp"))


@server.tool(annotations=ToolAnnotations(readOnlyHint=True, idempotentHint=True))
def echo(text: str) -> str:
    """Say the text back."""
    return text


@server.tool()
async def count(to: int, ctx: Context) -> str:
    """Count to a number, reporting progress."""
    for step in range(1, to + 1):
        await ctx.report_progress(step, to, f"counted {step}")
        await asyncio.sleep(0.3)
    return f"counted to {to}"


@server.tool()
def fail(message: str) -> str:
    """Fail with a message."""
    raise ToolError(message)


@server.tool()
async def hang(marker: str) -> str:
    """Never answer (until cancelled)."""
    (MARKERS / f"{marker}.started").write_text("started")
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        (MARKERS / marker).write_text("cancelled")
        raise
    return "never"


@server.tool(structured_output=False)
def big(megabytes: float) -> str:
    """Return megabytes of text."""
    return "x" * int(megabytes * 1024 * 1024)


@server.tool()
def write_file(path: str, content: str) -> str:
    """Keep a note (named like the agent's own file tool)."""
    NOTES[path] = content
    return f"noted {path} ({len(content)} characters)"


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def delete_note(path: str) -> str:
    """Delete a note."""
    return f"deleted {path}" if NOTES.pop(path, None) is not None else f"no {path}"


@server.tool()
async def retire(name: str, ctx: Context) -> str:
    """Remove a tool from this server's list, announcing the change."""
    server.remove_tool(name)
    await ctx.notify_tools_changed()  # 2026-era clients (a subscription)
    with contextlib.suppress(Exception):  # handshake-era clients
        await ctx.session.send_tool_list_changed()
    return f"retired {name}"


@server.tool()
def token(ctx: Context, leak: bool = False) -> str:
    """Whether the request carried the expected bearer token (or, leaking, the
    header itself, as a careless server might)."""
    headers = ctx.headers or {}
    if leak:
        return f"you sent {headers.get('authorization')}"
    expected = f"Bearer {os.environ.get('EXPECTED_TOKEN', '')}"
    return "token ok" if headers.get("authorization") == expected else "no token"


def serve_http() -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import RedirectResponse
    from starlette.routing import Mount, Route

    app = server.streamable_http_app()

    async def moved(request):  # type: ignore[no-untyped-def]
        return RedirectResponse(os.environ["REDIRECT_TO"], status_code=307)

    outer = Starlette(
        routes=[Route("/moved/mcp", moved, methods=["GET", "POST"]), Mount("/", app)],
        lifespan=lambda _app: app.router.lifespan_context(app),
    )
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections wait in the backlog until uvicorn accepts
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(
        outer, log_level="warning", lifespan="on", timeout_graceful_shutdown=1
    )
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    if sys.argv[1:] == ["http"]:
        serve_http()
    else:
        server.run("stdio")
