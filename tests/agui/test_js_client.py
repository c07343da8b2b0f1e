"""The official AG-UI JavaScript client (``@ag-ui/client`` 1.0.0, run with Node)
against daphne, with turns run by a Celery worker: a turn, an approval, and a
client that leaves mid-stream and rejoins another daphne process with the last SSE
id it read. The client verifies the event sequence itself (it rejects a stream
that breaks AG-UI's rules) and applies events its own way."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sagents_django.agui import tokens
from tests.fakes.openai_server import FakeOpenAIServer, reply, tool_call
from tests.runtime import stacks
from tests.runtime.follow import new_conversation, no_active_runs
from tests.support.processes import Daphne

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        "production" not in stacks.names(),
        reason="real daphne and worker processes: the PostgreSQL pass",
    ),
]

JS = Path(__file__).parent / "js"
WORDS = [f"w{n:02d} " for n in range(50)]
TEXT = "".join(WORDS)
PLAN = {"todos": [{"content": "Answer", "status": "in_progress"}]}
WRITE = tool_call("write_file", {"file_path": "/a.txt", "content": "hi"}, id="w1")


@pytest.fixture(scope="module")
def daphnes(
    production_worker: stacks.Worker, production_llm: FakeOpenAIServer
) -> Iterator[list[Daphne]]:
    env = stacks.process_env(production_llm)
    pair = [Daphne(env) for _ in range(2)]
    try:
        yield pair
    finally:
        for daphne in pair:
            daphne.stop()


@pytest.fixture
async def llm(
    daphnes: list[Daphne], production_llm: FakeOpenAIServer, settings: Any
) -> Any:
    production_llm.reset()
    settings.CHANNEL_LAYERS = {"default": stacks.redis_layer()}
    yield production_llm
    assert await no_active_runs(60), "a turn was still running after the test"


async def drive(scenario: str, daphnes: list[Daphne]) -> dict[str, Any]:
    scope, conversation = await new_conversation()
    token = await sync_to_async(tokens.issue)(scope.user)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "AGUI_URL": daphnes[0].url + "/",
        "AGUI_REJOIN_URL": daphnes[1].url + "/",
        "AGUI_TOKEN": token,
        "AGUI_THREAD": str(conversation.pk),
        "SUPPRESS_TRANSFORMATION_WARNINGS": "true",
    }
    node = await asyncio.create_subprocess_exec(
        "node",
        "drive.mjs",
        scenario,
        cwd=JS,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(node.communicate(), 90)
    assert node.returncode == 0, err.decode()
    result: dict[str, Any] = json.loads(out)
    return result


def texts(messages: list[dict[str, Any]], role: str = "assistant") -> list[str]:
    return [m.get("content") or "" for m in messages if m["role"] == role]


async def test_the_js_client_runs_a_turn(llm: Any, daphnes: list[Daphne]) -> None:
    llm.script(
        reply("Planning.", tool_calls=[tool_call("write_todos", PLAN, id="t1")]),
        reply("Here is the answer.", chunks=4),
    )

    result = await drive("turn", daphnes)

    assert result["outcomes"] == ["success"]
    assert texts(result["messages"]) == ["Planning.", "Here is the answer."]
    assert texts(result["messages"], "user") == ["Plan, then answer"]
    assert [t["content"] for t in result["state"]["todos"]] == ["Answer"]
    assert "TOOL_CALL_RESULT" in result["types"]


async def test_the_js_client_answers_an_approval(
    llm: Any, daphnes: list[Daphne]
) -> None:
    llm.script(reply("Let me write it.", tool_calls=[WRITE]), reply("Written."))

    result = await drive("approval", daphnes)

    assert result["paused"] == ["w1"]
    assert result["outcomes"] == ["interrupt", "success"]
    assert result["pending"] == []
    assert texts(result["messages"])[-1] == "Written."
    tool_results = [m for m in result["messages"] if m["role"] == "tool"]
    assert [m["toolCallId"] for m in tool_results] == ["w1"]


async def test_the_js_client_rejoins_another_process_mid_stream_and_sees_it_once(
    llm: Any, daphnes: list[Daphne]
) -> None:
    llm.script(reply(TEXT, chunks=len(WORDS), delay=0.04))

    result = await drive("reconnect", daphnes)

    assert 40 < result["shownWhenLeaving"] < len(TEXT)  # it left mid-stream
    assert result["outcomes"] == ["success"]
    assert result["types"].count("RUN_STARTED") == 2  # the first run, then the rejoin
    assert texts(result["messages"]) == [TEXT]
    assert texts(result["messages"], "user") == ["Count for me"]
