"""Every service function, given a scope that does not own the conversation, answers
"not found" (NotFound, None or [] as the reference says) and changes nothing."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.http import Http404

from sagents_django import services
from sagents_django.exceptions import NotFound
from sagents_django.models import AgentRun, DisplayMessage
from sagents_django.scope import Scope
from sagents_django.sharing import filesystems

from .factories import envelope, snapshot, tool_call_row, tool_result_row

pytestmark = pytest.mark.django_db

CALL = "call-1"
HELD = "call-held"

Call = Callable[[Scope, Any], Any]


def carol() -> Any:
    return get_user_model().objects.get_or_create(username="carol")[0]


def last_run(conversation: Any) -> Any:
    return AgentRun.objects.filter(conversation=conversation).first().pk


def reply_of(conversation: Any) -> Any:
    replies = DisplayMessage.objects.filter(
        conversation=conversation, message_type="assistant", content_type="text"
    )
    return replies.last().pk


CASES: dict[str, tuple[Call, Any]] = {
    # name: (call with (scope, conversation), what a stranger gets)
    "get_conversation": (lambda s, c: services.get_conversation(s, c.pk), None),
    "get_conversation_or_404": (
        lambda s, c: services.get_conversation_or_404(s, c.pk),
        Http404,
    ),
    "set_generated_title": (
        lambda s, c: services.set_generated_title(s, c.pk, "Mine now"),
        NotFound,
    ),
    "update_conversation": (
        lambda s, c: services.update_conversation(s, c.pk, title="Mine now"),
        NotFound,
    ),
    "delete_conversation": (
        lambda s, c: services.delete_conversation(s, c.pk),
        NotFound,
    ),
    "list_conversations": (lambda s, c: services.list_conversations(s), []),
    "search_messages": (lambda s, c: services.search_messages(s, "Paris"), []),
    "save_agent_state": (
        lambda s, c: services.save_agent_state(s, c.pk, envelope()),
        NotFound,
    ),
    "save_agent_state over a revision": (
        lambda s, c: services.save_agent_state(
            s, c.pk, envelope(), expected_revision=1
        ),
        NotFound,
    ),
    "state_revision": (lambda s, c: services.state_revision(s, c.pk), 0),
    "load_agent_state": (lambda s, c: services.load_agent_state(s, c.pk), None),
    "load_agent_state_revision": (
        lambda s, c: services.load_agent_state_revision(s, c.pk),
        (None, 0),
    ),
    "load_todos": (lambda s, c: services.load_todos(s, c.pk), []),
    "append_display_message": (
        lambda s, c: services.append_display_message(
            s, c.pk, message_type="user", content_type="text", content={"text": "hi"}
        ),
        NotFound,
    ),
    "append_display_messages": (
        lambda s, c: services.append_display_messages(
            s,
            c.pk,
            [{"message_type": "user", "content_type": "text", "content": {}}],
        ),
        NotFound,
    ),
    "append_text_message": (
        lambda s, c: services.append_text_message(s, c.pk, "user", "hi"),
        NotFound,
    ),
    "load_display_messages": (
        lambda s, c: services.load_display_messages(s, c.pk, limit=10),
        [],
    ),
    "load_display_messages with a cursor": (
        lambda s, c: services.load_display_messages(
            s, c.pk, before=DisplayMessage.objects.filter(conversation=c).last().pk
        ),
        [],
    ),
    "mark_tool_executing": (
        lambda s, c: services.mark_tool_executing(s, CALL),
        NotFound,
    ),
    "complete_tool_call": (
        lambda s, c: services.complete_tool_call(s, CALL, {"result": "x"}),
        NotFound,
    ),
    "fail_tool_call": (
        lambda s, c: services.fail_tool_call(s, CALL, {"error": "x"}),
        NotFound,
    ),
    "interrupt_tool_call": (
        lambda s, c: services.interrupt_tool_call(s, CALL, {"display_text": "x"}),
        NotFound,
    ),
    "cancel_tool_call": (lambda s, c: services.cancel_tool_call(s, CALL), NotFound),
    "record_hitl_decision": (
        lambda s, c: services.record_hitl_decision(s, CALL, "approved"),
        NotFound,
    ),
    "resolve_interrupted_tool_result": (
        lambda s, c: services.resolve_interrupted_tool_result(s, HELD, "done"),
        NotFound,
    ),
    "begin_run": (lambda s, c: services.begin_run(s, c.pk), NotFound),
    "finish_run": (
        lambda s, c: services.finish_run(s, last_run(c), status="completed"),
        NotFound,
    ),
    "discard_run": (lambda s, c: services.discard_run(s, last_run(c)), NotFound),
    "active_run": (lambda s, c: services.active_run(s, c.pk), NotFound),
    "request_cancel": (lambda s, c: services.request_cancel(s, c.pk), NotFound),
    # Never raises: a stranger's failure is not recorded (None), the owner's is.
    "record_failure": (
        lambda s, c: services.record_failure(
            s, c.pk, kind="state", operation="on_step", error=ValueError("x")
        ),
        None,
    ),
    "usage_totals": (
        lambda s, c: services.usage_totals(s, conversation_id=c.pk),
        NotFound,
    ),
    # A stranger's own totals: zeros, nothing of the owner's runs.
    "usage_totals of every conversation": (
        lambda s, c: services.usage_totals(s),
        services.UsageTotals(),
    ),
    "usage_by_conversation": (lambda s, c: services.usage_by_conversation(s), {}),
    "usage_by_turn": (lambda s, c: services.usage_by_turn(s, c.pk), NotFound),
    "rate_reply": (
        lambda s, c: services.rate_reply(s, reply_of(c), rating="up", comment="x"),
        NotFound,
    ),
    "clear_rating": (lambda s, c: services.clear_rating(s, reply_of(c)), NotFound),
    "feedback_for": (lambda s, c: services.feedback_for(s, c.pk), NotFound),
    # A conversation's filesystem, shared on its own (sharing.filesystems): the
    # owner's API, through one of the owner's conversations.
    "filesystem_of": (lambda s, c: filesystems.filesystem_of(s, c.pk), NotFound),
    "share_files": (
        lambda s, c: filesystems.share_files(s, c.pk, carol(), "read"),
        NotFound,
    ),
    "revoke_files": (
        lambda s, c: filesystems.revoke_files(s, c.pk, carol()),
        NotFound,
    ),
    "file_shares_of": (lambda s, c: filesystems.file_shares_of(s, c.pk), NotFound),
    # The same calls naming the conversation explicitly.
    "mark_tool_executing in a conversation": (
        lambda s, c: services.mark_tool_executing(s, CALL, conversation_id=c.pk),
        NotFound,
    ),
    "resolve_interrupted_tool_result in a conversation": (
        lambda s, c: services.resolve_interrupted_tool_result(
            s, HELD, "done", conversation_id=c.pk
        ),
        NotFound,
    ),
}


def test_every_public_service_function_has_a_tenancy_case() -> None:
    public = {
        name
        for name in services.__all__
        if callable(getattr(services, name)) and name[0].islower()
    }
    helpers = {
        # Creating names no existing conversation (see test_conversations.py).
        "create_conversation",
        "build_display_message",
        "conversation_cursor",
        "conversation_model",
        "display_message_cursor",
        "owned_conversations",
    }
    assert public - helpers <= set(CASES)


@pytest.fixture
def owned_world(scope: Scope, conversation: Any) -> Any:
    """A conversation with state, todos, messages, open tool calls and an ended
    run, all Alice's."""
    services.save_agent_state(
        scope,
        conversation.pk,
        envelope(todos=[{"id": "t1", "content": "Book hotel", "status": "pending"}]),
    )
    services.append_text_message(scope, conversation.pk, "user", "Paris in May?")
    services.append_text_message(scope, conversation.pk, "assistant", "Mild.")
    tool_call_row(scope, conversation, CALL)
    tool_call_row(scope, conversation, HELD)
    tool_result_row(scope, conversation, HELD, interrupted=True)
    run = services.begin_run(scope, conversation.pk)
    services.finish_run(scope, run.pk, status="completed")
    return conversation


