"""SubAgent: delegation through the task tool, pauses that survive restarts, progress."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sagents_django.core import Agent, InvalidResume, StateSerializer, Tool
from sagents_django.core.middleware.subagent import SubAgent
from sagents_django.core.serialization import deserialize_server_state
from sagents_django.core.subagents import SubAgentConfig
from tests.core import subagent_app
from tests.core.subagent_app import ADD, build_parent
from tests.fakes.openai_server import fault, reply, tool_call

ROOT = Path(__file__).resolve().parents[2]
HITL_ID = "sagents_django.core.middleware.human_in_the_loop.HumanInTheLoop"


def task_call(subagent_type: str, instructions: str, call_id: str = "task_1"):
    return tool_call(
        "task",
        {"instructions": instructions, "subagent_type": subagent_type},
        id=call_id,
    )


def events_into(sink: list):
    return {"on_agent_event": lambda ex, name, data: sink.append((name, data))}


async def test_a_general_purpose_subagent_completes_and_the_parent_sees_only_its_answer(
    fake_llm, transport
):
    fake_llm.script(
        reply(tool_calls=[task_call("general-purpose", "Add 2 and 3.")]),
        reply(tool_calls=[tool_call("add", {"a": 2, "b": 3}, id="sub_add")]),
        reply("The sum is 5.", chunks=2),
        reply("My sub-agent says 5."),
    )
    seen: list = []
    parent = build_parent(fake_llm.base_url, transport)
    result = await parent.aexecute(["What is 2+3?"], callbacks=[events_into(seen)])
    assert result.status == "completed", result.error
    task_result = result.state.messages[2].tool_results[0]
    assert (task_result.name, task_result.content) == ("task", "The sum is 5.")
    # The parent's history holds none of the sub-agent's inner work.
    assert [m.role for m in result.state.messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    # The sub-agent inherited the parent's tools but not the task tool itself.
    sub_tools = [t["function"]["name"] for t in fake_llm.requests[1]["tools"]]
    assert sub_tools == ["add"]
    assert fake_llm.requests[1]["messages"][-1] == {
        "role": "user",
        "content": "Add 2 and 3.",
    }
    # Its progress is published tagged with the sub-agent and the task call.
    tagged = [d for n, d in seen if n == "subagent_event"]
    assert {d["subagent"] for d in tagged} == {"general-purpose"}
    assert {d["task_call_id"] for d in tagged} == {"task_1"}
    kinds = [d["event"] for d in tagged]
    assert "llm_deltas" in kinds and "llm_message" in kinds
    updates = [
        d["data"]["status"] for d in tagged if d["event"] == "tool_execution_update"
    ]
    assert updates == ["executing", "completed"]


async def test_a_failing_subagent_becomes_an_error_result_for_the_parent(
    fake_llm, transport
):
    fake_llm.script(
        reply(tool_calls=[task_call("general-purpose", "Do it.")]),
        fault.http(400),
        reply("The sub-agent failed, sorry."),
    )
    result = await build_parent(fake_llm.base_url, transport).aexecute(["Go"])
    assert result.status == "completed", result.error
    task_result = result.state.messages[2].tool_results[0]
    assert task_result.is_error
    assert "failed" in task_result.content and "400" in task_result.content


async def test_progress_events_are_hidden_with_show_progress_false(fake_llm, transport):
    fake_llm.script(
        reply(tool_calls=[task_call("general-purpose", "Say hi.")]),
        reply("hi"),
        reply("done"),
    )
    seen: list = []
    parent = build_parent(fake_llm.base_url, transport, show_progress=False)
    result = await parent.aexecute(["Go"], callbacks=[events_into(seen)])
    assert result.status == "completed", result.error
    assert [n for n, _ in seen if n == "subagent_event"] == []


async def test_block_middleware_is_not_inherited_by_general_purpose(
    fake_llm, transport
):
    from sagents_django.core import Middleware

    class Marker(Middleware):
        def system_prompt(self):
            return "MARKER PROMPT"

    fake_llm.script(
        reply(tool_calls=[task_call("general-purpose", "x")]), reply("y"), reply("z")
    )
    parent = build_parent(fake_llm.base_url, transport, block_middleware=[Marker])
    parent_with_marker = type(parent)(
        agent_id="p2",
        model=parent.model,
        tools=parent.base_tools,
        middleware=[Marker, (SubAgent, {"block_middleware": [Marker]})],
        replace_default_middleware=True,
    )
    result = await parent_with_marker.aexecute(["Go"])
    assert result.status == "completed", result.error
    assert "MARKER PROMPT" in fake_llm.requests[0]["messages"][0]["content"]
    assert "MARKER PROMPT" not in fake_llm.requests[1]["messages"][0]["content"]


async def test_an_unknown_subagent_type_is_an_error_the_model_reads(
    fake_llm, transport
):
    fake_llm.script(reply(tool_calls=[task_call("wizard", "x")]), reply("ok"))
    result = await build_parent(fake_llm.base_url, transport).aexecute(["Go"])
    task_result = result.state.messages[2].tool_results[0]
    assert task_result.is_error and "wizard" in task_result.content


def _resume_in_fresh_interpreter(
    api_base: str, state_json: str, decisions: list
) -> dict:
    script = textwrap.dedent(
        """
        import json, sys
        from tests.core.subagent_app import build_parent, CALLS
        from sagents_django.core import StateSerializer
        from sagents_django.core.serialization import deserialize_server_state
        api_base, state_json, decisions = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
        agent = build_parent(api_base)
        state = deserialize_server_state(
            agent.agent_id, json.loads(state_json), middleware=agent.middleware
        )
        result = agent.resume(state, decisions)
        print(json.dumps({
            "status": result.status,
            "error": result.error,
            "interrupt_data": result.interrupt_data,
            "calls": CALLS,
            "state": StateSerializer.serialize_server_state(result.state),
        }))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, api_base, state_json, json.dumps(decisions)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


