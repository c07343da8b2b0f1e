"""MCP tools in agents' turns, on the fake provider: approval by name and resume,
Stop during a call, a list that changed between the model's call and its
execution, a sub-agent's tool list, the journal's idempotency."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from sagents_django.core import (
    Agent,
    CancelToken,
    State,
    SubAgent,
    SubAgentConfig,
    ToolCall,
    ToolContext,
)
from sagents_django.core.journal import is_idempotent
from sagents_django.core.tools import execute_tool_call
from sagents_django.mcp import amcp_tools
from tests.fakes.openai_server import reply, tool_call
from tests.mcp.conftest import stdio
from tests.mcp.helpers import eventually


def tool_texts(state: State) -> list[str]:
    return [r.text for m in state.messages for r in m.tool_results]


async def test_an_mcp_tool_waits_for_approval_by_name_then_runs(
    use_servers: Any, fake_llm: Any, chat_model: Any
) -> None:
    use_servers(notes=stdio())
    fake_llm.script(
        reply(
            tool_calls=[tool_call("notes__write_file", {"path": "a", "content": "hi"})]
        ),
        reply(tool_calls=[tool_call("notes__delete_note", {"path": "a"}, id="d1")]),
        reply("Deleted."),
    )
    agent = Agent(
        model=chat_model,
        tools=await amcp_tools(None),
        interrupt_on={"notes__delete_note": True},
        replace_default_middleware=True,
    )

    paused = await agent.aexecute([{"role": "user", "content": "note, then delete"}])

    assert paused.status == "interrupted"
    (request,) = paused.interrupt_data["action_requests"]
    assert request["tool_name"] == "notes__delete_note"
    assert tool_texts(paused.state) == ["noted a (2 characters)"]

    done = await agent.aresume(paused.state, [{"type": "approve"}])

    assert done.status == "completed"
    assert tool_texts(done.state)[-1] == "deleted a"


async def test_stop_during_a_call_cancels_it_on_the_server(
    use_servers: Any, fake_llm: Any, chat_model: Any, markers: Path
) -> None:
    use_servers(notes=stdio())
    fake_llm.script(reply(tool_calls=[tool_call("notes__hang", {"marker": "stop"})]))
    agent = Agent(
        model=chat_model, tools=await amcp_tools(None), replace_default_middleware=True
    )
    token = CancelToken()

    async def press_stop() -> None:  # once the server runs the call
        assert await eventually(lambda: (markers / "stop.started").exists())
        token.cancel("Stop pressed")

    stop = asyncio.ensure_future(press_stop())
    result = await agent.aexecute([{"role": "user", "content": "hang"}], cancel=token)
    await stop

    assert result.status == "cancelled"
    assert await eventually(lambda: (markers / "stop").exists())


async def test_a_tool_gone_between_the_models_call_and_its_execution_is_an_error(
    use_servers: Any, fake_llm: Any, chat_model: Any
) -> None:
    use_servers(notes=stdio())
    tools = await amcp_tools(None)
    agent = Agent(model=chat_model, tools=tools, replace_default_middleware=True)
    fake_llm.script(
        reply(tool_calls=[tool_call("notes__echo", {"text": "hi"})]),
        reply("It is gone."),
    )
    # The agent offered echo; the server drops it before the call runs.
    retire = ToolCall(call_id="r", name="notes__retire", arguments={"name": "echo"})
    context = ToolContext(state=State(), agent_id="x", tool_call=retire)
    await execute_tool_call(retire, agent.tools_by_name, context)

    result = await agent.aexecute([{"role": "user", "content": "echo hi"}])

    assert result.status == "completed"
    (text,) = tool_texts(result.state)
    assert text == (
        "MCP server 'notes' no longer offers the tool 'echo'; use another tool."
    )


async def test_a_subagent_calls_the_mcp_tools_it_is_given(
    use_servers: Any, fake_llm: Any, chat_model: Any
) -> None:
    use_servers(notes=stdio(tools=["echo"]))
    helper = SubAgentConfig(
        name="helper", description="Echoes.", tools=await amcp_tools(None)
    )
    fake_llm.script(
        reply(
            tool_calls=[
                tool_call(
                    "task",
                    {"instructions": "echo hi", "subagent_type": "helper"},
                    id="t1",
                )
            ]
        ),
        reply(tool_calls=[tool_call("notes__echo", {"text": "from the helper"})]),
        reply("The helper echoed."),
        reply("Done."),
    )
    agent = Agent(
        model=chat_model,
        middleware=[(SubAgent, {"subagents": [helper]})],
        replace_default_middleware=True,
    )

    result = await agent.aexecute([{"role": "user", "content": "delegate"}])

    assert result.status == "completed"
    sub_request = fake_llm.requests[1].messages
    offered = {t["function"]["name"] for t in fake_llm.requests[1]["tools"]}
    assert offered == {"notes__echo"}
    assert sub_request[-1]["role"] == "user"
    assert fake_llm.requests[2].messages[-1]["content"] == "from the helper"


async def test_only_tools_the_server_calls_idempotent_run_again_after_a_crash(
    use_servers: Any,
) -> None:
    use_servers(notes=stdio())
    tools = {t.name: t for t in await amcp_tools(None)}

    assert is_idempotent(tools["notes__echo"])
    assert not is_idempotent(tools["notes__write_file"])
    assert not is_idempotent(tools["notes__hang"])
