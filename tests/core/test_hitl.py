"""HumanInTheLoop through the fake provider: the interrupt's shape, each decision,
mixed and repeated interrupts, bad configuration, bad decisions, and an interrupt that
survives serialization.

Every test runs through litellm and through the lean httpx transport.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from sagents_django.core import (
    Agent,
    ConfigurationError,
    HumanInTheLoop,
    InvalidResume,
    Message,
    StateSerializer,
    Tool,
)
from tests.fakes.openai_server import reply, tool_call

WRITE_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["path"],
}
PATH_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
}
HITL_ID = "sagents_django.core.middleware.human_in_the_loop.HumanInTheLoop"
INTERRUPT_ON = {
    "write_file": True,
    "delete_file": {"allowed_decisions": ["approve", "reject"]},
    "read_file": False,
}


class FileTools:
    """Three file tools that record every call they receive."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []

    def _record(self, name: str, text: str):
        def function(args: dict, _ctx: object) -> str:
            self.calls.append((name, dict(args)))
            return text.format(**args)

        return function

    def tools(self) -> list[Tool]:
        return [
            Tool(
                name="write_file",
                description="Write a file.",
                function=self._record("write_file", "Wrote {path}"),
                parameters=WRITE_SCHEMA,
            ),
            Tool(
                name="delete_file",
                description="Delete a file.",
                function=self._record("delete_file", "Deleted {path}"),
                parameters=PATH_SCHEMA,
            ),
            Tool(
                name="read_file",
                description="Read a file.",
                function=self._record("read_file", "Contents of {path}"),
                parameters=PATH_SCHEMA,
            ),
        ]


@pytest.fixture
def files() -> FileTools:
    return FileTools()


@pytest.fixture
def agent(chat_model, files) -> Agent:
    return Agent(
        replace_default_middleware=True,
        model=chat_model,
        tools=files.tools(),
        interrupt_on=INTERRUPT_ON,
    )


def write_call(path: str = "notes.md", content: str = "hello", id: str = "w1"):
    return tool_call("write_file", {"path": path, "content": content}, id=id)


async def interrupted(agent: Agent, fake_llm, *calls, then=("Done.",)) -> Any:
    """Script a response with ``calls`` (then the given replies) and run to the pause."""
    fake_llm.script(reply(tool_calls=list(calls)), *(reply(text) for text in then))
    result = await agent.aexecute(["Do the file work"])
    assert result.status == "interrupted", result.error
    return result


# The interrupt ----------------------------------------------------------------------
async def test_the_interrupt_names_each_call_that_needs_a_decision_and_its_options(
    agent, files, fake_llm
):
    result = await interrupted(
        agent,
        fake_llm,
        write_call(),
        tool_call("delete_file", {"path": "old.md"}, id="d1"),
    )

    expected = {
        "type": "hitl",
        "action_requests": [
            {
                "tool_call_id": "w1",
                "tool_name": "write_file",
                "arguments": {"path": "notes.md", "content": "hello"},
                "allowed_decisions": ["approve", "edit", "reject"],
                "middleware_id": HITL_ID,
                "parameters": WRITE_SCHEMA,  # the tool's schema, for the forms
                "parameter_order": list(WRITE_SCHEMA["properties"]),
            },
            {
                "tool_call_id": "d1",
                "tool_name": "delete_file",
                "arguments": {"path": "old.md"},
                "allowed_decisions": ["approve", "reject"],
                "middleware_id": HITL_ID,
                "parameters": PATH_SCHEMA,
                "parameter_order": list(PATH_SCHEMA["properties"]),
            },
        ],
        "review_configs": {
            "write_file": {"allowed_decisions": ["approve", "edit", "reject"]},
            "delete_file": {"allowed_decisions": ["approve", "reject"]},
        },
        "hitl_tool_call_ids": ["w1", "d1"],
    }
    assert result.interrupt_data == expected
    assert result.state.interrupt_data == expected
    assert files.calls == []
    assert result.last_message.role == "assistant"
    assert len(fake_llm.requests) == 1


