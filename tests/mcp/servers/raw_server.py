"""A hand-written stdio MCP server that misbehaves in one chosen way.

``python raw_server.py MODE`` with MODE one of: ``silent`` (never answers, not even
the handshake), ``garbage`` (answers the handshake, then writes a line that is not
JSON-RPC instead of a call's result), ``bad_tools`` (lists tools with a schema that
is not an object, without a name, not objects at all, beside one good tool),
``many`` (lists 10,000 tools), ``exit_on_call`` (exits when a tool is called).
It speaks the handshake era only: it refuses ``server/discover``.
"""

from __future__ import annotations

import json
import sys

MODE = sys.argv[1]
GOOD = {"name": "ping", "inputSchema": {"type": "object", "properties": {}}}


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def tools() -> list:
    if MODE == "bad_tools":
        return [
            GOOD,
            {"name": "scalar", "inputSchema": {"type": "string"}},
            {"name": "no_schema"},
            {"inputSchema": {"type": "object"}},
            "not a tool",
            {"name": "broken", "inputSchema": {"type": "object", "properties": 5}},
            {
                "name": "odd",
                "inputSchema": {
                    "type": "object",
                    "properties": {"a": {"type": "nothing"}},
                },
            },
        ]
    if MODE == "many":
        return [
            {
                "name": f"tool_{i}",
                "description": "x" * 100,
                "inputSchema": GOOD["inputSchema"],
            }
            for i in range(10_000)
        ]
    return [GOOD]


for line in sys.stdin:
    if MODE == "silent":
        continue
    message = json.loads(line)
    method, ident = message.get("method"), message.get("id")
    if ident is None:
        continue
    if method == "initialize":
        send(
            {
                "jsonrpc": "2.0",
                "id": ident,
                "result": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": f"raw-{MODE}", "version": "1"},
                },
            }
        )
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": ident, "result": {"tools": tools()}})
    elif method == "tools/call" and MODE == "garbage":
        sys.stdout.write("this is not JSON-RPC\n")
        sys.stdout.flush()
    elif method == "tools/call" and MODE == "exit_on_call":
        sys.exit(3)
    elif method == "tools/call":
        send(
            {
                "jsonrpc": "2.0",
                "id": ident,
                "result": {
                    "content": [{"type": "text", "text": "pong"}],
                },
            }
        )
    else:
        send(
            {
                "jsonrpc": "2.0",
                "id": ident,
                "error": {"code": -32601, "message": "not here"},
            }
        )
