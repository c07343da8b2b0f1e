"""Sagents' names for ported code (``core.compat``) and State built from plain data."""

from __future__ import annotations

import pytest

from sagents_django.core import ConfigurationError, Message, State
from sagents_django.core.compat import new
from sagents_django.core.testing import ScriptedModel


def test_new_takes_sagents_system_prompt() -> None:
    agent = new(model=ScriptedModel([]), system_prompt="Be brief.")
    assert agent.base_system_prompt == "Be brief."
    assert agent.assembled_system_prompt.startswith("Be brief.")


def test_new_refuses_both_names_of_one_option() -> None:
    with pytest.raises(ConfigurationError, match="not both"):
        new(model=ScriptedModel([]), system_prompt="a", base_system_prompt="b")


def test_state_coerces_openai_dicts_and_strings() -> None:
    state = State(
        messages=[
            {"role": "user", "content": "What is 2+2?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"a": 2, "b": 2}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "4"},
            "Thanks",
        ]
    )
    assert all(isinstance(m, Message) for m in state.messages)
    assert [m.role for m in state.messages] == ["user", "assistant", "tool", "user"]
    assert state.messages[1].tool_calls[0].arguments == {"a": 2, "b": 2}
    assert state.messages[2].tool_results[0].content == "4"
    assert state.messages[3].text == "Thanks"
    # A copy (every step makes some) keeps them as they are.
    assert state.add_message("More").messages[:4] == state.messages


@pytest.mark.parametrize("bad", [[42], [{"role": "wizard", "content": "x"}]])
def test_state_refuses_what_is_no_message(bad: list) -> None:
    with pytest.raises((TypeError, ValueError)):
        State(messages=bad)
