"""Tool results that expand into messages (Sagents v0.14.2): the model reads the
material on its very next call, after all of the batch's results; the result itself
is the short summary; expanded messages stay in the state, marked, with no callbacks
and no display rows; approved tools expand on resume; a turn that ends right after its
tools does not expand."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sagents_django.core import (
    Agent,
    ContentPart,
    Message,
    Middleware,
    Resume,
    StateSerializer,
    Tool,
    ToolCall,
    ToolOutput,
    ToolResult,
    extract_display_items,
)
from sagents_django.core.serialization import deserialize_server_state
from sagents_django.core.testing import ScriptedModel
from tests.fakes.openai_server import reply, tool_call

PIXEL = "iVBORw0KGgo="


def chart_tool(*, messages: list | None = None, update: Any = None) -> Tool:
    def load(args: dict, _ctx: object) -> ToolOutput:
        return ToolOutput(
            summary=f"Loaded {args['name']}",
            messages=messages
            if messages is not None
            else [
                Message.user(
                    [
                        ContentPart.text(f"The chart {args['name']}:"),
                        ContentPart.image(PIXEL, media="image/png"),
                    ]
                )
            ],
            update=update,
        )

    return Tool(
        name="load_chart",
        description="Load a chart for you to look at.",
        function=load,
        parameters={"type": "object", "properties": {"name": {"type": "string"}}},
    )


def note_tool() -> Tool:
    return Tool(name="note", description="Note.", function=lambda args, ctx: "noted")


def calls(*specs: tuple[str, dict, str]) -> Message:
    return Message.assistant(
        tool_calls=[ToolCall(call_id=i, name=n, arguments=a) for n, a, i in specs]
    )


def scripted(replies: list, tools: list[Tool], **options: Any):
    model = ScriptedModel(replies)
    agent = Agent(replace_default_middleware=True, model=model, tools=tools, **options)
    return agent, model


def roles(request) -> list[str]:
    return [m["role"] for m in request.messages]


# The model reads the material on its next call ----------------------------------------
async def test_the_model_reads_the_material_on_its_next_call_and_the_result_is_the_summary(
    chat_model, fake_llm
):
    fake_llm.script(
        reply(tool_calls=[tool_call("load_chart", {"name": "sales.png"}, id="c1")]),
        reply("Sales went up."),
    )
    agent = Agent(
        replace_default_middleware=True, model=chat_model, tools=[chart_tool()]
    )

    result = await agent.aexecute(["How are sales?"])

    assert result.status == "completed", result.error
    sent = fake_llm.requests[1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
    assert sent[2] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "Loaded sales.png",
    }
    assert sent[3]["content"][0] == {"type": "text", "text": "The chart sales.png:"}
    assert sent[3]["content"][1]["type"] == "image_url"
    assert PIXEL in sent[3]["content"][1]["image_url"]["url"]
    # Kept in the state, marked, after the results; the result no longer holds it.
    expanded = result.state.messages[3]
    assert expanded.role == "user" and expanded.expanded_from == "c1"
    assert result.state.messages[2].tool_results[0].expand_messages == []
    assert result.last_message.text == "Sales went up."


async def test_expanded_messages_follow_all_results_of_the_batch():
    agent, model = scripted(
        [
            calls(("load_chart", {"name": "a"}, "c1"), ("note", {}, "c2")),
            "Seen.",
        ],
        [chart_tool(), note_tool()],
    )

    await agent.aexecute(["Look"])

    assert roles(model.requests[1]) == ["user", "assistant", "tool", "tool", "user"]
    assert [m.get("tool_call_id") for m in model.requests[1].messages[2:4]] == [
        "c1",
        "c2",
    ]


async def test_strings_become_user_messages_and_a_system_message_is_allowed():
    material = ["Plain text material.", Message.system("Treat the chart as private.")]
    agent, model = scripted(
        [calls(("load_chart", {"name": "a"}, "c1")), "ok"],
        [chart_tool(messages=material)],
    )

    await agent.aexecute(["Look"])

    tail = model.requests[1].messages[-2:]
    assert tail == [
        {"role": "user", "content": "Plain text material."},
        {"role": "system", "content": "Treat the chart as private."},
    ]


async def test_a_tool_output_may_carry_a_state_update_too():
    agent, _ = scripted(
        [calls(("load_chart", {"name": "a"}, "c1")), "ok"],
        [chart_tool(update={"metadata": {"chart": "a"}})],
    )

    result = await agent.aexecute(["Look"])

    assert result.state.metadata == {"chart": "a"}


# Nobody else sees them ---------------------------------------------------------------
async def test_expanded_messages_fire_no_callback_and_give_no_display_items():
    seen: list[Message] = []
    record = {
        key: (lambda ex, message: seen.append(message))
        for key in (
            "on_message_processed",
            "on_llm_new_message",
            "on_tool_response_created",
        )
    }
    agent, _ = scripted(
        [calls(("load_chart", {"name": "a"}, "c1")), "ok"], [chart_tool()]
    )

    result = await agent.aexecute(["Look"], callbacks=[record])

    expanded = [m for m in result.state.messages if m.expanded_from]
    assert len(expanded) == 1
    assert all(m.expanded_from is None for m in seen)
    assert extract_display_items(expanded[0]) == []
    assert extract_display_items(Message.user("Look")) != []


# Approvals, until_tool, pauses ----------------------------------------------------
async def test_an_approved_tool_expands_on_resume():
    agent, model = scripted(
        [calls(("load_chart", {"name": "a"}, "c1")), "I see it."],
        [chart_tool()],
        interrupt_on={"load_chart": True},
    )
    paused = await agent.aexecute(["Look"])
    assert paused.status == "interrupted"

    final = await agent.aresume(paused.state, [{"type": "approve"}])

    assert final.status == "completed", final.error
    assert roles(model.requests[1]) == ["user", "assistant", "tool", "user"]
    assert final.state.messages[3].expanded_from == "c1"


async def test_a_turn_ended_by_until_tool_does_not_expand_and_the_next_turn_drops_it():
    agent, model = scripted(
        [calls(("load_chart", {"name": "a"}, "c1")), "Next answer."], [chart_tool()]
    )

    first = await agent.aexecute(["Look"], until_tool="load_chart")

    assert first.status == "completed", first.error
    assert [m.role for m in first.state.messages] == ["user", "assistant", "tool"]
    assert len(first.state.messages[2].tool_results[0].expand_messages) == 1

    second = await agent.aexecute(first.state.add_message(Message.user("And now?")))

    assert roles(model.requests[1]) == ["user", "assistant", "tool", "user"]
    assert model.requests[1].messages[-1] == {"role": "user", "content": "And now?"}
    assert second.state.messages[2].tool_results[0].expand_messages == []
    assert not any(m.expanded_from for m in second.state.messages)


class AskLater(Middleware):
    """A tool of the batch pauses; resuming answers it (and survives a restart)."""

    def restorable_interrupt(self, interrupt_data: dict) -> bool:
        return interrupt_data.get("type") == "ask"

    def handle_resume(self, agent, state, resume_data, **options):
        if (state.interrupt_data or {}).get("type") != "ask":
            return None
        call_id = state.interrupt_data["tool_call_id"]
        answered = ToolResult(tool_call_id=call_id, name="ask", content=resume_data)
        return Resume(state=state.replace_tool_result(call_id, answered))


def ask_tool() -> Tool:
    return Tool(
        name="ask",
        description="Ask the person.",
        function=lambda args, ctx: ToolResult(
            tool_call_id="",
            name="",
            content="Waiting for the person.",
            is_interrupt=True,
            interrupt_data={"type": "ask"},
        ),
    )


async def test_a_pause_in_the_same_batch_keeps_the_material_for_the_resume():
    replies = [calls(("load_chart", {"name": "a"}, "c1"), ("ask", {}, "c2")), "Both."]
    agent, model = scripted(replies, [chart_tool(), ask_tool()], middleware=[AskLater])

    paused = await agent.aexecute(["Look and ask"])
    assert paused.status == "interrupted", paused.error
    assert not any(m.expanded_from for m in paused.state.messages)

    # Stored and restored by a fresh agent, as across a restart.
    stored = json.loads(
        json.dumps(StateSerializer.serialize_server_state(paused.state))
    )
    fresh, fresh_model = scripted(
        ["Both."], [chart_tool(), ask_tool()], middleware=[AskLater]
    )
    restored = deserialize_server_state(
        fresh.agent_id, stored, middleware=fresh.middleware
    )
    assert len(restored.messages[2].tool_results[0].expand_messages) == 1

    final = await fresh.aresume(restored, "blue")

    assert final.status == "completed", final.error
    assert roles(fresh_model.requests[0]) == [
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
    ]
    assert fresh_model.requests[0].messages[3]["content"] == "blue"
    assert final.state.messages[3].expanded_from == "c1"
    assert len(model.requests) == 1


# Bad material ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("material", "problem"),
    [
        pytest.param(
            [Message.tool([ToolResult(tool_call_id="x", name="y")])],
            "messages[0] has role 'tool'",
            id="tool-role",
        ),
        pytest.param(
            [calls(("note", {}, "zz"))],
            "messages[0] must not carry tool calls or results",
            id="assistant-with-calls",
        ),
        pytest.param([42], "messages[0] must be a Message or a string", id="number"),
        pytest.param("text", "messages must be a list, not str", id="not-a-list"),
    ],
)
async def test_bad_material_is_an_error_result_the_model_reads(material, problem):
    agent, model = scripted(
        [calls(("load_chart", {"name": "a"}, "c1")), "Sorry."],
        [chart_tool(messages=material)],
    )

    result = await agent.aexecute(["Look"])

    tool_result = result.state.messages[2].tool_results[0]
    assert tool_result.is_error and problem in tool_result.content
    assert roles(model.requests[1]) == ["user", "assistant", "tool"]


async def test_a_tool_result_with_bad_expand_messages_is_an_error_result():
    bad = Tool(
        name="load_chart",
        description="x",
        function=lambda args, ctx: ToolResult(
            tool_call_id="", name="", content="ok", expand_messages=["fine", 3]
        ),
    )
    agent, _ = scripted([calls(("load_chart", {}, "c1")), "Sorry."], [bad])

    result = await agent.aexecute(["Look"])

    tool_result = result.state.messages[2].tool_results[0]
    assert tool_result.is_error and "messages[1]" in tool_result.content


def test_pending_material_survives_the_stored_form_of_a_result():
    result = ToolResult(
        tool_call_id="c1",
        name="load_chart",
        content="Loaded",
        expand_messages=[Message.user("material")],
    )
    data = json.loads(json.dumps(result.to_dict()))
    assert data["expand_messages"] == [
        {"role": "user", "content": [{"type": "text", "content": "material"}]}
    ]
    assert ToolResult.from_dict(data) == result
    assert "expand_messages" not in ToolResult(tool_call_id="c", name="n").to_dict()
