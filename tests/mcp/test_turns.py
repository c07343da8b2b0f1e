"""Turns that call MCP tools through the runtime, on both stacks: the embedded one
(turns on this process's runtime loop) and, in the PostgreSQL pass, a Celery worker
process of its own whose factory offers the servers' tools (its stdio servers run
under the worker; it reads the database's servers of the turn's user)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from sagents_django.models import DisplayMessage, StoredMcpServer
from sagents_django.runtime import agent_server
from tests.fakes.openai_server import FakeOpenAIServer, reply, tool_call
from tests.mcp.conftest import SERVERS, TOKEN, HttpServer
from tests.runtime import follow as follow_module
from tests.runtime import stacks
from tests.runtime.follow import follow, new_conversation

pytestmark = pytest.mark.django_db(transaction=True)

QUEUE = f"{stacks.QUEUE}-mcp"
site = follow_module.site
FACTORY = "tests.mcp.agents.build_agent"


def mcp_settings(markers: Path) -> dict[str, Any]:
    notes = [sys.executable, str(SERVERS / "notes_server.py")]
    return {
        "FACTORY": FACTORY,
        "MCP_SERVERS": {"notes": {"command": notes, "env": {"MARKERS": str(markers)}}},
        "MCP_ALLOWED_HOSTS": ["127.0.0.1"],
        "MCP_DATABASE_SERVERS": True,
        "MCP_SECRETS": {"notes_token": f"Bearer {TOKEN}"},
    }


@pytest.fixture(scope="module")
def worker(
    django_db_setup: Any,
    django_db_blocker: Any,
    production_llm: FakeOpenAIServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[stacks.Worker]:
    markers = tmp_path_factory.mktemp("worker-markers")
    with stacks.own_worker(
        production_llm, concurrency=4, queue=QUEUE, overrides=mcp_settings(markers)
    ) as one:
        yield one


@pytest.fixture
async def mcp_site(
    site: FakeOpenAIServer, request: Any, settings: Any, markers: Path
) -> AsyncIterator[FakeOpenAIServer]:
    """The runtime tests' site (``follow.site``, on each stack) with the notes
    server in its settings; on the production stack, turns go to this module's
    worker, whose settings name it too."""
    settings.SAGENTS = {**settings.SAGENTS, **mcp_settings(markers)}
    if request.node.callspec.params["site"] != "production":
        yield site
        return
    request.getfixturevalue("worker")
    with stacks.turns_to(QUEUE):
        yield site


async def tool_result(conversation: Any, call_id: str) -> DisplayMessage:
    return await DisplayMessage.objects.aget(
        conversation=conversation.pk, content_type="tool_result", tool_call_id=call_id
    )


async def test_a_turn_calls_an_mcp_tool_and_the_model_reads_its_result(
    mcp_site: FakeOpenAIServer,
) -> None:
    mcp_site.script(
        reply(tool_calls=[tool_call("notes__echo", {"text": "from MCP"}, id="e1")]),
        reply("The server said: from MCP."),
    )
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)

    await agent_server.aadd_message(scope, conversation.pk, "echo")
    finished = await follower.until("run_finished")

    assert finished["data"]["status"] == "completed"
    offered = {t["function"]["name"] for t in mcp_site.requests[0]["tools"]}
    assert {"notes__echo", "notes__write_file", "write_file"} <= offered
    assert mcp_site.requests[1].messages[-1]["content"] == "from MCP"
    assert "from MCP" in str((await tool_result(conversation, "e1")).content)


async def test_an_mcp_tool_waits_for_approval_and_runs_on_resume(
    mcp_site: FakeOpenAIServer,
) -> None:
    mcp_site.script(
        reply(
            tool_calls=[tool_call("notes__write_file", {"path": "n", "content": "x"})]
        ),
        reply(tool_calls=[tool_call("notes__delete_note", {"path": "n"}, id="d1")]),
        reply("Deleted."),
    )
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "note, then delete")
    paused = await follower.until("run_finished")
    assert paused["data"]["status"] == "interrupted"

    await agent_server.aresume(scope, conversation.pk, [{"type": "approve"}])
    finished = await follower.until("run_finished")

    assert finished["data"]["status"] == "completed"
    assert "deleted n" in str((await tool_result(conversation, "d1")).content)


async def test_a_turn_calls_the_tool_of_a_server_its_user_keeps_in_the_database(
    mcp_site: FakeOpenAIServer, http_server: HttpServer
) -> None:
    mcp_site.script(
        reply(tool_calls=[tool_call("mine__token", {}, id="t1")]),
        reply("Your server knows you."),
        reply("Hello, Bob."),
    )
    scope, conversation = await new_conversation()
    bob, other = await new_conversation("bob")
    await StoredMcpServer.objects.acreate(
        user=scope.user,
        name="mine",
        url=http_server.url,
        headers={"Authorization": "notes_token"},
        tools=["token", "echo"],
    )
    follower = await follow(scope, conversation.pk)

    await agent_server.aadd_message(scope, conversation.pk, "who am I?")
    finished = await follower.until("run_finished")

    assert finished["data"]["status"] == "completed"
    offered = {t["function"]["name"] for t in mcp_site.requests[0]["tools"]}
    assert {"mine__token", "mine__echo", "notes__echo"} <= offered
    assert "mine__count" not in offered  # not in the row's tools
    assert mcp_site.requests[1].messages[-1]["content"] == "token ok"
    assert TOKEN not in str((await tool_result(conversation, "t1")).content)
    # Another user's turn is not offered the row's tools.
    bobs = await follow(bob, other.pk)
    await agent_server.aadd_message(bob, other.pk, "hi")
    assert (await bobs.until("run_finished"))["data"]["status"] == "completed"
    names = {t["function"]["name"] for t in mcp_site.requests[2]["tools"]}
    assert "notes__echo" in names and not any(n.startswith("mine__") for n in names)