async def test_a_subagent_pausing_twice_resumes_across_fresh_interpreters(fake_llm):
    fake_llm.script(
        reply(tool_calls=[task_call("calculator", "Add 1+2, then 3+4.")]),
        reply(tool_calls=[tool_call("add", {"a": 1, "b": 2}, id="s1")]),
        reply(tool_calls=[tool_call("add", {"a": 3, "b": 4}, id="s2")]),
        reply("3 and 7."),
        reply("The calculator found 3 and 7."),
    )
    subagent_app.CALLS.clear()
    parent = build_parent(fake_llm.base_url)
    first = await parent.aexecute(["Add things"])
    assert first.status == "interrupted", first.error
    data = first.interrupt_data
    assert data["type"] == "subagent" and data["subagent"] == "calculator"
    assert data["tool_call_id"] == "task_1"
    assert data["action_requests"] == [
        {
            "tool_call_id": "s1",
            "tool_name": "add",
            "arguments": {"a": 1, "b": 2},
            "allowed_decisions": ["approve", "edit", "reject"],
            "middleware_id": HITL_ID,
            "subagent": "calculator",
            "parameters": subagent_app.ADD.parameters,
            "parameter_order": list(subagent_app.ADD.parameters["properties"]),
        }
    ]
    assert data["interrupt"]["action_requests"][0]["tool_call_id"] == "s1"
    assert "_run" not in data  # the conversation stays with the tool result
    assert subagent_app.CALLS == []

    stored = json.dumps(StateSerializer.serialize_server_state(first.state))
    second = _resume_in_fresh_interpreter(
        fake_llm.base_url, stored, [{"type": "approve"}]
    )
    assert second["status"] == "interrupted", second["error"]
    assert second["interrupt_data"]["action_requests"][0]["tool_call_id"] == "s2"
    assert second["calls"] == [{"a": 1, "b": 2}]

    third = _resume_in_fresh_interpreter(
        fake_llm.base_url, json.dumps(second["state"]), [{"type": "approve"}]
    )
    assert third["status"] == "completed", third["error"]
    assert third["calls"] == [{"a": 3, "b": 4}]
    final = deserialize_server_state("parent-1", third["state"])
    task_result = final.messages[2].tool_results[0]
    assert task_result.content == "3 and 7." and not task_result.is_interrupt
    assert final.messages[-1].text == "The calculator found 3 and 7."
    assert final.interrupt_data is None


async def test_bad_decisions_for_a_subagent_leave_the_parent_state_unchanged(fake_llm):
    fake_llm.script(
        reply(tool_calls=[task_call("calculator", "Add 1+2.")]),
        reply(tool_calls=[tool_call("add", {"a": 1, "b": 2}, id="s1")]),
    )
    parent = build_parent(fake_llm.base_url)
    first = await parent.aexecute(["Add"])
    before = StateSerializer.serialize_state(first.state)
    requests = len(fake_llm.requests)
    with pytest.raises(InvalidResume, match="Expected 1 decision"):
        await parent.aresume(first.state, [{"type": "approve"}, {"type": "approve"}])
    with pytest.raises(InvalidResume, match=r"decisions\[0\]\.arguments is required"):
        await parent.aresume(first.state, [{"type": "edit"}])
    assert StateSerializer.serialize_state(first.state) == before
    assert len(fake_llm.requests) == requests


async def test_a_subagent_pause_without_its_middleware_is_demoted_on_load(fake_llm):
    fake_llm.script(
        reply(tool_calls=[task_call("calculator", "Add 1+2.")]),
        reply(tool_calls=[tool_call("add", {"a": 1, "b": 2}, id="s1")]),
    )
    parent = build_parent(fake_llm.base_url)
    first = await parent.aexecute(["Add"])
    stored = StateSerializer.serialize_server_state(first.state)
    loaded = deserialize_server_state("parent-1", stored, middleware=[])
    result = loaded.messages[2].tool_results[0]
    assert result.is_error and not result.is_interrupt
    assert loaded.interrupt_data is None


