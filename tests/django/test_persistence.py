"""The Django implementations of the core's persistence protocols."""

from __future__ import annotations

import logging
from dataclasses import FrozenInstanceError, replace
from pathlib import Path
from typing import Any, get_args

import pytest
from django.db import connection, transaction

from sagents_django import services
from sagents_django.core.messages import ContentPart, Message, ToolCall, ToolResult
from sagents_django.core.persistence import (
    LIFECYCLES,
    TOOL_STATUSES,
    AgentPersistence,
    DisplayMessagePersistence,
    Lifecycle,
    PersistenceContext,
    ToolStatus,
)
from sagents_django.models import DisplayMessage
from sagents_django.persistence import (
    DjangoAgentPersistence,
    DjangoDisplayMessagePersistence,
)
from sagents_django.scope import Scope

from .factories import envelope

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def context(conversation: Any) -> PersistenceContext:
    return PersistenceContext(
        agent_id=conversation.agent_id, conversation_id=str(conversation.pk)
    )


@pytest.fixture
def display() -> DjangoDisplayMessagePersistence:
    return DjangoDisplayMessagePersistence()


@pytest.fixture
def states() -> DjangoAgentPersistence:
    return DjangoAgentPersistence()


def test_the_django_classes_satisfy_the_core_protocols() -> None:
    assert isinstance(DjangoAgentPersistence(), AgentPersistence)
    assert isinstance(DjangoDisplayMessagePersistence(), DisplayMessagePersistence)
    assert not isinstance(object(), AgentPersistence)


def test_the_closed_sets_match_their_literals() -> None:
    assert get_args(Lifecycle) == LIFECYCLES
    assert get_args(ToolStatus) == TOOL_STATUSES


def test_a_context_is_frozen(context: PersistenceContext) -> None:
    with pytest.raises(FrozenInstanceError):
        context.agent_id = "x"  # type: ignore[misc]


def test_save_message_writes_one_row_per_display_item_in_sequence(
    scope: Scope, context: PersistenceContext, display: Any
) -> None:
    message = Message.assistant(
        [ContentPart.thinking("Let me look."), ContentPart.text("Searching.")],
        tool_calls=[
            ToolCall(call_id="c1", name="search", arguments={"q": "Paris"}),
            ToolCall(call_id="c2", name="search", arguments={"q": "Rome"}),
        ],
    )
    rows = display.save_message(scope, message, context)
    assert [(r.content_type, r.sequence, r.status, r.tool_call_id) for r in rows] == [
        ("thinking", 0, "completed", ""),
        ("text", 1, "completed", ""),
        ("tool_call", 2, "pending", "c1"),
        ("tool_call", 3, "pending", "c2"),
    ]
    assert all(r.pk for r in rows)
    assert rows[2].content == {
        "call_id": "c1",
        "name": "search",
        "arguments": {"q": "Paris"},
    }


def test_save_message_keeps_the_sender_and_a_stop_reason(
    scope: Scope, context: PersistenceContext, display: Any
) -> None:
    user = Message.user("hi")
    user.metadata.update({"sender_user_id": 7, "usage": {"input": 1}})
    [row] = display.save_message(scope, user, context)
    assert row.metadata == {"sender_user_id": 7}
    partial = Message.assistant("Half an ans", status="cancelled")
    [row] = display.save_message(scope, partial, context)
    assert row.metadata == {"stop_reason": "cancelled"}


def test_a_message_without_display_items_saves_nothing(
    scope: Scope, context: PersistenceContext, display: Any
) -> None:
    assert display.save_message(scope, Message.assistant(""), context) == []


def test_an_interrupted_tool_result_is_saved_interrupted_and_can_be_resolved(
    scope: Scope, context: PersistenceContext, display: Any
) -> None:
    tool = Message.tool(
        [
            ToolResult(tool_call_id="c1", name="task", content="done"),
            ToolResult(
                tool_call_id="c2",
                name="task",
                content="Waiting for approval",
                display_text="Sub-agent paused",
                is_interrupt=True,
                interrupt_data={"x": 1},
            ),
        ]
    )
    done, held = display.save_message(scope, tool, context)
    assert (done.status, held.status) == ("completed", "interrupted")
    assert held.content["is_interrupt"] is True
    assert held.content["display_text"] == "Sub-agent paused"
    resolved = display.resolve_tool_result(scope, "c2", "Approved result", context)
    assert resolved.pk == held.pk
    assert resolved.content["content"] == "Approved result"
    assert resolved.status == "completed"


def test_update_tool_status_drives_the_lifecycle(
    scope: Scope, context: PersistenceContext, display: Any
) -> None:
    message = Message.assistant(
        tool_calls=[ToolCall(call_id=c, name="f") for c in ("a", "b", "c")]
    )
    display.save_message(scope, message, context)

    def update(status: str, **info: Any) -> DisplayMessage:
        return display.update_tool_status(scope, status, info, context)

    assert update("executing", call_id="a", name="f").status == "executing"
    row = update("completed", call_id="a", name="f", result="42", display_text="F")
    assert (row.status, row.metadata) == (
        "completed",
        {"result": "42", "display_text": "F"},
    )
    row = update("failed", call_id="b", name="f", error="boom")
    assert (row.status, row.metadata) == ("failed", {"error": "boom"})
    assert update("interrupted", call_id="c", display_text="Ask").status == (
        "interrupted"
    )
    assert update("cancelled", call_id="c", name="f").status == "cancelled"


