"""Bounds on tool-call arguments: too deep or too large becomes a tool error the model
reads, never an exception, and what a turn keeps always fits a stored state."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sagents_django.core import Agent, Message, Tool, ToolCall
from sagents_django.core.limits import (
    ARGUMENTS_ENVELOPE_DEPTH,
    MAX_ARGUMENT_CHARS,
    MAX_ARGUMENT_DEPTH,
    MAX_STATE_DEPTH,
    MAX_TOOL_RESULT_CHARS,
    json_text_too_deep,
    value_bounds_problem,
)
from sagents_django.core.middleware.subagent import SubAgent
from sagents_django.core.openai_format import parse_tool_arguments
from sagents_django.core.serialization import (
    deserialize_server_state,
    serialize_server_state,
)
from sagents_django.core.subagents import SubAgentConfig
from sagents_django.core.testing import ScriptedModel

MARK = "marker-of-the-arguments"
SEEN: list[dict[str, Any]] = []


def _echo(args: dict[str, Any], _context: Any) -> str:
    SEEN.append(args)
    return "echoed"


ECHO = Tool(
    name="echo",
    description="Echo anything.",
    function=_echo,
    parameters={"type": "object"},
)


def nested(depth: int, leaf: Any = 1) -> dict[str, Any]:
    """An arguments object of exactly ``depth`` levels (``{"k": leaf}`` is 1)."""
    value: Any = leaf
    for _ in range(depth):
        value = {"k": value}
    return value


def nested_json(depth: int) -> str:
    return '{"k":' * depth + "1" + "}" * depth


def json_depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((json_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((json_depth(v) for v in value), default=0)
    return 0


def agent_calling(raw_arguments: str, **options: Any) -> Agent:
    call = ToolCall(call_id="c1", name="echo", raw_arguments=raw_arguments)
    model = ScriptedModel([Message.assistant(tool_calls=[call]), "Done."])
    return Agent(model=model, tools=[ECHO], replace_default_middleware=True, **options)


# The depth scan ---------------------------------------------------------------------
json_values = st.recursive(
    st.none() | st.integers() | st.text(alphabet='[]{}"\\ab\n', max_size=6),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.text(alphabet='[]{}"\\k', max_size=3), children, max_size=3
        )
    ),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(value=json_values, indent=st.sampled_from([None, 1]))
def test_the_linear_depth_scan_agrees_with_the_parser(value: Any, indent: Any) -> None:
    text = json.dumps(value, indent=indent)
    depth = json_depth(value)
    for limit in range(depth + 2):
        assert json_text_too_deep(text, limit) is (depth > limit)
        assert (value_bounds_problem(value, max_depth=limit) is not None) is (
            depth > limit
        )


def test_the_depth_scan_finds_a_5000_deep_nest_without_recursing() -> None:
    assert json_text_too_deep("[" * 5000 + "]" * 5000, MAX_ARGUMENT_DEPTH)
    assert json_text_too_deep("[" * 5000, MAX_ARGUMENT_DEPTH)  # unclosed, too
    assert not json_text_too_deep(json.dumps({"a": "[" * 5000}), MAX_ARGUMENT_DEPTH)


def test_the_envelope_depth_is_where_a_paused_subagents_arguments_are_stored() -> None:
    # A sub-agent that pauses for approval on echo: its conversation (with the call)
    # travels inside the parent's interrupt, the deepest place arguments are kept.
    arguments = {MARK: 1}
    model = ScriptedModel(
        [
            Message.assistant(
                tool_calls=[
                    ToolCall(
                        call_id="t1",
                        name="task",
                        arguments={"instructions": "x", "subagent_type": "echoer"},
                    )
                ]
            ),
            Message.assistant(
                tool_calls=[ToolCall(call_id="e1", name="echo", arguments=arguments)]
            ),
        ]
    )
    echoer = SubAgentConfig(
        name="echoer",
        description="Echoes with approval.",
        tools=[ECHO],
        interrupt_on={"echo": True},
    )
    parent = Agent(
        model=model,
        middleware=[(SubAgent, {"subagents": [echoer], "general_purpose": False})],
        replace_default_middleware=True,
    )
    result = parent.execute_sync([Message.user("Go")])
    assert result.status == "interrupted", result.error
    stored = serialize_server_state(parent, result.state)
    # The deepest copy sits inside the sub-agent's own messages, at the level the
    # limits module computes; the action request the parent shows sits higher.
    [paused] = stored["state"]["messages"][2]["tool_results"]
    run_state = paused["interrupt_data"]["_run"]["state"]
    assert _deepest_marker(run_state["state"]["messages"]) > 0
    assert _deepest_marker(stored) == ARGUMENTS_ENVELOPE_DEPTH + 1
    # A call of the agent itself sits shallower.
    direct = agent_calling(json.dumps(arguments))
    own = serialize_server_state(direct, direct.execute_sync(["Go"]).state)
    assert _deepest_marker(own) < ARGUMENTS_ENVELOPE_DEPTH + 1


def _deepest_marker(document: Any, level: int = 1) -> int:
    deepest = 0
    if isinstance(document, dict):
        if MARK in document:
            deepest = level
        children = list(document.values())
    elif isinstance(document, list):
        children = document
    else:
        return 0
    for child in children:
        deepest = max(deepest, _deepest_marker(child, level + 1))
    return deepest


def test_the_argument_depth_limit_fills_the_stored_state_exactly() -> None:
    assert MAX_ARGUMENT_DEPTH + ARGUMENTS_ENVELOPE_DEPTH == MAX_STATE_DEPTH


# Arguments through a turn -----------------------------------------------------------
def test_arguments_nested_5000_deep_are_a_tool_error_not_a_recursion_error() -> None:
    result = agent_calling(nested_json(5000)).execute_sync([Message.user("Go")])
    assert result.status == "completed", result.error
    [tool_result] = result.state.messages[2].tool_results
    assert tool_result.is_error
    assert f"nest deeper than {MAX_ARGUMENT_DEPTH} levels" in tool_result.content
    # What the state keeps of the call is short and serializable.
    [call] = result.state.messages[1].tool_calls
    assert call.arguments == {} and len(call.raw_arguments or "") < 200
    stored = serialize_server_state(None, result.state)
    assert json_depth(stored) <= MAX_STATE_DEPTH
    deserialize_server_state("a", json.loads(json.dumps(stored)))


def test_arguments_at_the_depth_limit_run_and_one_more_level_is_refused() -> None:
    SEEN.clear()
    ok = agent_calling(nested_json(MAX_ARGUMENT_DEPTH)).execute_sync(["Go"])
    assert not ok.state.messages[2].tool_results[0].is_error
    assert json_depth(SEEN[-1]) == MAX_ARGUMENT_DEPTH
    refused = agent_calling(nested_json(MAX_ARGUMENT_DEPTH + 1)).execute_sync(["Go"])
    [result] = refused.state.messages[2].tool_results
    assert result.is_error and "refused" in result.content
    assert len(SEEN) == 1  # the tool never ran


def test_arguments_longer_than_the_limit_are_refused_and_not_kept() -> None:
    raw = json.dumps({"text": "x" * MAX_ARGUMENT_CHARS})
    result = agent_calling(raw).execute_sync(["Go"])
    [tool_result] = result.state.messages[2].tool_results
    assert tool_result.is_error
    assert f"the limit is {MAX_ARGUMENT_CHARS}" in tool_result.content
    assert len(result.state.messages[1].tool_calls[0].raw_arguments or "") < 200


def test_a_call_built_with_too_deep_arguments_is_refused_however_it_is_made() -> None:
    call = ToolCall(call_id="c", name="echo", arguments=nested(MAX_ARGUMENT_DEPTH + 1))
    assert call.arguments == {}
    assert call.refusal == f"they nest deeper than {MAX_ARGUMENT_DEPTH} levels"
    loaded = ToolCall.from_dict(
        {"call_id": "c", "name": "echo", "arguments": nested(MAX_ARGUMENT_DEPTH + 5)}
    )
    assert loaded.refusal is not None
    fine = ToolCall(call_id="c", name="echo", arguments=nested(MAX_ARGUMENT_DEPTH))
    assert fine.refusal is None and json_depth(fine.arguments) == MAX_ARGUMENT_DEPTH


def test_parsed_arguments_given_as_a_dict_are_bounded_too() -> None:
    arguments, raw = parse_tool_arguments(nested(MAX_ARGUMENT_DEPTH + 1))
    assert arguments == {} and raw is not None and "deeper" in raw
    assert parse_tool_arguments({"a": 1}) == ({"a": 1}, None)


def test_invalid_json_is_still_reported_as_invalid_json() -> None:
    result = agent_calling('{"a": ').execute_sync(["Go"])
    [tool_result] = result.state.messages[2].tool_results
    assert tool_result.is_error and "Invalid JSON" in tool_result.content


def test_an_oversized_tool_result_is_cut_with_a_note() -> None:
    big = Tool(
        name="echo",
        description="Big.",
        function=lambda args, ctx: "y" * (MAX_TOOL_RESULT_CHARS * 3),
        parameters={"type": "object"},
    )
    call = ToolCall(call_id="c1", name="echo", arguments={})
    agent = Agent(
        model=ScriptedModel([Message.assistant(tool_calls=[call]), "Done."]),
        tools=[big],
        replace_default_middleware=True,
    )
    [result] = agent.execute_sync(["Go"]).state.messages[2].tool_results
    assert len(result.content) == MAX_TOOL_RESULT_CHARS
    assert result.content.endswith(
        f"the limit is {MAX_TOOL_RESULT_CHARS}. Ask for less at a time.]"
    )


def test_a_tool_returning_a_value_too_deep_to_print_gives_a_result() -> None:
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    weird = Tool(
        name="echo",
        description="Deep.",
        function=lambda args, ctx: deep,
        parameters={"type": "object"},
    )
    call = ToolCall(call_id="c1", name="echo", arguments={})
    agent = Agent(
        model=ScriptedModel([Message.assistant(tool_calls=[call]), "Done."]),
        tools=[weird],
        replace_default_middleware=True,
    )
    [result] = agent.execute_sync(["Go"]).state.messages[2].tool_results
    assert "cannot be shown as text" in result.content
