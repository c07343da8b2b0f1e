"""What this process knows of each MCP server, for the operator.

A status is per process (each worker holds its own connections): the state of the
connection, the tools it offers, the tools it left out and why, and the last error
with its time. It never holds a header, an environment variable or a URL's query:
only the server's name, transport and host or program name.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Literal

ConnectionState = Literal["idle", "connecting", "connected", "failed", "closed"]


@dataclass(frozen=True, kw_only=True)
class ServerStatus:
    """One server's state in this process (``mcp.server_statuses()``)."""

    name: str
    transport: Literal["stdio", "http"]
    target: str
    """The program (stdio) or host (HTTP), never arguments, headers or queries."""
    state: ConnectionState = "idle"
    protocol_version: str | None = None
    tools: int = 0
    """Tools offered from its last listing."""
    left_out: tuple[str, ...] = ()
    """Why tools of its last listing were left out (the first few)."""
    left_out_count: int = 0
    listed_at: float | None = None
    """``time.time()`` of the last listing."""
    last_error: str | None = None
    last_error_at: float | None = None
    connected_at: float | None = None
    retry_at: float | None = None
    """``time.time()`` before which no new connection is tried (after failures)."""
    malformed_messages: int = 0
    """Messages from the server that were not JSON-RPC."""

    def with_error(self, error: str, *, retry_at: float | None) -> ServerStatus:
        return replace(
            self,
            state="failed",
            last_error=error,
            last_error_at=time.time(),
            retry_at=retry_at,
        )
