"""A full round trip: an agent turn through the core, persisted by the callbacks the
runtime will use (``display_callbacks``), reloaded from the database, and continued with a second turn."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from sagents_django import services
from sagents_django.core import Agent, Message, State, Tool, ToolCall
from sagents_django.core.persistence import PersistenceContext
from sagents_django.core.serialization import (
    deserialize_server_state,
    serialize_server_state,
)
from sagents_django.core.testing import ScriptedModel
from sagents_django.persistence import (
    DjangoAgentPersistence,
    DjangoDisplayMessagePersistence,
    display_callbacks,
)
from sagents_django.scope import Scope

pytestmark = pytest.mark.django_db


def _add(args: dict[str, Any], _context: Any) -> str:
    return str(args["a"] + args["b"])


def _divide(args: dict[str, Any], _context: Any) -> str:
    return str(args["a"] / args["b"])  # b=0 fails: a failed tool call


def number_tool(name: str, function: Any) -> Tool:
    return Tool(
        name=name,
        description=f"{name} two numbers.",
        function=function,
        parameters={
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    )


def run_turn(
    agent: Agent,
    state: State,
    user_text: str,
    scope: Scope,
    context: PersistenceContext,
) -> State:
    """One turn as the runtime runs it: save the user's message, execute, persist."""
    user = Message.user(user_text)
    DjangoDisplayMessagePersistence().save_message(scope, user, context)
    result = async_to_sync(agent.aexecute)(
        state.add_message(user),
        callbacks=[
            display_callbacks(DjangoDisplayMessagePersistence(), scope, context)
        ],
    )
    assert result.ok, result.error
    stored = DjangoAgentPersistence().persist_state(
        scope,
        serialize_server_state(result.state),
        replace(context, lifecycle="on_completion"),
    )
    assert stored is not None
    return result.state


def test_an_agent_turn_persists_reloads_and_continues(
    scope: Scope, conversation: Any
) -> None:
    model = ScriptedModel(
        [
            Message.assistant(
                "Let me work that out.",
                tool_calls=[
                    ToolCall(
                        call_id="call_add", name="add", arguments={"a": 1, "b": 2}
                    ),
                    ToolCall(
                        call_id="call_div", name="divide", arguments={"a": 1, "b": 0}
                    ),
                ],
            ),
            "1 + 2 = 3 🎉, and 1 / 0 has no answer.",
            "Still 3.",
        ]
    )
    context = PersistenceContext(
        agent_id=conversation.agent_id, conversation_id=str(conversation.pk)
    )

    def build_agent() -> Agent:
        # Config lives in code: the agent is rebuilt for every turn.
        return Agent(
            model=model,
            tools=[number_tool("add", _add), number_tool("divide", _divide)],
            agent_id=conversation.agent_id,
            replace_default_middleware=True,
        )

    first = run_turn(build_agent(), State(), "What are 1+2 and 1/0?", scope, context)

    rows = services.load_display_messages(scope, conversation.pk)
    assert [(r.message_type, r.content_type, r.sequence, r.status) for r in rows] == [
        ("user", "text", 0, "completed"),
        ("assistant", "text", 0, "completed"),
        ("assistant", "tool_call", 1, "completed"),
        ("assistant", "tool_call", 2, "failed"),
        ("tool", "tool_result", 0, "completed"),
        ("tool", "tool_result", 1, "completed"),
        ("assistant", "text", 0, "completed"),
    ]
    add_call, divide_call = rows[2], rows[3]
    assert add_call.metadata == {"result": "3"}
    assert "division by zero" in divide_call.metadata["error"]
    assert rows[-1].content == {"text": "1 + 2 = 3 🎉, and 1 / 0 has no answer."}

    # A new worker: nothing in memory but the database.
    envelope = DjangoAgentPersistence().load_state(scope, context)
    agent = build_agent()
    restored = deserialize_server_state(agent.agent_id, envelope)
    assert restored.messages == first.messages
    assert [m.role for m in restored.messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]

    second = run_turn(agent, restored, "And 1+2 again?", scope, context)
    assert second.messages[-1].text == "Still 3."
    # The model saw the whole restored history.
    assert len(model.requests[-1].messages) == 6
    reloaded = deserialize_server_state(
        agent.agent_id, DjangoAgentPersistence().load_state(scope, context)
    )
    assert reloaded.messages == second.messages
    texts = [
        r.content.get("text")
        for r in services.load_display_messages(scope, conversation.pk)
    ]
    assert texts[-2:] == ["And 1+2 again?", "Still 3."]