async def test_the_interrupt_data_is_json_ready(agent, fake_llm):
    result = await interrupted(agent, fake_llm, write_call())
    assert json.loads(json.dumps(result.interrupt_data)) == result.interrupt_data


# Decisions --------------------------------------------------------------------------
async def test_approve_runs_the_tool_and_the_model_answers(agent, files, fake_llm):
    result = await interrupted(agent, fake_llm, write_call(), then=["Saved it."])

    final = await agent.aresume(result.state, [{"type": "approve"}])

    assert final.status == "completed", final.error
    assert files.calls == [("write_file", {"path": "notes.md", "content": "hello"})]
    assert final.last_message.text == "Saved it."
    assert final.state.interrupt_data is None
    assert len(fake_llm.requests) == 2
    assert fake_llm.requests[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "w1",
        "content": "Wrote notes.md",
    }


async def test_edit_runs_the_tool_with_the_new_arguments_and_history_shows_them(
    agent, files, fake_llm
):
    result = await interrupted(agent, fake_llm, write_call(), then=["Saved."])
    edited = {"path": "safe.md", "content": "hello"}

    final = await agent.aresume(result.state, [{"type": "edit", "arguments": edited}])

    assert final.status == "completed", final.error
    assert files.calls == [("write_file", edited)]
    assistant = final.state.messages[1]
    assert assistant.tool_calls[0].call_id == "w1"
    assert assistant.tool_calls[0].arguments == edited
    # The model is told what actually ran.
    sent_call = fake_llm.requests[1]["messages"][1]["tool_calls"][0]
    assert json.loads(sent_call["function"]["arguments"]) == edited
    assert final.state.messages[2].tool_results[0].content == "Wrote safe.md"
    # The interrupted state the caller kept still shows the original request.
    assert result.state.messages[1].tool_calls[0].arguments["path"] == "notes.md"


async def test_reject_skips_the_tool_and_the_model_reads_a_rejection(
    agent, files, fake_llm
):
    result = await interrupted(agent, fake_llm, write_call(), then=["Understood."])

    final = await agent.aresume(result.state, [{"type": "reject"}])

    assert final.status == "completed", final.error
    assert files.calls == []
    tool_result = final.state.messages[2].tool_results[0]
    assert tool_result.tool_call_id == "w1"
    assert "rejected" in tool_result.content
    sent = fake_llm.requests[1]["messages"][-1]
    assert sent["role"] == "tool" and "rejected" in sent["content"]
    assert final.last_message.text == "Understood."


async def test_only_calls_that_need_approval_are_asked_about_and_all_run_after_it(
    agent, files, fake_llm
):
    result = await interrupted(
        agent,
        fake_llm,
        tool_call("read_file", {"path": "a.md"}, id="r1"),
        write_call(id="w1"),
    )

    requests = result.interrupt_data["action_requests"]
    assert [r["tool_call_id"] for r in requests] == ["w1"]
    assert result.interrupt_data["hitl_tool_call_ids"] == ["w1"]
    # Nothing of the response runs before the decision.
    assert files.calls == []

    final = await agent.aresume(result.state, [{"type": "approve"}])

    assert final.status == "completed", final.error
    assert sorted(name for name, _ in files.calls) == ["read_file", "write_file"]
    results = final.state.messages[2].tool_results
    assert [(r.tool_call_id, r.content) for r in results] == [
        ("r1", "Contents of a.md"),
        ("w1", "Wrote notes.md"),
    ]


async def test_a_rejected_call_does_not_stop_an_auto_approved_call_of_the_same_response(
    agent, files, fake_llm
):
    result = await interrupted(
        agent,
        fake_llm,
        tool_call("read_file", {"path": "a.md"}, id="r1"),
        tool_call("delete_file", {"path": "a.md"}, id="d1"),
    )

    final = await agent.aresume(result.state, [{"type": "reject"}])

    assert final.status == "completed", final.error
    assert files.calls == [("read_file", {"path": "a.md"})]


