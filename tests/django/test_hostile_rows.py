"""Rows a hostile or broken writer left in the database, read back by the services.

The services validate what they write, but a row can still arrive by another path
(a raw UPDATE, an older version, a restored backup). Reading such a row must end in
the library's own error (``SerializationError``) and leave it as it was, never in a
RecursionError or TypeError, and never in a conversation that silently restarts
from nothing; a tool-call card whose JSON column is not an object still moves.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.models import JSONField, Value

from sagents_django import services
from sagents_django.core.exceptions import SerializationError
from sagents_django.core.persistence import PersistenceContext
from sagents_django.core.serialization import deserialize_server_state
from sagents_django.models import AgentRun, AgentState, DisplayMessage
from sagents_django.persistence import DjangoAgentPersistence
from sagents_django.scope import Scope

from .factories import envelope, tool_call_row, tool_result_row

pytestmark = pytest.mark.django_db


def deep() -> str:
    """JSON nested 3,000 deep (1,990 on SQLite, whose JSON_VALID check refuses more:
    still twice what Python's decoder recurses into)."""
    depth = 1990 if connection.vendor == "sqlite" else 3000
    return "[" * depth + "]" * depth


def deep_envelope() -> str:
    return (
        '{"version": 1, "state": {"messages": [], "metadata": {"x": ' + deep() + "}}}"
    )


def store_raw(scope: Scope, conversation: Any, text: str) -> None:
    """Put ``text`` (JSON) in the conversation's state row as it is, past every
    check of the services."""
    row = services.save_agent_state(scope, conversation.pk, envelope())
    table = AgentState._meta.db_table
    cast = "%s::jsonb" if connection.vendor == "postgresql" else "%s"
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET state_data = {cast} WHERE id = %s", [text, row.pk]
        )


def rows() -> tuple[list[Any], ...]:
    """Every row the services write, the state documents as their stored text (a
    document too deep to decode cannot go through the ORM)."""
    text = "state_data::text" if connection.vendor == "postgresql" else "state_data"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, conversation_id, {text}, version, updated_at "
            f"FROM {AgentState._meta.db_table} ORDER BY id"
        )
        states = cursor.fetchall()
    return (
        states,
        list(services.conversation_model().objects.order_by("pk").values()),
        list(DisplayMessage.objects.order_by("pk").values()),
        list(AgentRun.objects.order_by("pk").values()),
    )


def context_of(conversation: Any) -> PersistenceContext:
    return PersistenceContext(
        agent_id=conversation.agent_id, conversation_id=str(conversation.pk)
    )


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("deep envelope", id="an envelope nesting 3,000 deep"),
        pytest.param("deep", id="a list 3,000 deep"),
        pytest.param('"just text"', id="a string"),
        pytest.param("[1, 2]", id="a list"),
        pytest.param("null", id="JSON null"),
    ],
)
def test_an_unreadable_state_row_is_a_serialization_error_and_stays(
    scope: Scope, conversation: Any, text: str
) -> None:
    text = {"deep envelope": deep_envelope(), "deep": deep()}.get(text, text)
    store_raw(scope, conversation, text)
    before = rows()
    with pytest.raises(SerializationError, match=str(conversation.pk)):
        services.load_agent_state(scope, conversation.pk)
    # The todos panel reads only the todos, which such a row does not have.
    assert services.load_todos(scope, conversation.pk) == []
    assert rows() == before


def test_todos_nested_too_deep_to_decode_are_a_serialization_error(
    scope: Scope, conversation: Any
) -> None:
    store_raw(
        scope,
        conversation,
        '{"version": 1, "state": {"messages": [], "todos": ' + deep() + "}}",
    )
    before = rows()
    with pytest.raises(SerializationError, match="nests deeper"):
        services.load_todos(scope, conversation.pk)
    assert rows() == before


def test_the_agent_persistence_does_not_turn_an_unreadable_row_into_a_new_start(
    scope: Scope, conversation: Any
) -> None:
    store_raw(scope, conversation, deep_envelope())
    before = rows()
    with pytest.raises(SerializationError):
        DjangoAgentPersistence().load_state(scope, context_of(conversation))
    assert rows() == before