async def test_state_updates_of_the_batch_survive_a_subagent_pause(fake_llm):
    from sagents_django.core import Tool

    note = Tool(
        name="note",
        description="Note something.",
        function=lambda args, ctx: ("noted", {"metadata": {"noted": args["text"]}}),
        parameters={"type": "object", "properties": {"text": {"type": "string"}}},
    )
    fake_llm.script(
        reply(
            tool_calls=[
                tool_call("note", {"text": "remember me"}, id="n1"),
                task_call("calculator", "Add 1+2."),
            ]
        ),
        reply(tool_calls=[tool_call("add", {"a": 1, "b": 2}, id="s1")]),
    )
    parent = build_parent(fake_llm.base_url)
    parent = type(parent)(
        agent_id="parent-1",
        model=parent.model,
        tools=[*parent.base_tools, note],
        middleware=[entry.to_raw_spec() for entry in parent.middleware],
        replace_default_middleware=True,
    )
    first = await parent.aexecute(["Note and add"])
    assert first.status == "interrupted", first.error
    assert first.state.metadata == {"noted": "remember me"}


# A sub-agent's own budget and until_tool (Sagents v0.14.3) ---------------------------
NOTE = Tool(
    name="note",
    description="Note something down.",
    function=lambda args, ctx: "noted",
    parameters={"type": "object", "properties": {}},
)
SUBMIT = Tool(
    name="submit",
    description="Submit the final answer.",
    function=lambda args, ctx: f"Final: {args['answer']}",
    parameters={
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
    },
)


def parent_with(api_base: str, *configs: SubAgentConfig) -> Agent:
    template = build_parent(api_base)
    return Agent(
        agent_id="parent-1",
        model=template.model,
        middleware=[(SubAgent, {"subagents": list(configs)})],
        replace_default_middleware=True,
    )


async def test_a_subagent_keeps_its_own_max_runs(fake_llm):
    looper = SubAgentConfig(
        name="looper", description="Loops.", tools=[NOTE], max_runs=2
    )
    fake_llm.script(
        reply(tool_calls=[task_call("looper", "Take notes.")]),
        reply(tool_calls=[tool_call("note", {}, id="n1")]),
        reply(tool_calls=[tool_call("note", {}, id="n2")]),
        reply("The looper ran out of steps."),
    )
    parent = parent_with(fake_llm.base_url, looper)
    assert parent.max_runs == 50

    result = await parent.aexecute(["Go"])

    assert result.status == "completed", result.error
    task_result = result.state.messages[2].tool_results[0]
    assert task_result.is_error
    assert "max_runs (2 model calls" in task_result.content
    assert len(fake_llm.requests) == 4  # parent, 2 sub-agent calls, parent


async def test_a_subagent_stops_at_its_own_until_tool_and_answers_with_its_result(
    fake_llm,
):
    reporter = SubAgentConfig(
        name="reporter",
        description="Reports through submit.",
        tools=[NOTE, SUBMIT],
        until_tool="submit",
        max_runs=1,
    )
    fake_llm.script(
        reply(tool_calls=[task_call("reporter", "Report 42.")]),
        reply(tool_calls=[tool_call("submit", {"answer": "42"}, id="s1")]),
        reply("The reporter says 42."),
    )

    result = await parent_with(fake_llm.base_url, reporter).aexecute(["Go"])

    assert result.status == "completed", result.error
    # The last permitted response's until_tool call ran and ended the sub-agent.
    assert result.state.messages[2].tool_results[0].content == "Final: 42"
    assert len(fake_llm.requests) == 3


async def test_a_resumed_subagent_is_rebuilt_with_its_own_max_runs(fake_llm):
    careful = SubAgentConfig(
        name="careful",
        description="Asks before adding.",
        tools=[ADD, NOTE],
        interrupt_on={"add": True},
        max_runs=1,
    )
    fake_llm.script(
        reply(tool_calls=[task_call("careful", "Add 1+2.")]),
        reply(tool_calls=[tool_call("add", {"a": 1, "b": 2}, id="a1")]),
    )
    parent = parent_with(fake_llm.base_url, careful)
    paused = await parent.aexecute(["Go"])
    assert paused.status == "interrupted", paused.error

    fake_llm.script(
        reply(tool_calls=[tool_call("note", {}, id="n1")]),
        reply("Careful ran out of steps."),
    )
    stored = json.loads(
        json.dumps(StateSerializer.serialize_server_state(paused.state))
    )
    fresh = parent_with(fake_llm.base_url, careful)
    state = deserialize_server_state(
        fresh.agent_id, stored, middleware=fresh.middleware
    )
    result = await fresh.aresume(state, [{"type": "approve"}])

    assert result.status == "completed", result.error
    task_result = result.state.messages[2].tool_results[0]
    assert task_result.is_error and "max_runs (1 model calls" in task_result.content
    assert len(fake_llm.requests) == 4