async def test_each_decision_applies_to_its_own_action_request(agent, files, fake_llm):
    result = await interrupted(
        agent,
        fake_llm,
        write_call(path="one.md", id="w1"),
        write_call(path="two.md", id="w2"),
        tool_call("delete_file", {"path": "three.md"}, id="d1"),
    )

    final = await agent.aresume(
        result.state,
        [
            {"type": "reject"},
            {"type": "edit", "arguments": {"path": "2.md", "content": "x"}},
            {"type": "approve"},
        ],
    )

    assert final.status == "completed", final.error
    assert sorted(files.calls) == [
        ("delete_file", {"path": "three.md"}),
        ("write_file", {"path": "2.md", "content": "x"}),
    ]
    contents = [r.content for r in final.state.messages[2].tool_results]
    assert "rejected" in contents[0]
    assert contents[1:] == ["Wrote 2.md", "Deleted three.md"]


async def test_one_turn_can_pause_for_approval_several_times(agent, files, fake_llm):
    fake_llm.script(
        reply(tool_calls=[write_call(path="a.md", id="w1")]),
        reply(tool_calls=[write_call(path="b.md", id="w2")]),
        reply("Both written."),
    )

    first = await agent.aexecute(["Write two files"])
    assert first.status == "interrupted"
    assert first.interrupt_data["hitl_tool_call_ids"] == ["w1"]

    second = await agent.aresume(first.state, [{"type": "approve"}])
    assert second.status == "interrupted", second.error
    assert second.interrupt_data["hitl_tool_call_ids"] == ["w2"]
    assert [p["path"] for _, p in files.calls] == ["a.md"]

    final = await agent.aresume(second.state, [{"type": "approve"}])
    assert final.status == "completed", final.error
    assert [p["path"] for _, p in files.calls] == ["a.md", "b.md"]
    assert final.last_message.text == "Both written."
    assert len(fake_llm.requests) == 3


async def test_a_tool_configured_false_runs_without_a_pause(agent, files, fake_llm):
    fake_llm.script(
        reply(tool_calls=[tool_call("read_file", {"path": "a.md"})]),
        reply("It says hi."),
    )

    result = await agent.aexecute(["Read a.md"])

    assert result.status == "completed", result.error
    assert files.calls == [("read_file", {"path": "a.md"})]


async def test_an_agent_whose_interrupt_on_is_all_false_never_pauses(
    chat_model, files, fake_llm
):
    agent = Agent(
        replace_default_middleware=True,
        model=chat_model,
        tools=files.tools(),
        interrupt_on={"write_file": False},
    )
    fake_llm.script(reply(tool_calls=[write_call()]), reply("Written."))

    result = await agent.aexecute(["Write"])

    assert result.status == "completed", result.error
    assert files.calls == [("write_file", {"path": "notes.md", "content": "hello"})]


async def test_without_interrupt_on_the_agent_has_no_human_in_the_loop(
    chat_model, files
):
    agent = Agent(
        replace_default_middleware=True, model=chat_model, tools=files.tools()
    )
    assert not any(isinstance(e.middleware, HumanInTheLoop) for e in agent.middleware)


# Configuration ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "value",
    [
        "yes",
        1,
        {},
        {"allowed_decisions": []},
        {"allowed_decisions": ["approve", "maybe"]},
        {"allowed_decisions": "approve"},
        {"decisions": ["approve"]},
    ],
)
def test_a_bad_interrupt_on_value_is_a_configuration_error(chat_model, files, value):
    with pytest.raises(ConfigurationError, match="write_file"):
        Agent(
            replace_default_middleware=True,
            model=chat_model,
            tools=files.tools(),
            interrupt_on={"write_file": value},
        )


