"""The tool-call card lifecycle: allowed transitions, metadata, decisions, results."""

from __future__ import annotations

from typing import Any

import pytest

from sagents_django import services
from sagents_django.core import Approve, Reject
from sagents_django.exceptions import InvalidInput, NotFound
from sagents_django.models import DisplayMessage
from sagents_django.scope import Scope

from .factories import snapshot, tool_call_row, tool_result_row

pytestmark = pytest.mark.django_db


def status_of(row: DisplayMessage) -> str:
    return DisplayMessage.objects.get(pk=row.pk).status


def test_a_call_goes_pending_executing_completed_with_result_metadata(
    scope: Scope, conversation: Any
) -> None:
    row = tool_call_row(scope, conversation, "c1")
    assert status_of(row) == "pending"
    services.mark_tool_executing(scope, "c1")
    assert status_of(row) == "executing"
    done = services.complete_tool_call(scope, "c1", {"result": "42"})
    assert done.pk == row.pk
    row.refresh_from_db()
    assert (row.status, row.metadata) == ("completed", {"result": "42"})


def test_fail_merges_the_error_into_metadata(scope: Scope, conversation: Any) -> None:
    row = tool_call_row(scope, conversation, "c1")
    services.record_hitl_decision(scope, "c1", "approve")
    services.fail_tool_call(scope, "c1", {"error": "boom"})
    row.refresh_from_db()
    assert row.status == "failed"
    assert row.metadata == {"hitl_decision": "approved", "error": "boom"}


def test_interrupt_then_complete_and_cancel(scope: Scope, conversation: Any) -> None:
    first = tool_call_row(scope, conversation, "c1")
    second = tool_call_row(scope, conversation, "c2")
    services.interrupt_tool_call(scope, "c1", {"display_text": "Waiting"})
    assert status_of(first) == "interrupted"
    services.complete_tool_call(scope, "c1")
    assert status_of(first) == "completed"
    services.mark_tool_executing(scope, "c2")
    services.cancel_tool_call(scope, "c2")
    assert status_of(second) == "cancelled"


@pytest.mark.parametrize(
    "current, call",
    [
        ("executing", lambda s: services.mark_tool_executing(s, "c1")),
        ("completed", lambda s: services.mark_tool_executing(s, "c1")),
        ("completed", lambda s: services.complete_tool_call(s, "c1")),
        ("failed", lambda s: services.fail_tool_call(s, "c1")),
        ("cancelled", lambda s: services.cancel_tool_call(s, "c1")),
        ("interrupted", lambda s: services.interrupt_tool_call(s, "c1")),
        ("completed", lambda s: services.interrupt_tool_call(s, "c1")),
    ],
)
def test_a_transition_from_a_state_it_does_not_leave_is_not_found(
    scope: Scope, conversation: Any, current: str, call: Any
) -> None:
    row = tool_call_row(scope, conversation, "c1")
    DisplayMessage.objects.filter(pk=row.pk).update(status=current)
    before = snapshot()
    with pytest.raises(NotFound, match="tool call 'c1' was not found"):
        call(scope)
    assert snapshot() == before


def test_the_lifecycle_only_touches_tool_call_rows(
    scope: Scope, conversation: Any
) -> None:
    result = tool_result_row(scope, conversation, "c1")
    with pytest.raises(NotFound):
        services.mark_tool_executing(scope, "c1")
    assert status_of(result) == "completed"


def test_conversation_id_narrows_a_call_id_used_in_two_conversations(
    scope: Scope, conversation: Any
) -> None:
    other = services.create_conversation(scope, title="Second")
    mine = tool_call_row(scope, conversation, "call_0")
    theirs = tool_call_row(scope, other, "call_0")
    services.mark_tool_executing(scope, "call_0", conversation_id=conversation.pk)
    assert (status_of(mine), status_of(theirs)) == ("executing", "pending")
    # Without it the newest matching row is taken.
    services.mark_tool_executing(scope, "call_0")
    assert status_of(theirs) == "executing"


def test_a_hitl_decision_is_stamped_on_the_call_and_its_result(
    scope: Scope, conversation: Any
) -> None:
    call = tool_call_row(scope, conversation, "c1")
    result = tool_result_row(scope, conversation, "c1")
    returned = services.record_hitl_decision(scope, "c1", "rejected")
    assert returned.pk == call.pk
    call.refresh_from_db()
    result.refresh_from_db()
    assert call.metadata == {"hitl_decision": "rejected"}
    assert result.content["hitl_decision"] == "rejected"
    # Metadata survives later transitions, which merge.
    services.cancel_tool_call(scope, "c1", conversation_id=conversation.pk)
    call.refresh_from_db()
    assert call.metadata == {"hitl_decision": "rejected"}