@pytest.mark.parametrize("stranger", ["other_scope", "anonymous_scope"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_scope_that_does_not_own_the_conversation_gets_not_found(
    name: str, stranger: str, owned_world: Any, request: pytest.FixtureRequest
) -> None:
    call, expected = CASES[name]
    outsider: Scope = request.getfixturevalue(stranger)
    before = snapshot()
    if isinstance(expected, type) and issubclass(expected, Exception):
        with pytest.raises(expected) as caught:
            call(outsider, owned_world)
        # The message never says the object exists elsewhere.
        assert "not found" in str(caught.value).lower()
        assert "another" not in str(caught.value).lower()
    else:
        assert call(outsider, owned_world) == expected
    assert snapshot() == before


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_owner_gets_an_answer_from_the_same_calls(
    name: str, scope: Scope, owned_world: Any
) -> None:
    call, expected = CASES[name]
    result = call(scope, owned_world)  # raises nothing
    if expected == []:
        assert result
    elif expected is None:
        assert result is not None


def test_an_id_of_another_tenant_is_indistinguishable_from_an_unknown_id(
    other_scope: Scope, owned_world: Any
) -> None:
    with pytest.raises(NotFound) as theirs:
        services.update_conversation(other_scope, owned_world.pk, title="x")
    unknown = uuid.uuid4()
    with pytest.raises(NotFound) as nobody:
        services.update_conversation(other_scope, unknown, title="x")
    assert str(theirs.value).replace(str(owned_world.pk), "ID") == str(
        nobody.value
    ).replace(str(unknown), "ID")