# Bad decisions ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("decisions", "problem"),
    [
        pytest.param([], "Expected 1 decision", id="too-few"),
        pytest.param(
            [{"type": "approve"}, {"type": "approve"}], "got 2", id="too-many"
        ),
        pytest.param({"type": "approve"}, "must be a list", id="not-a-list"),
        pytest.param(["approve"], "must be a dict", id="not-a-dict"),
        pytest.param([{"type": "maybe"}], "'maybe'", id="unknown-type"),
        pytest.param([{}], "None", id="no-type"),
        pytest.param(
            [{"type": "edit"}],
            r"decisions\[0\]\.arguments is required for an edit",
            id="no-args",
        ),
        pytest.param(
            [{"type": "edit", "arguments": "path=x"}],
            r"decisions\[0\]\.arguments must be an object, not 'path=x'",
            id="args-not-a-dict",
        ),
    ],
)
async def test_bad_decisions_raise_invalid_resume_and_change_nothing(
    agent, files, fake_llm, decisions, problem
):
    result = await interrupted(agent, fake_llm, write_call())
    before = StateSerializer.serialize_state(result.state)

    with pytest.raises(InvalidResume, match=problem):
        await agent.aresume(result.state, decisions)

    assert StateSerializer.serialize_state(result.state) == before
    assert len(fake_llm.requests) == 1
    assert files.calls == []
    # The same state still resumes with good decisions.
    final = await agent.aresume(result.state, [{"type": "approve"}])
    assert final.status == "completed", final.error


async def test_a_decision_the_tool_does_not_allow_raises_invalid_resume(
    agent, files, fake_llm
):
    result = await interrupted(
        agent, fake_llm, tool_call("delete_file", {"path": "a.md"}, id="d1")
    )
    before = StateSerializer.serialize_state(result.state)

    with pytest.raises(InvalidResume, match="'edit' is not allowed for 'delete_file'"):
        await agent.aresume(
            result.state, [{"type": "edit", "arguments": {"path": "b.md"}}]
        )

    assert StateSerializer.serialize_state(result.state) == before
    assert len(fake_llm.requests) == 1
    assert files.calls == []


async def test_resume_when_nothing_is_interrupted_raises_invalid_resume(
    agent, fake_llm
):
    fake_llm.script(reply("Nothing to do."))
    result = await agent.aexecute(["Hi"])
    before = StateSerializer.serialize_state(result.state)

    with pytest.raises(InvalidResume, match="Nothing to resume"):
        await agent.aresume(result.state, [{"type": "approve"}])

    assert StateSerializer.serialize_state(result.state) == before
    assert len(fake_llm.requests) == 1


async def test_an_interrupt_whose_call_is_no_longer_pending_raises_invalid_resume(
    agent, fake_llm
):
    result = await interrupted(agent, fake_llm, write_call())
    moved_on = result.state.add_message(Message.user("Never mind"))
    before = StateSerializer.serialize_state(moved_on)

    with pytest.raises(InvalidResume, match="no longer matches"):
        await agent.aresume(moved_on, [{"type": "approve"}])

    assert StateSerializer.serialize_state(moved_on) == before
    assert len(fake_llm.requests) == 1


# Persistence ------------------------------------------------------------------------
async def test_an_interrupt_survives_serialization_and_resumes_in_a_fresh_agent(
    chat_model, files, fake_llm
):
    first_agent = Agent(
        replace_default_middleware=True,
        model=chat_model,
        tools=files.tools(),
        interrupt_on=INTERRUPT_ON,
    )
    result = await interrupted(first_agent, fake_llm, write_call(), then=["Saved."])

    text = json.dumps(StateSerializer.serialize_server_state(result.state))

    fresh = Agent(
        replace_default_middleware=True,
        model=chat_model,
        tools=files.tools(),
        interrupt_on=INTERRUPT_ON,
    )
    restored = StateSerializer.deserialize_server_state(
        fresh.agent_id, json.loads(text), middleware=fresh.middleware
    )
    assert restored.interrupt_data == result.interrupt_data
    assert restored.messages[-1].tool_calls[0].call_id == "w1"

    final = await fresh.aresume(restored, [{"type": "approve"}])

    assert final.status == "completed", final.error
    assert files.calls == [("write_file", {"path": "notes.md", "content": "hello"})]
    assert final.last_message.text == "Saved."
    assert final.state.agent_id == fresh.agent_id
