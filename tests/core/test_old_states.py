"""States serialized before approvals became types still load, read as the new types
and resume.

The fixtures in ``fixtures/`` were written by main at 45e9e85 (before this change):
a HITL pause (two calls waiting, one not), a sub-agent pause (with its conversation
under ``_run``) and a sub-agent paused inside another sub-agent. The agents here are
built exactly as the script that wrote them built theirs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sagents_django.core import (
    Agent,
    Approve,
    ChatModel,
    Edit,
    HITLInterrupt,
    InvalidResume,
    Reject,
    StateSerializer,
    SubAgentInterrupt,
    Tool,
)
from sagents_django.core.middleware.subagent import SubAgent
from sagents_django.core.serialization import deserialize_server_state
from sagents_django.core.subagents import SubAgentConfig
from tests.core import subagent_app
from tests.core.subagent_app import ADD, build_parent
from tests.fakes.openai_server import reply

FIXTURES = Path(__file__).parent / "fixtures"
SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["path"],
}


def load_fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def model(server) -> ChatModel:
    return ChatModel(
        model=server.model,
        params=dict(server.model_params),
        transport="openai",
        max_retries=0,
    )


def hitl_agent(server, calls: list) -> Agent:
    def recorder(name: str):
        def run(args: dict, _ctx: object) -> str:
            calls.append((name, args))
            return f"{name} {args.get('path')}"

        return run

    tools = [
        Tool(name=n, description=n, function=recorder(n), parameters=SCHEMA)
        for n in ("write_file", "delete_file", "read_file")
    ]
    return Agent(
        agent_id="hitl-1",
        model=model(server),
        tools=tools,
        replace_default_middleware=True,
        interrupt_on={
            "write_file": True,
            "delete_file": {"allowed_decisions": ["approve", "reject"]},
            "read_file": False,
        },
    )


def nested_agent(server) -> Agent:
    calculator = SubAgentConfig(
        name="calculator",
        description="Adds with approval.",
        system_prompt="calc",
        tools=[ADD],
        interrupt_on={"add": True},
    )
    manager = SubAgentConfig(
        name="manager",
        description="Delegates to the calculator.",
        system_prompt="mgr",
        middleware=[(SubAgent, {"subagents": [calculator], "general_purpose": False})],
    )
    return Agent(
        agent_id="parent-2",
        model=model(server),
        tools=[ADD],
        replace_default_middleware=True,
        middleware=[(SubAgent, {"subagents": [manager]})],
    )


def restore(agent: Agent, name: str):
    return deserialize_server_state(
        agent.agent_id, load_fixture(name), middleware=agent.middleware
    )


# A HITL pause -------------------------------------------------------------------
def test_an_old_hitl_pause_reads_as_a_hitl_interrupt_with_its_allowed_decisions(
    fake_llm,
):
    state = restore(hitl_agent(fake_llm, []), "hitl_pause_v1.json")

    interrupt = state.interrupt
    assert isinstance(interrupt, HITLInterrupt)
    assert [(r.tool_call_id, r.tool_name) for r in interrupt.action_requests] == [
        ("w1", "write_file"),
        ("d1", "delete_file"),
    ]
    assert interrupt.action_requests[0].arguments == {
        "path": "notes.md",
        "content": "hello",
    }
    # Old states kept the allowed decisions per tool, in review_configs.
    assert [r.allowed_decisions for r in interrupt.action_requests] == [
        ("approve", "edit", "reject"),
        ("approve", "reject"),
    ]
    assert {r.middleware_id for r in interrupt.action_requests} == {None}


def test_an_old_hitl_pause_loads_in_the_current_json_form(fake_llm):
    state = restore(hitl_agent(fake_llm, []), "hitl_pause_v1.json")
    stored = load_fixture("hitl_pause_v1.json")["state"]["interrupt_data"]

    assert "type" not in stored and "allowed_decisions" not in str(
        stored["action_requests"]
    )
    assert state.interrupt_data == state.interrupt.to_dict()
    assert state.interrupt_data["type"] == "hitl"
    assert [
        r["allowed_decisions"] for r in state.interrupt_data["action_requests"]
    ] == [
        ["approve", "edit", "reject"],
        ["approve", "reject"],
    ]
    assert state.interrupt_data["review_configs"] == stored["review_configs"]


def test_interrupt_data_that_cannot_be_read_still_loads_as_stored(fake_llm):
    data = load_fixture("hitl_pause_v1.json")
    data["state"]["interrupt_data"]["action_requests"][0]["tool_call_id"] = 7

    state = deserialize_server_state("hitl-1", data)

    assert state.interrupt_data == data["state"]["interrupt_data"]


async def test_unreadable_interrupt_data_makes_resume_say_what_is_wrong(fake_llm):
    agent = hitl_agent(fake_llm, [])
    data = load_fixture("hitl_pause_v1.json")
    data["state"]["interrupt_data"]["action_requests"][0]["tool_call_id"] = 7
    state = deserialize_server_state(agent.agent_id, data, middleware=agent.middleware)

    with pytest.raises(
        InvalidResume,
        match=r"cannot be read: interrupt_data\.action_requests\[0\]\.tool_call_id "
        "must be a string, not 7",
    ):
        await agent.aresume(state, [Approve(), Approve()])
    assert fake_llm.requests == []


async def test_an_old_hitl_pause_resumes_with_typed_decisions(fake_llm):
    calls: list = []
    agent = hitl_agent(fake_llm, calls)
    state = restore(agent, "hitl_pause_v1.json")
    fake_llm.script(reply("Wrote it, kept old.md."))

    result = await agent.aresume(state, [Approve(), Reject(message="Keep it.")])

    assert result.status == "completed", result.error
    assert sorted(name for name, _ in calls) == ["read_file", "write_file"]
    sent = fake_llm.requests[0]["messages"]
    assert [m.get("tool_call_id") for m in sent if m["role"] == "tool"] == [
        "r1",
        "w1",
        "d1",
    ]
    assert "Keep it." in sent[-1]["content"]
    assert result.state.interrupt_data is None


async def test_an_old_hitl_pause_still_refuses_a_decision_its_tool_did_not_allow(
    fake_llm,
):
    agent = hitl_agent(fake_llm, [])
    state = restore(agent, "hitl_pause_v1.json")
    before = StateSerializer.serialize_state(state)

    with pytest.raises(InvalidResume, match="'edit' is not allowed for 'delete_file'"):
        await agent.aresume(state, [Approve(), Edit(arguments={"path": "x"})])

    assert StateSerializer.serialize_state(state) == before
    assert fake_llm.requests == []


# A sub-agent pause ----------------------------------------------------------------
def test_an_old_subagent_pause_reads_as_a_subagent_interrupt(fake_llm):
    state = restore(build_parent(fake_llm.base_url), "subagent_pause_v1.json")

    interrupt = state.interrupt
    assert isinstance(interrupt, SubAgentInterrupt)
    assert (interrupt.subagent, interrupt.subagent_id, interrupt.tool_call_id) == (
        "calculator",
        "parent-1.sub.task_1",
        "task_1",
    )
    assert isinstance(interrupt.interrupt, HITLInterrupt)
    [request] = interrupt.action_requests
    assert (request.tool_call_id, request.tool_name, request.subagent) == (
        "s1",
        "add",
        "calculator",
    )
    assert request.arguments == {"a": 1, "b": 2}
    # The paused tool result still holds the sub-agent's conversation.
    paused = state.messages[2].tool_results[0]
    assert paused.is_interrupt and "_run" in paused.interrupt_data
    # The state's copy is in the current form: the sub-agent's interrupt nested.
    assert state.interrupt_data["interrupt"]["type"] == "hitl"
    assert "subagent_type" not in state.interrupt_data


async def test_an_old_subagent_pause_resumes_and_the_subagent_finishes(fake_llm):
    subagent_app.CALLS.clear()
    parent = build_parent(fake_llm.base_url)
    state = restore(parent, "subagent_pause_v1.json")
    fake_llm.script(reply("It is 3."), reply("The calculator says 3."))

    result = await parent.aresume(state, [{"type": "approve"}])

    assert result.status == "completed", result.error
    assert subagent_app.CALLS == [{"a": 1, "b": 2}]
    task_result = result.state.messages[2].tool_results[0]
    assert (task_result.content, task_result.is_interrupt) == ("It is 3.", False)
    assert result.last_message.text == "The calculator says 3."


# A sub-agent paused inside a sub-agent --------------------------------------------
def test_an_old_nested_subagent_pause_reads_as_the_outer_subagent_interrupt(
    fake_llm,
):
    state = restore(nested_agent(fake_llm), "nested_subagent_pause_v1.json")

    interrupt = state.interrupt
    assert isinstance(interrupt, SubAgentInterrupt)
    assert (interrupt.subagent, interrupt.tool_call_id) == ("manager", "task_outer")
    # The old form flattened the inner pause: its requests carry the outer name.
    assert [(r.tool_call_id, r.subagent) for r in interrupt.action_requests] == [
        ("s1", "manager")
    ]


async def test_an_old_nested_subagent_pause_resumes_through_both_levels(fake_llm):
    subagent_app.CALLS.clear()
    agent = nested_agent(fake_llm)
    state = restore(agent, "nested_subagent_pause_v1.json")
    fake_llm.script(reply("3"), reply("The calculator got 3."), reply("Done: 3."))

    result = await agent.aresume(state, [Approve()])

    assert result.status == "completed", result.error
    assert subagent_app.CALLS == [{"a": 1, "b": 2}]
    assert result.state.messages[2].tool_results[0].content == "The calculator got 3."
    assert result.last_message.text == "Done: 3."
    assert len(fake_llm.requests) == 3
