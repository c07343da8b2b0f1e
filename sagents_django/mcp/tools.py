"""An MCP server's tools as the agent's ``Tool`` objects.

Each listed tool becomes an ``McpTool``: an ordinary ``Tool`` (so ``interrupt_on``,
approval hooks, sub-agents' tool lists, the time budget, cancellation, the result
limits, the journal and spans treat it as any other) named ``<prefix>__<tool>``,
with the server's description and JSON schema, its annotations kept as ``hints``,
and ``idempotent`` only when the server's ``idempotentHint`` (or the site's
``idempotent`` option) says so.

Names: a model's function names allow ``[A-Za-z0-9_-]`` up to 64 characters, so
other characters become ``_`` and a long name is cut and ends in a short hash of the
original; two tools that would get one name keep the first (the other is left out
and reported). The prefix keeps a server's ``write_file`` apart from the agent's own.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sagents_django.core.exceptions import ConfigurationError
from sagents_django.core.tools import Tool, ToolContext

from .config import McpServer

MAX_NAME = 64
MAX_DESCRIPTION = 4000
"""Characters of a server's tool description the model reads."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolHints:
    """A server's annotations of a tool (hints from the server, not guarantees)."""

    title: str | None = None
    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None

    @classmethod
    def of(cls, tool: Any) -> ToolHints:
        found = getattr(tool, "annotations", None)
        if found is None:
            return cls()
        return cls(
            title=found.title,
            read_only=found.read_only_hint,
            destructive=found.destructive_hint,
            idempotent=found.idempotent_hint,
            open_world=found.open_world_hint,
        )


@dataclass(kw_only=True, slots=True, eq=False)
class McpTool(Tool):
    """A tool of an MCP server, offered to the agent."""

    server: str
    """The ``MCP_SERVERS`` name of its server."""
    remote_name: str
    """Its name on the server (``name`` is the prefixed one the model sees)."""
    hints: ToolHints = ToolHints()


Caller = Callable[[str, str], Callable[[dict[str, Any], ToolContext], Any]]
"""Makes the function of a tool from its server's and its own (remote) name."""


def offered_name(prefix: str, remote: str) -> str:
    """``<prefix>__<remote>`` as a model accepts it."""
    name = f"{prefix}__{_UNSAFE.sub('_', remote)}"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(remote.encode()).hexdigest()[:8]
    return f"{name[: MAX_NAME - 9]}_{digest}"


def build_tools(
    server: McpServer, listed: tuple[Any, ...], caller: Caller
) -> tuple[tuple[McpTool, ...], tuple[str, ...]]:
    """The ``McpTool`` of each listed tool, and why any was left out."""
    tools: list[McpTool] = []
    problems: list[str] = []
    taken: dict[str, str] = {}
    for listed_tool in listed:
        remote = listed_tool.name
        name = offered_name(server.prefix, remote)
        if name in taken:
            problems.append(
                f"tool {remote!r} would be named {name!r}, as {taken[name]!r} is"
            )
            continue
        hints = ToolHints.of(listed_tool)
        description = (listed_tool.description or listed_tool.title or "").strip()
        if len(description) > MAX_DESCRIPTION:
            description = description[:MAX_DESCRIPTION] + "..."
        title = listed_tool.title or hints.title
        try:
            tool = McpTool(
                name=name,
                description=description or f"The {remote!r} tool of {server.name!r}.",
                function=caller(server.name, remote),
                parameters=listed_tool.input_schema,
                display_text=title[:100] if title else None,
                idempotent=server.is_idempotent(remote, hints.idempotent),
                permission=server.permissions_for(remote) or None,
                server=server.name,
                remote_name=remote,
                hints=hints,
            )
        except ConfigurationError as exc:
            problems.append(f"tool {remote!r}: {str(exc)[:300]}")
            continue
        taken[name] = remote
        tools.append(tool)
    return tuple(tools), tuple(problems)
