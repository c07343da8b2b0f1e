"""A stdio server's tools as the agent's tools: names, schemas, hints, calls."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

from sagents_django.core import (
    Agent,
    ConfigurationError,
    events,
)
from sagents_django.core.limits import MAX_TOOL_RESULT_CHARS
from sagents_django.mcp import McpTool, amcp_tools, mcp_tools, server_statuses
from tests.mcp.conftest import stdio
from tests.mcp.helpers import eventually, run
from tests.otel import Recorded


def test_a_stdio_servers_tools_are_offered_with_their_schemas_and_hints(
    use_servers: Any,
) -> None:
    use_servers(notes=stdio())

    tools = {t.name: t for t in mcp_tools(None)}

    assert "notes__echo" in tools and "notes__write_file" in tools
    echo = tools["notes__echo"]
    assert echo.server == "notes" and echo.remote_name == "echo"
    assert echo.description == "Say the text back."
    assert echo.parameters["properties"]["text"]["type"] == "string"
    assert echo.hints.read_only and echo.hints.idempotent
    assert echo.idempotent
    assert not tools["notes__delete_note"].idempotent
    assert tools["notes__delete_note"].hints.destructive


async def test_a_call_returns_the_servers_text(use_servers: Any) -> None:
    use_servers(notes=stdio())
    tools = await amcp_tools(None)

    result = await run(tools, "notes__echo", {"text": "hello"})

    assert not result.is_error and result.content == "hello"
    (status,) = await asyncio.to_thread(server_statuses)
    assert status.state == "connected" and status.tools == len(tools)


async def test_a_tool_that_fails_gives_the_model_the_servers_error(
    use_servers: Any,
) -> None:
    use_servers(notes=stdio())
    tools = await amcp_tools(None)

    result = await run(tools, "notes__fail", {"message": "the disk is full"})

    assert result.is_error
    assert "MCP server 'notes' answered with an error from 'fail'" in result.content
    assert "the disk is full" in result.content


async def test_progress_reaches_the_turns_event_handlers(use_servers: Any) -> None:
    use_servers(notes=stdio())
    tools = await amcp_tools(None)
    seen: list[tuple[str, dict[str, Any]]] = []

    with events.event_handlers(lambda name, data: seen.append((name, data))):
        result = await run(tools, "notes__count", {"to": 3})

    assert result.content == "counted to 3"
    updates = [data for name, data in seen if name == "tool_execution_update"]
    assert updates and all(u["status"] == "executing" for u in updates)
    assert updates[0]["call_id"] == "c1" and updates[0]["name"] == "notes__count"
    assert updates[0]["progress"]["total"] == 3
    assert updates[0]["display_text"].startswith("counted ")


async def test_a_call_past_its_time_budget_is_cancelled_on_the_server(
    use_servers: Any, markers: Path
) -> None:
    use_servers(notes=stdio(timeout=1))
    tools = await amcp_tools(None)

    result = await run(tools, "notes__hang", {"marker": "hung"})

    assert result.is_error
    assert "no result within 1 seconds (the call was cancelled)" in result.content
    assert await eventually(lambda: (markers / "hung").exists())
    echoed = await run(tools, "notes__echo", {"text": "still here"})
    assert echoed.content == "still here"


async def test_results_of_5_and_50_megabytes_are_cut_to_the_result_limit(
    use_servers: Any,
) -> None:
    use_servers(notes=stdio())
    tools = await amcp_tools(None)

    for megabytes in (5, 50):
        result = await run(tools, "notes__big", {"megabytes": megabytes})

        assert not result.is_error
        assert len(result.content) <= MAX_TOOL_RESULT_CHARS
        size = megabytes * 1024 * 1024
        assert f"[Result truncated: it was {size} characters" in result.content
    assert (await run(tools, "notes__echo", {"text": "ok"})).content == "ok"


async def test_a_tool_named_like_a_built_in_keeps_its_prefix(
    use_servers: Any, chat_model: Any
) -> None:
    use_servers(notes=stdio())
    agent = Agent(model=chat_model, tools=await amcp_tools(None))

    assert agent.tools_by_name["write_file"].__class__.__name__ == "Tool"
    assert isinstance(agent.tools_by_name["notes__write_file"], McpTool)


async def test_a_tool_removed_from_the_list_is_a_tool_error_and_is_no_longer_offered(
    use_servers: Any,
) -> None:
    use_servers(notes=stdio())
    tools = await amcp_tools(None)

    retired = await run(tools, "notes__retire", {"name": "echo"})
    gone = await run(tools, "notes__echo", {"text": "hello?"})

    assert retired.content == "retired echo"
    assert gone.is_error
    assert "MCP server 'notes' no longer offers the tool 'echo'" in gone.content
    assert "notes__echo" not in {t.name for t in await amcp_tools(None)}


async def test_only_the_named_servers_and_allowed_tools_are_offered(
    use_servers: Any,
) -> None:
    use_servers(
        notes=stdio(tools=["echo", "count"]),
        more=stdio(prefix="extra", tools=["echo"]),
    )

    both = {t.name for t in await amcp_tools(None)}
    one = {t.name for t in await amcp_tools(None, servers=["more"])}

    assert both == {"notes__echo", "notes__count", "extra__echo"}
    assert one == {"extra__echo"}
    with pytest.raises(ConfigurationError, match="No MCP server 'nope'"):
        await amcp_tools(None, servers=["nope"])


def test_the_site_can_say_which_tools_may_run_again(use_servers: Any) -> None:
    use_servers(
        notes=stdio(idempotent=["delete_note"]),
        loud=stdio(prefix="loud", idempotent=False),
    )

    idempotent = {t.name for t in mcp_tools(None) if t.idempotent}

    assert idempotent == {"notes__delete_note"}  # echo's hint is overridden too


async def test_each_call_is_a_span_under_its_tool_call(
    use_servers: Any, spans: Recorded
) -> None:
    use_servers(notes=stdio(tools=["echo", "fail"]))
    tools = await amcp_tools(None)

    await run(tools, "notes__echo", {"text": "traced"})
    await run(tools, "notes__fail", {"message": "no"})

    ok, failed = spans.named("sagents.mcp_call")
    assert dict(ok.attributes or {}) == {
        "sagents.mcp.server": "notes",
        "sagents.mcp.tool": "echo",
    }
    parent = spans.parent_of(ok)
    assert parent is not None and parent.name == "sagents.tool_call"
    assert failed.status.status_code == StatusCode.ERROR
    assert ok.status.status_code != StatusCode.ERROR


async def test_on_the_runtime_loops_thread_the_lists_it_has_are_offered_at_once(
    use_servers: Any,
) -> None:
    """Synchronous code running on the runtime loop (a factory called there)
    cannot wait for the loop: it gets the lists already read, and a refresh."""
    from sagents_django.runtime import loop

    use_servers(notes=stdio(tools=["echo"]))

    async def build() -> list[str]:
        return [t.name for t in mcp_tools(None)]

    first = await asyncio.wrap_future(loop.submit(build()))
    assert first == []  # nothing read yet: a listing started in the background
    assert await eventually(lambda: loop.submit(build()).result() == ["notes__echo"])