def test_a_stored_interrupt_whose_id_is_a_list_loads_and_says_what_is_wrong(
    scope: Scope, conversation: Any
) -> None:
    # A sub-agent's pause whose id was damaged: loading used to hash it (TypeError).
    pending = {
        "type": "subagent",
        "subagent": "calc",
        "subagent_id": "s1",
        "tool_call_id": ["c1"],
    }
    data = envelope(
        messages=[
            {
                "role": "assistant",
                "tool_calls": [{"call_id": "c1", "name": "task", "arguments": {}}],
            },
            {
                "role": "tool",
                "tool_results": [
                    {
                        "tool_call_id": "c1",
                        "name": "task",
                        "content": "waiting",
                        "is_interrupt": True,
                        "interrupt_data": {"type": "subagent"},
                    }
                ],
            },
        ],
        interrupt_data=pending,
    )
    services.save_agent_state(scope, conversation.pk, data)
    before = rows()
    for _ in range(2):  # every later load: no TypeError, the interrupt as stored
        loaded = DjangoAgentPersistence().load_state(scope, context_of(conversation))
        state = deserialize_server_state(conversation.agent_id, loaded)
        assert state.interrupt_data == pending
        # What resume reads: the library's own error, naming the field.
        with pytest.raises(SerializationError, match="tool_call_id"):
            state.interrupt  # noqa: B018
    assert rows() == before


# Tool-call cards whose JSON column is not an object ----------------------------------

NOT_OBJECTS = {
    "list": [1, 2],
    "string": "text",
    "number": 7,
    "JSON null": None,
}


def set_json(row: DisplayMessage, field: str, value: Any) -> None:
    DisplayMessage.objects.filter(pk=row.pk).update(
        **{field: Value(value, output_field=JSONField())}
    )


@pytest.mark.parametrize("value", NOT_OBJECTS.values(), ids=NOT_OBJECTS)
def test_completing_a_call_whose_metadata_is_not_an_object_replaces_it(
    scope: Scope, conversation: Any, value: Any
) -> None:
    row = tool_call_row(scope, conversation, "c1")
    set_json(row, "metadata", value)
    services.complete_tool_call(scope, "c1", {"result": "42"})
    row.refresh_from_db()
    assert (row.status, row.metadata) == ("completed", {"result": "42"})


@pytest.mark.parametrize("value", NOT_OBJECTS.values(), ids=NOT_OBJECTS)
def test_failing_a_call_whose_metadata_is_not_an_object_replaces_it(
    scope: Scope, conversation: Any, value: Any
) -> None:
    row = tool_call_row(scope, conversation, "c1")
    set_json(row, "metadata", value)
    services.fail_tool_call(scope, "c1", {"error": "boom"})
    row.refresh_from_db()
    assert (row.status, row.metadata) == ("failed", {"error": "boom"})


@pytest.mark.parametrize("value", NOT_OBJECTS.values(), ids=NOT_OBJECTS)
def test_a_decision_on_a_call_and_result_whose_json_is_not_an_object_is_recorded(
    scope: Scope, conversation: Any, value: Any
) -> None:
    call = tool_call_row(scope, conversation, "c1")
    result = tool_result_row(scope, conversation, "c1")
    set_json(call, "metadata", value)
    set_json(result, "content", value)
    services.record_hitl_decision(scope, "c1", "approve")
    call.refresh_from_db()
    result.refresh_from_db()
    assert call.metadata == {"hitl_decision": "approved"}
    assert result.content == {"hitl_decision": "approved"}


@pytest.mark.parametrize("value", NOT_OBJECTS.values(), ids=NOT_OBJECTS)
def test_resolving_an_interrupted_result_whose_content_is_not_an_object_works(
    scope: Scope, conversation: Any, value: Any
) -> None:
    result = tool_result_row(scope, conversation, "c1", interrupted=True)
    set_json(result, "content", value)
    services.resolve_interrupted_tool_result(scope, "c1", "the answer")
    result.refresh_from_db()
    assert result.status == "completed"
    assert result.content == {"content": "the answer", "is_interrupt": False}
