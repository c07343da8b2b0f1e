"""Conversations: create, read, update, delete (with cascade), list, search."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.http import Http404
from django.utils import timezone

from sagents_django import services
from sagents_django.exceptions import InvalidInput, NotFound
from sagents_django.models import AgentRun, AgentState, DisplayMessage
from sagents_django.scope import Scope

from .factories import envelope, snapshot

pytestmark = pytest.mark.django_db


def test_create_conversation_belongs_to_the_scopes_owner(
    scope: Scope, user: Any
) -> None:
    conversation = services.create_conversation(
        scope, title="  Trip  ", metadata={"lang": "fr"}
    )
    assert conversation.user == user
    assert conversation.title == "Trip"
    assert conversation.metadata == {"lang": "fr"}
    assert conversation.agent_id == f"conversation-{conversation.pk}"


def test_get_conversation_accepts_a_uuid_its_string_or_the_instance(
    scope: Scope, conversation: Any
) -> None:
    for key in (conversation.pk, str(conversation.pk), conversation):
        assert services.get_conversation(scope, key) == conversation


def test_get_conversation_returns_none_for_an_unknown_id(scope: Scope) -> None:
    assert services.get_conversation(scope, uuid.uuid4()) is None


def test_get_conversation_or_404_raises_http404_also_for_a_malformed_id(
    scope: Scope,
) -> None:
    for bad in (uuid.uuid4(), "not-a-uuid"):
        with pytest.raises(Http404):
            services.get_conversation_or_404(scope, bad)


def test_update_conversation_sets_title_and_replaces_metadata(
    scope: Scope, conversation: Any
) -> None:
    updated = services.update_conversation(
        scope, conversation.pk, title="Rome", metadata={"a": 1}
    )
    assert (updated.title, updated.metadata) == ("Rome", {"a": 1})
    conversation.refresh_from_db()
    assert (conversation.title, conversation.metadata) == ("Rome", {"a": 1})
    services.update_conversation(scope, conversation.pk, metadata={})
    conversation.refresh_from_db()
    assert (conversation.title, conversation.metadata) == ("Rome", {})


def test_update_conversation_moves_updated_at(scope: Scope, conversation: Any) -> None:
    before = conversation.updated_at
    updated = services.update_conversation(scope, conversation.pk, title="Later")
    assert updated.updated_at > before


def test_a_generated_title_names_an_untitled_conversation_only(
    scope: Scope, other_scope: Scope, conversation: Any
) -> None:
    untitled = services.create_conversation(scope)

    assert services.set_generated_title(scope, untitled.pk, "  Picnic plans ")
    assert not services.set_generated_title(scope, untitled.pk, "Second title")
    assert not services.set_generated_title(scope, untitled.pk, "   ")
    # A title a person chose wins over the agent's.
    assert not services.set_generated_title(scope, conversation.pk, "Agent's title")
    untitled.refresh_from_db()
    conversation.refresh_from_db()
    assert (untitled.title, conversation.title) == ("Picnic plans", "Trip planning")


@pytest.mark.parametrize("title", [None, 3, ["x"]])
def test_a_generated_title_that_is_not_text_is_refused(
    scope: Scope, title: Any
) -> None:
    untitled = services.create_conversation(scope)

    with pytest.raises(InvalidInput):
        services.set_generated_title(scope, untitled.pk, title)
    untitled.refresh_from_db()
    assert untitled.title == ""


def test_a_generated_title_is_not_found_in_another_tenants_conversation(
    other_scope: Scope,
) -> None:
    theirs = services.create_conversation(other_scope)
    scope_of_alice = Scope.for_user(None)

    with pytest.raises(NotFound):
        services.set_generated_title(scope_of_alice, theirs.pk, "Mine now")
    theirs.refresh_from_db()
    assert theirs.title == ""


def test_deleting_a_conversation_cascades_to_state_messages_and_runs(
    scope: Scope, conversation: Any, other_conversation: Any, other_scope: Scope
) -> None:
    for conv, owner in ((conversation, scope), (other_conversation, other_scope)):
        services.save_agent_state(owner, conv.pk, envelope())
        services.append_text_message(owner, conv.pk, "user", "hello")
        AgentRun.objects.create(conversation=conv, status="completed")
    services.delete_conversation(scope, conversation.pk)
    assert services.get_conversation(scope, conversation.pk) is None
    assert not AgentState.objects.filter(conversation_id=conversation.pk).exists()
    assert not DisplayMessage.objects.filter(conversation_id=conversation.pk).exists()
    assert not AgentRun.objects.filter(conversation_id=conversation.pk).exists()
    # The other tenant's rows are untouched.
    assert AgentState.objects.filter(conversation_id=other_conversation.pk).exists()
    assert DisplayMessage.objects.filter(conversation_id=other_conversation.pk).exists()
    assert AgentRun.objects.filter(conversation_id=other_conversation.pk).exists()


def test_deleting_twice_is_not_found(scope: Scope, conversation: Any) -> None:
    services.delete_conversation(scope, conversation.pk)
    with pytest.raises(NotFound, match="was not found"):
        services.delete_conversation(scope, conversation.pk)


def make_conversations(scope: Scope, count: int) -> list[Any]:
    """``count`` conversations with distinct, known updated_at (oldest first)."""
    model = services.conversation_model()
    start = timezone.now() - timedelta(days=1)
    made = []
    for index in range(count):
        conversation = services.create_conversation(scope, title=f"Chat {index:02}")
        model.objects.filter(pk=conversation.pk).update(
            updated_at=start + timedelta(minutes=index)
        )
        made.append(model.objects.get(pk=conversation.pk))
    return made


def test_list_conversations_is_newest_first_with_limit_and_offset(
    scope: Scope, other_conversation: Any
) -> None:
    made = make_conversations(scope, 5)
    newest_first = list(reversed(made))
    assert services.list_conversations(scope) == newest_first
    assert services.list_conversations(scope, limit=2) == newest_first[:2]
    assert services.list_conversations(scope, limit=2, offset=2) == newest_first[2:4]
    assert services.list_conversations(scope, order_by="title") == made
    assert services.list_conversations(scope, order_by="-title") == newest_first


@pytest.mark.parametrize("order_by", services.ORDERINGS)
def test_cursor_pages_walk_every_conversation_once(scope: Scope, order_by: str) -> None:
    made = make_conversations(scope, 7)
    # Two rows share an updated_at: the id breaks the tie.
    model = services.conversation_model()
    model.objects.filter(pk=made[3].pk).update(updated_at=made[4].updated_at)
    expected = services.list_conversations(scope, order_by=order_by, limit=100)
    seen: list[Any] = []
    cursor = None
    while True:
        page = services.list_conversations(
            scope, order_by=order_by, limit=3, cursor=cursor
        )
        seen.extend(page)
        if len(page) < 3:
            break
        cursor = services.conversation_cursor(page[-1], order_by=order_by)
    assert seen == expected
    assert len(seen) == 7


def test_a_cursor_survives_an_update_of_a_row_already_seen(scope: Scope) -> None:
    made = make_conversations(scope, 4)
    first = services.list_conversations(scope, limit=2)
    cursor = services.conversation_cursor(first[-1])
    # The newest conversation is used again: it moves, the next page does not.
    services.append_text_message(scope, first[0].pk, "user", "again")
    assert services.list_conversations(scope, limit=2, cursor=cursor) == [
        made[1],
        made[0],
    ]


@pytest.mark.parametrize(
    "options",
    [
        {"order_by": "password"},
        {"order_by": "user__password"},
        {"order_by": None},
        {"limit": 0},
        {"limit": 1001},
        {"limit": "5"},
        {"limit": True},
        {"offset": -1},
        {"cursor": "garbage!"},
        {"cursor": 42},
        {"cursor": "W10"},
        {"cursor": "x" * 5000},
    ],
)
def test_list_conversations_refuses_bad_options(
    scope: Scope, conversation: Any, options: dict[str, Any]
) -> None:
    with pytest.raises(InvalidInput):
        services.list_conversations(scope, **options)


def test_a_cursor_is_tied_to_its_ordering(scope: Scope, conversation: Any) -> None:
    cursor = services.conversation_cursor(conversation, order_by="title")
    with pytest.raises(InvalidInput, match="order_by='title'"):
        services.list_conversations(scope, cursor=cursor)
    with pytest.raises(InvalidInput, match="either offset or cursor"):
        services.list_conversations(scope, order_by="title", cursor=cursor, offset=1)


def test_search_finds_titles_and_message_text_case_insensitively(
    scope: Scope, other_scope: Scope, other_conversation: Any
) -> None:
    paris = services.create_conversation(scope, title="Paris in May")
    rome = services.create_conversation(scope, title="Rome")
    hit = services.append_text_message(scope, rome.pk, "assistant", "Or go to PARIS?")
    services.append_text_message(scope, rome.pk, "assistant", "Lisbon is nice")
    services.append_text_message(
        other_scope, other_conversation.pk, "user", "paris secrets"
    )
    results = services.search_messages(scope, "paris")
    assert [(r.conversation, r.message) for r in results] == [
        (paris, None),
        (rome, hit),
    ]


def test_search_matches_unicode_text(scope: Scope, conversation: Any) -> None:
    message = services.append_text_message(
        scope, conversation.pk, "user", "مرحبا بالعالم 🎉 café"
    )
    assert [r.message for r in services.search_messages(scope, "🎉 café")] == [message]
    assert [r.message for r in services.search_messages(scope, "بالعالم")] == [message]


def test_search_treats_like_wildcards_literally(
    scope: Scope, conversation: Any
) -> None:
    services.append_text_message(scope, conversation.pk, "user", "plain words")
    assert services.search_messages(scope, "%") == []
    assert services.search_messages(scope, "_") == []


def test_search_is_bounded_by_limit(scope: Scope, conversation: Any) -> None:
    services.append_display_messages(
        scope,
        conversation.pk,
        [
            {"message_type": "user", "content_type": "text", "content": {"text": "x"}}
            for _ in range(30)
        ],
    )
    assert len(services.search_messages(scope, "x")) == 20
    assert len(services.search_messages(scope, "x", limit=5)) == 5


@pytest.mark.parametrize(
    "query, options",
    [("", {}), ("   ", {}), ("x" * 201, {}), (None, {}), ("x", {"limit": 0})],
)
def test_search_refuses_bad_arguments(
    scope: Scope, query: Any, options: dict[str, Any]
) -> None:
    with pytest.raises(InvalidInput):
        services.search_messages(scope, query, **options)


BAD_CREATE = [
    {"title": 5},
    {"title": "x" * 256},
    {"metadata": "text"},
    {"metadata": {1: "int key"}},
    {"metadata": {"x": float("nan")}},
    {"metadata": {"x": object()}},
    {"metadata": {"x": "y" * (1024 * 1024 + 1)}},
]


@pytest.mark.parametrize("options", BAD_CREATE)
def test_create_conversation_refuses_bad_input_and_creates_nothing(
    scope: Scope, options: dict[str, Any]
) -> None:
    before = snapshot()
    with pytest.raises(InvalidInput):
        services.create_conversation(scope, **options)
    assert snapshot() == before


@pytest.mark.parametrize("options", [*BAD_CREATE, {"title": None}])
def test_update_conversation_refuses_bad_input_and_changes_nothing(
    scope: Scope, conversation: Any, options: dict[str, Any]
) -> None:
    before = snapshot()
    with pytest.raises(InvalidInput):
        services.update_conversation(scope, conversation.pk, **options)
    assert snapshot() == before


@pytest.mark.parametrize("bad_id", ["not-a-uuid", 42, None, "", b"bytes", 1.5])
@pytest.mark.parametrize(
    "call",
    [
        lambda s, i: services.get_conversation(s, i),
        lambda s, i: services.update_conversation(s, i, title="x"),
        lambda s, i: services.delete_conversation(s, i),
        lambda s, i: services.save_agent_state(s, i, envelope()),
        lambda s, i: services.load_agent_state(s, i),
        lambda s, i: services.load_todos(s, i),
        lambda s, i: services.append_text_message(s, i, "user", "x"),
        lambda s, i: services.load_display_messages(s, i),
    ],
)
def test_a_malformed_conversation_id_is_invalid_input(
    scope: Scope, conversation: Any, bad_id: Any, call: Any
) -> None:
    before = snapshot()
    with pytest.raises(InvalidInput, match="conversation_id must be a UUID"):
        call(scope, bad_id)
    assert snapshot() == before


@pytest.mark.parametrize("bad_id", ["not-a-uuid", 42, "", 1.5])
def test_a_malformed_conversation_id_narrowing_a_tool_call_is_invalid_input(
    scope: Scope, bad_id: Any
) -> None:
    # conversation_id=None is allowed there: it means "in any of the scope's".
    with pytest.raises(InvalidInput, match="conversation_id must be a UUID"):
        services.mark_tool_executing(scope, "c", conversation_id=bad_id)


def test_nul_characters_in_title_and_metadata_are_replaced(scope: Scope) -> None:
    conversation = services.create_conversation(
        scope, title="a\x00b", metadata={"k\x00": "v\x00"}
    )
    conversation.refresh_from_db()
    assert conversation.title == "a\ufffdb"
    services.update_conversation(scope, conversation.pk, title="x\ud800y")
    conversation.refresh_from_db()
    assert conversation.title == "x\ufffdy"
    assert conversation.metadata == {"k\ufffd": "v\ufffd"}
