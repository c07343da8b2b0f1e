"""Bounds on tool-call arguments: too deep or too large becomes a tool error the model
reads, never an exception, and what a turn keeps always fits a stored state."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sagents_django.core import Agent, Message, Tool, ToolCall
from sagents_django.core.limits import (
    ARGUMENTS_ENVELOPE_DEPTH,
    MAX_ARGUMENT_CHARS,
    MAX_ARGUMENT_DEPTH,
    MAX_MESSAGE_BYTES,
    MAX_STATE_DEPTH,
    MAX_SUBAGENT_NESTING,
    MAX_TOOL_RESULT_CHARS,
    OWN_CALL_PATH,
    SUBAGENT_LEVEL_PATH,
    json_text_too_deep,
    value_bounds_problem,
)
from sagents_django.core.messages import message_size_problem
from sagents_django.core.openai_format import parse_tool_arguments
from sagents_django.core.serialization import (
    deserialize_server_state,
    serialize_server_state,
)
from sagents_django.core.testing import ScriptedModel
from tests.core.subagent_chains import chain

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


@pytest.mark.parametrize("levels", range(MAX_SUBAGENT_NESTING + 1))
def test_each_sub_agent_level_adds_the_levels_the_limits_module_counts(
    levels: int,
) -> None:
    # The deepest copy of a call's arguments is in the conversation of the deepest
    # sub-agent paused for approval, inside every level above it.
    agent = chain(levels, json.dumps({MARK: 1}), "Done.")
    result = agent.execute([Message.user("Go")])
    assert result.status == ("interrupted" if levels else "completed"), result.error
    stored = serialize_server_state(result.state)
    expected = len(OWN_CALL_PATH) + levels * len(SUBAGENT_LEVEL_PATH) + 1
    assert _deepest_marker(stored) == expected
    if levels == MAX_SUBAGENT_NESTING:
        assert expected == ARGUMENTS_ENVELOPE_DEPTH + 1


def test_a_sub_agent_below_the_deepest_level_is_refused_as_a_tool_error() -> None:
    # The deepest allowed sub-agent asks for one more: it reads an error, does the
    # work itself (the echo), and every level answers up the chain.
    agent = chain(
        MAX_SUBAGENT_NESTING + 1,
        json.dumps({MARK: 1}),
        *[f"level {n} done" for n in range(MAX_SUBAGENT_NESTING, 0, -1)],
        "Done.",
    )
    result = agent.execute([Message.user("Go")])
    assert result.status == "completed", result.error
    told = [
        m["content"]
        for request in agent.model.requests
        for m in request.messages
        if m.get("role") == "tool" and "nested at most" in str(m.get("content"))
    ]
    assert (
        told
        == [
            f"Sub-agents can be nested at most {MAX_SUBAGENT_NESTING} levels deep, and "
            "this one is at that depth: do the task yourself."
        ]
        * len(told)
        and told
    )
    assert MARK not in json.dumps(serialize_server_state(result.state))


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
    result = agent_calling(nested_json(5000)).execute([Message.user("Go")])
    assert result.status == "completed", result.error
    [tool_result] = result.state.messages[2].tool_results
    assert tool_result.is_error
    assert f"nest deeper than {MAX_ARGUMENT_DEPTH} levels" in tool_result.content
    # What the state keeps of the call is short and serializable.
    [call] = result.state.messages[1].tool_calls
    assert call.arguments == {} and len(call.raw_arguments or "") < 200
    stored = serialize_server_state(result.state)
    assert json_depth(stored) <= MAX_STATE_DEPTH
    deserialize_server_state("a", json.loads(json.dumps(stored)))


def test_arguments_at_the_depth_limit_run_and_one_more_level_is_refused() -> None:
    SEEN.clear()
    ok = agent_calling(nested_json(MAX_ARGUMENT_DEPTH)).execute(["Go"])
    assert not ok.state.messages[2].tool_results[0].is_error
    assert json_depth(SEEN[-1]) == MAX_ARGUMENT_DEPTH
    refused = agent_calling(nested_json(MAX_ARGUMENT_DEPTH + 1)).execute(["Go"])
    [result] = refused.state.messages[2].tool_results
    assert result.is_error and "refused" in result.content
    assert len(SEEN) == 1  # the tool never ran


def test_arguments_longer_than_the_limit_are_refused_and_not_kept() -> None:
    raw = json.dumps({"text": "x" * MAX_ARGUMENT_CHARS})
    result = agent_calling(raw).execute(["Go"])
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
    result = agent_calling('{"a": ').execute(["Go"])
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
    [result] = agent.execute(["Go"]).state.messages[2].tool_results
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
    [result] = agent.execute(["Go"]).state.messages[2].tool_results
    assert "cannot be shown as text" in result.content


def test_a_message_over_the_size_limit_is_named_before_a_turn() -> None:
    assert message_size_problem(Message.user("hello")) is None
    big = Message.user("x" * MAX_MESSAGE_BYTES)
    size = len(json.dumps(big.to_dict()))
    assert size > MAX_MESSAGE_BYTES
    assert message_size_problem(big) == (
        f"The message is {size} bytes as stored JSON; the limit is {MAX_MESSAGE_BYTES}."
    )
    huge = Message.user("x" * (MAX_MESSAGE_BYTES * 2))
    assert f"at least {MAX_MESSAGE_BYTES * 2} bytes" in (
        message_size_problem(huge) or ""
    )
    # Bytes, not characters: 3 bytes each in UTF-8.
    assert message_size_problem(Message.user("€" * 400), limit=1000) is not None
    assert message_size_problem(Message.user("€" * 300), limit=1000) is None
