"""What the MCP tests do again and again: call a tool as the agent's loop does,
read a server's status, wait for something the server does."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from sagents_django.core import State, ToolCall, ToolContext
from sagents_django.core.tools import execute_tool_call
from sagents_django.mcp import McpTool, ServerStatus, server_statuses


async def run(
    tools: list[McpTool], name: str, arguments: dict[str, Any], **options: Any
) -> Any:
    """Call ``name`` among ``tools`` through the core's ``execute_tool_call``."""
    call = ToolCall(call_id="c1", name=name, arguments=arguments)
    context = ToolContext(state=State(), agent_id="a", tool_call=call)
    return await execute_tool_call(call, {t.name: t for t in tools}, context, **options)


async def status_of(name: str) -> ServerStatus:
    statuses = await asyncio.to_thread(server_statuses)
    return next(s for s in statuses if s.name == name)


async def eventually(check: Callable[[], bool], timeout: float = 20) -> bool:
    """Whether ``check()`` becomes true within ``timeout`` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True
