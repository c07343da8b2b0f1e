"""Servers that misbehave: each gives the model an error it can read and the
operator a status and a log line, and leaves the process able to serve the next
call (a well-behaved server beside it goes on working)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from sagents_django.mcp import McpTool, amcp_tools
from tests.mcp.conftest import stdio
from tests.mcp.helpers import run, status_of


async def healthy(tools: list[McpTool]) -> bool:
    """The well-behaved server still answers through this process."""
    result = await run(tools, "notes__echo", {"text": "alive"})
    return result.content == "alive"


async def test_a_server_that_never_answers_the_handshake_is_given_up_in_time(
    use_servers: Any, caplog: pytest.LogCaptureFixture
) -> None:
    use_servers(
        silent=stdio("raw_server.py", "silent", connect_timeout=1),
        notes=stdio(tools=["echo"]),
    )
    caplog.set_level(logging.WARNING, "sagents_django.mcp")

    tools = await amcp_tools(None)
    again = await amcp_tools(None)  # within the retry delay: no new wait

    assert {t.name for t in tools} == {t.name for t in again} == {"notes__echo"}
    status = await status_of("silent")
    assert status.state == "failed" and status.retry_at is not None
    assert "no answer to the handshake within 1 seconds" in (status.last_error or "")
    assert "MCP server 'silent' is unavailable" in caplog.text
    assert await healthy(tools)


async def test_a_line_that_is_not_json_rpc_is_reported_to_the_model(
    use_servers: Any,
) -> None:
    use_servers(garbage=stdio("raw_server.py", "garbage", timeout=1))
    tools = await amcp_tools(None)

    result = await run(tools, "garbage__ping", {})

    assert result.is_error
    assert "no result within 1 seconds" in result.content
    assert "it sent a message that is not JSON-RPC" in result.content
    assert (await status_of("garbage")).state == "connected"


async def test_tools_that_cannot_be_offered_are_left_out_with_the_reason(
    use_servers: Any, caplog: pytest.LogCaptureFixture
) -> None:
    use_servers(bad=stdio("raw_server.py", "bad_tools"))
    caplog.set_level(logging.WARNING, "sagents_django.mcp")

    tools = await amcp_tools(None)

    assert [t.name for t in tools] == ["bad__ping"]
    assert (await run(tools, "bad__ping", {})).content == "pong"
    status = await status_of("bad")
    reasons = " | ".join(status.left_out)
    assert "tool 'scalar': its inputSchema is of type 'string', not 'object'" in reasons
    assert "tool 'no_schema': its inputSchema is not a JSON object" in reasons
    assert "item 3 of the list has no usable name" in reasons
    assert "item 4 of the list is not a tool object" in reasons
    assert (
        "tool 'broken': inputSchema.properties: Input should be a valid dictionary"
        in reasons
    )
    assert "tool 'odd': Tool 'bad__odd' has an invalid parameters schema" in reasons
    assert status.left_out_count == 6 and status.tools == 1
    assert "tools left out" in caplog.text


async def test_ten_thousand_tools_are_cut_to_max_tools(use_servers: Any) -> None:
    use_servers(many=stdio("raw_server.py", "many", max_tools=20))

    tools = await amcp_tools(None)

    assert [t.name for t in tools] == [f"many__tool_{i}" for i in range(20)]
    status = await status_of("many")
    assert status.left_out == ("9980 more tools beyond max_tools (20) were left out",)


async def test_a_server_that_exits_during_a_call_is_started_again_on_the_next_use(
    use_servers: Any,
) -> None:
    use_servers(dying=stdio("raw_server.py", "exit_on_call"))
    tools = await amcp_tools(None)

    result = await run(tools, "dying__ping", {})
    lost = await status_of("dying")
    again = await amcp_tools(None)

    assert result.is_error
    assert "The call to 'ping' on MCP server 'dying' failed" in result.content
    assert lost.state == "failed"
    assert [t.name for t in again] == ["dying__ping"]
    assert (await status_of("dying")).state == "connected"


@pytest.mark.parametrize("megabytes", [5, 50])
async def test_a_message_over_max_message_bytes_fails_the_call_not_the_process(
    use_servers: Any, megabytes: int
) -> None:
    use_servers(notes=stdio(max_message_bytes=1024 * 1024))
    tools = await amcp_tools(None)

    result = await run(tools, "notes__big", {"megabytes": megabytes})

    assert result.is_error
    assert "larger than 1048576 bytes" in result.content
    assert await healthy(await amcp_tools(None))


async def test_a_tool_outliving_its_connection_opens_it_again(use_servers: Any) -> None:
    from sagents_django.mcp import close_servers

    use_servers(notes=stdio(tools=["echo"]), other=stdio(prefix="other"))
    tools = await amcp_tools(None)
    await asyncio.to_thread(close_servers)

    assert await healthy(tools)
    use_servers(other=stdio(prefix="other"))  # notes leaves the settings
    await asyncio.to_thread(close_servers)
    gone = await run(tools, "notes__echo", {"text": "hi"})
    assert gone.content == "MCP server 'notes' is not configured any more."