@pytest.mark.parametrize(
    "given, stored",
    [
        ("approve", "approved"),
        ("edited", "edited"),
        ("reject", "rejected"),
        (Approve(), "approved"),
        (Reject(message="No."), "rejected"),
        ({"type": "edit", "arguments": {"q": "y"}}, "edited"),
    ],
)
def test_decisions_are_stored_in_the_past_tense(
    scope: Scope, conversation: Any, given: str, stored: str
) -> None:
    tool_call_row(scope, conversation, "c1")
    row = services.record_hitl_decision(scope, "c1", given)
    assert row.metadata["hitl_decision"] == stored


def test_resolving_an_interrupted_result_replaces_its_content(
    scope: Scope, conversation: Any
) -> None:
    held = tool_result_row(scope, conversation, "c1", interrupted=True)
    assert status_of(held) == "interrupted"
    resolved = services.resolve_interrupted_tool_result(scope, "c1", "the answer")
    assert resolved.pk == held.pk
    held.refresh_from_db()
    assert held.status == "completed"
    assert held.content["content"] == "the answer"
    assert held.content["is_interrupt"] is False
    with pytest.raises(NotFound, match="Interrupted tool result 'c1' was not found"):
        services.resolve_interrupted_tool_result(scope, "c1", "again")


def test_a_result_that_was_not_interrupted_cannot_be_resolved(
    scope: Scope, conversation: Any
) -> None:
    tool_result_row(scope, conversation, "c1")
    with pytest.raises(NotFound):
        services.resolve_interrupted_tool_result(scope, "c1", "x")


def test_an_unknown_call_id_is_not_found(scope: Scope, conversation: Any) -> None:
    with pytest.raises(NotFound, match=r"^Pending tool call 'nope' was not found\.$"):
        services.mark_tool_executing(scope, "nope")


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda s: services.mark_tool_executing(s, ""), id="empty id"),
        pytest.param(lambda s: services.mark_tool_executing(s, 5), id="int id"),
        pytest.param(lambda s: services.mark_tool_executing(s, None), id="None id"),
        pytest.param(
            lambda s: services.cancel_tool_call(s, "c" * 256), id="id too long"
        ),
        pytest.param(
            lambda s: services.complete_tool_call(s, "c1", "not a dict"),
            id="metadata not a dict",
        ),
        pytest.param(
            lambda s: services.fail_tool_call(s, "c1", {"e": object()}),
            id="metadata not JSON",
        ),
        pytest.param(
            lambda s: services.interrupt_tool_call(s, "c1", {3: "x"}),
            id="metadata int key",
        ),
        pytest.param(
            lambda s: services.record_hitl_decision(s, "c1", "maybe"),
            id="unknown decision",
        ),
        pytest.param(
            lambda s: services.record_hitl_decision(s, "c1", None),
            id="decision None",
        ),
        pytest.param(
            lambda s: services.record_hitl_decision(s, "c1", {"type": "maybe"}),
            id="decision dict of an unknown type",
        ),
        pytest.param(
            lambda s: services.record_hitl_decision(
                s, "c1", {"type": "edit", "arguments": "x"}
            ),
            id="edit decision without an arguments object",
        ),
        pytest.param(
            lambda s: services.resolve_interrupted_tool_result(s, "c1", 42),
            id="result not a string",
        ),
    ],
)
def test_bad_lifecycle_arguments_are_refused_and_nothing_changes(
    scope: Scope, conversation: Any, call: Any
) -> None:
    tool_call_row(scope, conversation, "c1")
    tool_result_row(scope, conversation, "c1", interrupted=True)
    before = snapshot()
    with pytest.raises(InvalidInput):
        call(scope)
    assert snapshot() == before


def test_nul_in_a_resolved_result_is_replaced(scope: Scope, conversation: Any) -> None:
    tool_result_row(scope, conversation, "c1", interrupted=True)
    row = services.resolve_interrupted_tool_result(scope, "c1", "a\x00b")
    row.refresh_from_db()
    assert row.content["content"] == "a\ufffdb"


def test_a_decision_dict_that_does_not_fit_names_the_bad_field(
    scope: Scope, conversation: Any
) -> None:
    tool_call_row(scope, conversation, "c1")
    with pytest.raises(InvalidInput, match=r"decision\.arguments must be an object"):
        services.record_hitl_decision(scope, "c1", {"type": "edit", "arguments": [1]})
