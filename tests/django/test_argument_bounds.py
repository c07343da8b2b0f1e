"""The core's argument bounds are the store's: a turn at the limit is saved and read
back (its deepest copy fills the stored state exactly), one level more is a tool
error the model reads, and the turn that carries it is saved too."""

from __future__ import annotations

from typing import Any

import pytest

from sagents_django import services
from sagents_django.core import Agent, Message
from sagents_django.core.limits import (
    MAX_ARGUMENT_DEPTH,
    MAX_STATE_DEPTH,
    MAX_SUBAGENT_NESTING,
)
from sagents_django.core.serialization import (
    deserialize_server_state,
    serialize_server_state,
)
from sagents_django.core.testing import ScriptedModel
from sagents_django.persistence import display_rows
from sagents_django.scope import Scope
from tests.core.subagent_chains import ECHO, chain, nested_json, raw_call

pytestmark = pytest.mark.django_db


def json_depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((json_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((json_depth(v) for v in value), default=0)
    return 0


def direct_turn(depth: int) -> Any:
    agent = Agent(
        model=ScriptedModel([raw_call("c1", "echo", nested_json(depth)), "Done."]),
        tools=[ECHO],
        replace_default_middleware=True,
    )
    return agent.execute([Message.user("Go")])


def test_the_deepest_paused_sub_agent_with_arguments_at_the_limit_is_stored(
    scope: Scope, conversation: Any
) -> None:
    # Sub-agents nested as deep as allowed, the deepest paused for approval of a
    # call whose arguments are as deep as allowed: the state is exactly as deep as
    # the store accepts.
    parent = chain(MAX_SUBAGENT_NESTING, nested_json(MAX_ARGUMENT_DEPTH))
    result = parent.execute([Message.user("Go")])
    assert result.status == "interrupted", result.error
    data = serialize_server_state(result.state)
    assert json_depth(data) == MAX_STATE_DEPTH
    services.save_agent_state(scope, conversation.pk, data)
    loaded = services.load_agent_state(scope, conversation.pk)
    assert loaded == data
    state = deserialize_server_state("p", loaded, middleware=parent.middleware)
    assert state.interrupt is not None


def test_a_call_at_the_limit_runs_and_its_turn_and_display_rows_are_stored(
    scope: Scope, conversation: Any
) -> None:
    result = direct_turn(MAX_ARGUMENT_DEPTH)
    assert result.status == "completed", result.error
    [tool_result] = result.state.messages[2].tool_results
    assert not tool_result.is_error
    data = serialize_server_state(result.state)
    services.save_agent_state(scope, conversation.pk, data)
    assert services.load_agent_state(scope, conversation.pk) == data
    rows = [row for m in result.state.messages for row in display_rows(m)]
    saved = services.append_display_messages(scope, conversation.pk, rows)
    call_row = next(r for r in saved if r.content_type == "tool_call")
    assert json_depth(call_row.content["arguments"]) == MAX_ARGUMENT_DEPTH


def test_one_level_more_is_a_tool_error_and_the_turn_is_stored(
    scope: Scope, conversation: Any
) -> None:
    result = direct_turn(MAX_ARGUMENT_DEPTH + 1)
    assert result.status == "completed", result.error
    [tool_result] = result.state.messages[2].tool_results
    assert tool_result.is_error
    assert f"nest deeper than {MAX_ARGUMENT_DEPTH} levels" in tool_result.content
    data = serialize_server_state(result.state)
    services.save_agent_state(scope, conversation.pk, data)
    loaded = deserialize_server_state(
        "a", services.load_agent_state(scope, conversation.pk)
    )
    assert [m.role for m in loaded.messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    rows = [row for m in result.state.messages for row in display_rows(m)]
    assert services.append_display_messages(scope, conversation.pk, rows)


def test_a_call_5000_deep_is_a_tool_error_and_the_turn_is_stored(
    scope: Scope, conversation: Any
) -> None:
    result = direct_turn(5000)
    assert result.state.messages[2].tool_results[0].is_error
    services.save_agent_state(
        scope, conversation.pk, serialize_server_state(result.state)
    )
    assert services.load_agent_state(scope, conversation.pk) is not None
