"""A tool queues a message for the turn after this one (upstream Sagents v0.10's
``queue_message_from_tool``): it is not added to this turn, it comes back in
``AgentResult.queued_messages``; a sub-agent's tools queue for the parent's turn."""

from __future__ import annotations

from typing import Any

import pytest

from sagents_django.core import (
    Agent,
    ConfigurationError,
    Message,
    Tool,
    ToolCall,
)
from sagents_django.core.middleware.subagent import SubAgent
from sagents_django.core.subagents import SubAgentConfig
from sagents_django.core.testing import ScriptedModel
from sagents_django.core.tools import ToolContext


def playbook_tool(*, display: bool = False, sync: bool = True) -> Tool:
    def load(args: dict[str, Any], ctx: ToolContext) -> str:
        ctx.queue_message(f"PLAYBOOK {args.get('name', '')}".strip(), display=display)
        return "The playbook comes next."

    async def aload(args: dict[str, Any], ctx: ToolContext) -> str:
        return load(args, ctx)

    return Tool(
        name="playbook",
        description="Load a playbook to follow next.",
        function=load if sync else aload,
    )


def call(tool: str, call_id: str = "c1", **arguments: Any) -> Message:
    return Message.assistant(
        tool_calls=[ToolCall(call_id=call_id, name=tool, arguments=arguments)]
    )


@pytest.mark.parametrize("sync", [True, False])
async def test_a_queued_message_is_returned_not_added_to_the_turn(sync: bool) -> None:
    model = ScriptedModel([call("playbook", name="refunds"), Message.assistant("OK.")])
    agent = Agent(
        replace_default_middleware=True, model=model, tools=[playbook_tool(sync=sync)]
    )

    result = await agent.aexecute(["Help with a refund"])

    assert result.status == "completed"
    [queued] = result.queued_messages
    assert queued.message.role == "user" and queued.message.text == "PLAYBOOK refunds"
    assert (queued.display, queued.tool_name, queued.call_id) == (
        False,
        "playbook",
        "c1",
    )
    # The turn itself never read it.
    texts = [m.text for m in result.state.messages]
    assert "PLAYBOOK refunds" not in texts
    assert all("PLAYBOOK" not in str(r.messages) for r in model.requests)


async def test_a_subagents_tool_queues_for_the_parents_turn() -> None:
    helper = SubAgentConfig(
        name="helper",
        description="Finds playbooks.",
        system_prompt="You find playbooks.",
        tools=[playbook_tool(display=True)],
    )
    model = ScriptedModel(
        [
            Message.assistant(
                tool_calls=[
                    ToolCall(
                        call_id="t1",
                        name="task",
                        arguments={"subagent_type": "helper", "instructions": "find"},
                    )
                ]
            ),
            call("playbook", call_id="inner", name="returns"),
            Message.assistant("Found it."),
            Message.assistant("Done."),
        ]
    )
    agent = Agent(
        replace_default_middleware=True,
        model=model,
        middleware=[(SubAgent, {"subagents": [helper]})],
    )

    result = await agent.aexecute(["Go"])

    assert result.status == "completed", result.error
    [queued] = result.queued_messages
    assert (queued.message.text, queued.display, queued.call_id) == (
        "PLAYBOOK returns",
        True,
        "inner",
    )


@pytest.mark.parametrize(
    "bad",
    [
        Message.assistant("not a person's message"),
        Message(role="user"),
        42,
    ],
)
async def test_a_bad_queued_message_is_the_tools_error(bad: Any) -> None:
    def load(_args: dict[str, Any], ctx: ToolContext) -> str:
        ctx.queue_message(bad)
        return "never"

    tool = Tool(name="bad", description="Queues nonsense.", function=load)
    model = ScriptedModel([call("bad"), Message.assistant("OK.")])
    agent = Agent(replace_default_middleware=True, model=model, tools=[tool])

    result = await agent.aexecute(["Go"])

    assert result.queued_messages == []
    [answer] = result.state.messages[2].tool_results
    assert answer.is_error and "queue_message" in answer.text


def test_queue_message_outside_a_turn_is_a_configuration_error() -> None:
    context = ToolContext(state=None, agent_id=None)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="running turn"):
        context.queue_message("hello")
