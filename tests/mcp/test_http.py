"""A streamable-HTTP server (the notes server under uvicorn on 127.0.0.1): its tools,
its secrets kept out of everything the site shows, redirects and hosts refused,
bounded responses, cancelled calls, a list that changes."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from sagents_django.core import events
from sagents_django.core.limits import MAX_TOOL_RESULT_CHARS
from sagents_django.mcp import amcp_tools
from tests.mcp.conftest import TOKEN, Counter, HttpServer
from tests.mcp.helpers import eventually, run, status_of


async def test_an_http_servers_tools_are_called_with_its_headers_kept_secret(
    use_servers: Any, http_server: HttpServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    use_servers(
        notes=http_server.settings(headers={"Authorization": f"Bearer {TOKEN}"})
    )
    seen: list[Any] = []

    with events.event_handlers(lambda name, data: seen.append(data)):
        tools = await amcp_tools(None)
        echoed = await run(tools, "notes__echo", {"text": "over http"})
        token = await run(tools, "notes__token", {})
        leaked = await run(tools, "notes__token", {"leak": True})

    assert echoed.content == "over http" and token.content == "token ok"
    assert leaked.content == "you sent ***"  # a careless server's echo
    status = await status_of("notes")
    assert status.transport == "http" and status.target == "127.0.0.1"
    assert status.protocol_version == "2026-07-28"
    shown = [caplog.text, repr(status), repr(tools), repr(seen)]
    assert not any(TOKEN in text for text in shown)
    # A result quoting the token alone (the model's own text, here) loses it too.
    word = await run(tools, "notes__echo", {"text": f"token is {TOKEN}"})
    assert word.content == "token is ***"


async def test_a_redirect_to_another_host_is_not_followed(
    use_servers: Any, http_server: HttpServer
) -> None:
    use_servers(notes={"url": f"http://127.0.0.1:{http_server.port}/moved/mcp"})

    tools = await amcp_tools(None)

    assert tools == []
    status = await status_of("notes")
    assert status.state == "failed"
    assert "not followed" in (status.last_error or "")
    assert Counter.hits == 0


def test_a_server_on_a_host_that_is_not_allowed_is_refused(
    use_servers: Any, http_server: HttpServer
) -> None:
    from sagents_django.mcp import mcp_tools

    use_servers(hosts=["mcp.example.com"], notes=http_server.settings())

    with pytest.raises(
        ImproperlyConfigured, match=r"host '127\.0\.0\.1', which is not"
    ):
        mcp_tools(None)


@pytest.mark.parametrize("megabytes", [5, 50])
async def test_a_large_result_is_cut_and_one_over_the_message_bound_refused(
    use_servers: Any, http_server: HttpServer, megabytes: int
) -> None:
    use_servers(
        notes=http_server.settings(),
        small=http_server.settings(prefix="small", max_message_bytes=1024 * 1024),
    )
    tools = await amcp_tools(None)

    cut = await run(tools, "notes__big", {"megabytes": megabytes})
    refused = await run(tools, "small__big", {"megabytes": megabytes})

    assert not cut.is_error and len(cut.content) <= MAX_TOOL_RESULT_CHARS
    size = megabytes * 1024 * 1024
    assert f"[Result truncated: it was {size} characters" in cut.content
    assert refused.is_error and "larger than 1048576 bytes" in refused.content
    assert (await run(tools, "small__echo", {"text": "fine"})).content == "fine"


async def test_a_hanging_call_is_cancelled_on_the_http_server(
    use_servers: Any, http_server: HttpServer, markers: Path
) -> None:
    use_servers(notes=http_server.settings(timeout=1))
    tools = await amcp_tools(None)

    result = await run(tools, "notes__hang", {"marker": "http-hung"})

    assert result.is_error and "no result within 1 seconds" in result.content
    assert await eventually(lambda: (markers / "http-hung").exists())


async def test_a_change_of_the_http_servers_list_is_seen_at_once(
    use_servers: Any, http_server: HttpServer
) -> None:
    use_servers(notes=http_server.settings(list_ttl=3600))
    tools = await amcp_tools(None)

    await run(tools, "notes__retire", {"name": "echo"})

    async def echo_gone() -> bool:
        return "notes__echo" not in {t.name for t in await amcp_tools(None)}

    deadline = asyncio.get_running_loop().time() + 20
    while not await echo_gone():  # the subscription's event arrives on its own
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.05)
    gone = await run(tools, "notes__echo", {"text": "hello?"})
    assert gone.is_error and "no longer offers the tool 'echo'" in gone.content


async def test_an_http_server_that_is_down_gives_the_model_an_error(
    use_servers: Any, http_server: HttpServer
) -> None:
    use_servers(notes=http_server.settings(connect_timeout=2))
    tools = await amcp_tools(None)
    http_server.process.kill()  # it crashed
    http_server.process.wait()

    result = await run(tools, "notes__echo", {"text": "anyone?"})

    assert result.is_error
    assert "MCP server 'notes'" in result.content
    assert (await status_of("notes")).last_error
