"""MCP servers' tools as the agent's tools.

A site names its servers in settings and adds their tools in its factory::

    SAGENTS = {
        "MCP_SERVERS": {
            "docs": {"command": ["python", "-m", "docs_server"]},
            "tickets": {
                "url": "https://mcp.example.com/mcp",
                "headers": {"Authorization": f"Bearer {TICKETS_TOKEN}"},
                "tools": ["search", "create_ticket"],
            },
        },
        "MCP_ALLOWED_HOSTS": ["mcp.example.com"],
    }

    tools = [*build_tools(scope=scope), *mcp_tools(scope)]

The tools are ordinary ``Tool`` objects named ``<server>__<tool>`` (``McpTool``),
so everything a tool gets applies: ``interrupt_on={"tickets__create_ticket": True}``,
the approval hooks, sub-agents' tool lists, the turn's time budget and Stop (the
call is cancelled and the server told so), the result limits, the tool journal (an
MCP tool runs again after a worker died only when its ``idempotentHint`` or the
server's ``idempotent`` option says it may) and spans (``sagents.mcp_call``).

Security, and what it answers (Chainlit 2.12.0's ``/mcp`` endpoint took a server
from the browser: a command line whose executable was checked against a short list
while its arguments were not, which ran commands of the user's choosing, and a URL
the server then connected to, reaching hosts on its own network):

- a stdio server is a list of arguments from settings, run without a shell; no
  request, database row or model output ever reaches a command, its arguments or
  its environment (``config``);
- an HTTP server's host must be in ``SAGENTS["MCP_ALLOWED_HOSTS"]``, checked in
  settings and again on every request the client sends; a redirect is followed
  only within the endpoint's origin (the SDK), never to another host
  (``transports``);
- results are untrusted text: bounded (``core.limits.MAX_TOOL_RESULT_CHARS``, and
  each HTTP response by ``max_message_bytes``), binary data dropped, never
  rendered as HTML; the tool list is checked before the SDK reads it (``guard``);
- headers and environment values never appear in a log line, a status, an event or
  an error (errors are scrubbed of them, and of the URL).

A site may also let users and tenants keep their own HTTP servers in the database
(``SAGENTS["MCP_DATABASE_SERVERS"]``): ``mcp_tools(scope)`` then adds the rows of
the scope's user and tenant, held to the same allow-list, their headers naming
entries of ``SAGENTS["MCP_SECRETS"]`` (``stored``).

Modules: ``config`` (settings), ``stored`` and ``models`` (the database's
servers), ``transports`` (stdio and guarded HTTP), ``guard``
(the transport's edge), ``connection`` (one server's session), ``registry`` (this
process's connections, the tools' calls), ``tools`` (``McpTool``), ``results``
(what the model reads), ``status`` (for operators), ``offer`` (the factory's door).
"""

from __future__ import annotations

from .config import McpServer
from .offer import amcp_tools, close_servers, mcp_tools, server_statuses
from .status import ServerStatus
from .tools import McpTool, ToolHints

__all__ = [
    "McpServer",
    "McpTool",
    "ServerStatus",
    "ToolHints",
    "amcp_tools",
    "close_servers",
    "mcp_tools",
    "server_statuses",
]
