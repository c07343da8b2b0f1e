"""The default middleware stack: its order, its options, and replacing it."""

from __future__ import annotations

import pytest

from sagents_django.core import Agent, ConfigurationError, Middleware
from sagents_django.core.middleware.filesystem import FileSystem
from sagents_django.core.middleware.human_in_the_loop import HumanInTheLoop
from sagents_django.core.middleware.patch_tool_calls import PatchToolCalls
from sagents_django.core.middleware.subagent import SubAgent
from sagents_django.core.middleware.summarization import Summarization
from sagents_django.core.middleware.todo_list import TodoList
from sagents_django.core.testing import ScriptedModel

DEFAULT_ORDER = [TodoList, FileSystem, SubAgent, Summarization, PatchToolCalls]


class Extra(Middleware):
    pass


def stack_of(agent: Agent) -> list[type]:
    return [entry.cls for entry in agent.middleware]


def test_the_default_stack_is_todo_filesystem_subagent_summarization_patch():
    agent = Agent(model=ScriptedModel([]))
    assert stack_of(agent) == DEFAULT_ORDER


def test_interrupt_on_appends_human_in_the_loop_last_and_extra_middleware_after():
    agent = Agent(
        model=ScriptedModel([]), middleware=[Extra], interrupt_on={"write_file": True}
    )
    assert stack_of(agent) == [*DEFAULT_ORDER, HumanInTheLoop, Extra]
    hitl = agent.middleware[5].middleware
    assert hitl.review_configs == {
        "write_file": {"allowed_decisions": ["approve", "edit", "reject"]}
    }


def test_replace_default_middleware_keeps_only_the_given_stack():
    agent = Agent(
        model=ScriptedModel([]),
        middleware=[Extra],
        replace_default_middleware=True,
        interrupt_on={"x": True},
    )
    assert stack_of(agent) == [Extra, HumanInTheLoop]


def test_options_reach_each_default_middleware():
    agent = Agent(
        model=ScriptedModel([]),
        summarization_opts={"max_tokens_before_summary": 1234, "messages_to_keep": 3},
        filesystem_opts={"enabled_tools": ["ls", "read_file"]},
        subagent_opts={"general_purpose": False},
        todo_opts={"display_text": "Planning"},
    )
    summarization = agent.middleware[3].middleware
    assert summarization.options["max_tokens_before_summary"] == 1234
    tools = set(agent.tools_by_name)
    assert {"ls", "read_file"} <= tools and "write_file" not in tools
    assert agent.tools_by_name["write_todos"].display_text == "Planning"
    assert "general-purpose" not in agent.middleware[2].middleware.types()


def test_bad_default_middleware_options_are_configuration_errors():
    with pytest.raises(ConfigurationError):
        Agent(model=ScriptedModel([]), summarization_opts={"messages_to_keep": -1})
    with pytest.raises(ConfigurationError):
        Agent(model=ScriptedModel([]), todo_opts={"no_such_option": 1})


def test_the_demo_model_walks_every_default_feature(monkeypatch):
    monkeypatch.setenv("SAGENTS_DEMO_DELAY_MS", "0")
    agent = Agent(model="sagents/demo", interrupt_on={"write_file": True})
    first = agent.execute(["Plan a picnic"])
    assert first.status == "interrupted", first.error
    assert [r["tool_name"] for r in first.interrupt_data["action_requests"]] == [
        "write_file"
    ]
    assert [t.status for t in first.state.todos] == [
        "in_progress",
        "pending",
        "pending",
    ]
    done = agent.resume(first.state, [{"type": "approve"}])
    assert done.status == "completed", done.error
    called = [c.name for m in done.state.messages for c in m.tool_calls]
    assert called == ["write_todos", "write_file", "task", "write_todos"]
    assert "offline demo model" in done.last_message.text