def test_save_synthetic_message_appends_a_row(
    scope: Scope, context: PersistenceContext, display: Any
) -> None:
    row = display.save_synthetic_message(
        scope,
        {
            "message_type": "system",
            "content_type": "error",
            "content": {"text": "The turn was cancelled."},
            "metadata": {"reason": "user"},
        },
        context,
    )
    assert (row.message_type, row.content_type, row.metadata) == (
        "system",
        "error",
        {"reason": "user"},
    )


def test_persist_then_load_state(
    scope: Scope, context: PersistenceContext, states: Any
) -> None:
    data = envelope(metadata={"conversation_title": "Trip"})
    for lifecycle in LIFECYCLES:
        assert states.persist_state(scope, data, replace(context, lifecycle=lifecycle))
    assert states.load_state(scope, context) == data


def test_load_state_without_a_conversation_is_none(scope: Scope, states: Any) -> None:
    assert states.load_state(scope, PersistenceContext(agent_id="a")) is None


def error_records(caplog: pytest.LogCaptureFixture, level: int) -> list[Any]:
    return [
        r
        for r in caplog.records
        if r.name == "sagents_django.persistence" and r.levelno == level
    ]


def test_writes_to_a_deleted_conversation_are_logged_and_never_raised(
    scope: Scope,
    conversation: Any,
    context: PersistenceContext,
    display: Any,
    states: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    services.delete_conversation(scope, conversation.pk)
    caplog.set_level(logging.WARNING, logger="sagents_django.persistence")
    on_completion = replace(context, lifecycle="on_completion")
    assert states.persist_state(scope, envelope(), on_completion) is None
    assert display.save_message(scope, Message.user("hi"), context) == []
    synthetic = {"message_type": "system", "content_type": "text", "content": {}}
    assert display.save_synthetic_message(scope, synthetic, context) is None
    assert states.load_state(scope, context) is None
    logged = error_records(caplog, logging.ERROR)
    assert len(logged) == 3
    assert all(r.exc_info for r in logged)
    assert "Conversation" in logged[0].exc_text
    assert "was not found" in logged[0].exc_text


def test_a_tool_call_that_is_not_there_is_a_warning(
    scope: Scope,
    context: PersistenceContext,
    display: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="sagents_django.persistence")
    info = {"call_id": "ghost", "name": "f"}
    assert display.update_tool_status(scope, "executing", info, context) is None
    assert display.resolve_tool_result(scope, "ghost", "x", context) is None
    assert len(error_records(caplog, logging.WARNING)) == 2
    assert "Pending tool call 'ghost' was not found" in caplog.text


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(
            lambda d, s, c: d.update_tool_status(s, "exploded", {"call_id": "x"}, c),
            id="unknown status",
        ),
        pytest.param(
            lambda d, s, c: d.update_tool_status(s, "executing", {}, c),
            id="no call_id",
        ),
        pytest.param(
            lambda d, s, c: d.save_synthetic_message(s, {"content": "x"}, c),
            id="bad synthetic message",
        ),
        pytest.param(
            lambda d, s, c: d.save_message(s, "not a message", c),
            id="not a message",
        ),
    ],
)
def test_bad_calls_are_logged_errors_not_exceptions(
    scope: Scope,
    context: PersistenceContext,
    display: Any,
    call: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="sagents_django.persistence")
    assert call(display, scope, context) in (None, [])
    assert len(error_records(caplog, logging.ERROR)) == 1


def test_an_unknown_lifecycle_is_logged_and_not_saved(
    scope: Scope,
    context: PersistenceContext,
    states: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="sagents_django.persistence")
    bad = replace(context, lifecycle="whenever")  # type: ignore[arg-type]
    assert states.persist_state(scope, envelope(), bad) is None
    assert "unknown lifecycle 'whenever'" in caplog.text
    assert states.load_state(scope, context) is None


def test_a_wrong_scope_saves_nothing(
    other_scope: Scope,
    context: PersistenceContext,
    display: Any,
    states: Any,
) -> None:
    on_step = replace(context, lifecycle="on_step")
    assert states.persist_state(other_scope, envelope(), on_step) is None
    assert display.save_message(other_scope, Message.user("x"), context) == []
    assert not DisplayMessage.objects.exists()


def test_a_failing_statement_does_not_poison_the_callers_transaction(
    scope: Scope,
    context: PersistenceContext,
    states: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(*args: Any) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT * FROM no_such_table_anywhere")

    monkeypatch.setattr(services, "save_agent_state", broken)
    caplog.set_level(logging.ERROR, logger="sagents_django.persistence")
    with transaction.atomic():
        on_error = replace(context, lifecycle="on_error")
        assert states.persist_state(scope, envelope(), on_error) is None
        # On PostgreSQL an aborted transaction would refuse this query.
        assert services.get_conversation(scope, context.conversation_id)
    assert len(error_records(caplog, logging.ERROR)) == 1
