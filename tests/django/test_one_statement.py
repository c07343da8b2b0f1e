"""Appends and tool-call transitions as single statements (PostgreSQL), and the
savepoint rule: one inside a caller's transaction, none in autocommit.

The autocommit tests need real commits (``transaction=True``); the others run, as
the rest of the suite, inside a test transaction, which is what a caller's open
transaction looks like to the services.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest
from django.db import DatabaseError, connection, models, transaction
from django.test.utils import CaptureQueriesContext

from sagents_django import services
from sagents_django.core.messages import Message
from sagents_django.core.persistence import PersistenceContext
from sagents_django.exceptions import NotFound
from sagents_django.models import DisplayMessage
from sagents_django.persistence import DjangoDisplayMessagePersistence
from sagents_django.scope import Scope

from .factories import snapshot, tool_call_row

postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the one-statement path is PostgreSQL's"
)


def text(value: str) -> dict[str, Any]:
    return {"message_type": "user", "content_type": "text", "content": {"text": value}}


def context_of(conversation: Any) -> PersistenceContext:
    return PersistenceContext(
        agent_id=conversation.agent_id, conversation_id=str(conversation.pk)
    )


def statements(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries]


# In autocommit: one statement, no transaction or savepoint around it -------------


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_an_append_in_autocommit_is_one_statement(
    scope: Scope, conversation: Any
) -> None:
    before = conversation.updated_at
    with CaptureQueriesContext(connection) as queries:
        rows = services.append_display_messages(
            scope, conversation.pk, [text("a"), text("b"), text("c")]
        )
    [sql] = statements(queries)
    assert sql.startswith("WITH") and "INSERT INTO" in sql
    assert connection.get_autocommit()  # no transaction was opened around it
    stored = list(DisplayMessage.objects.order_by("pk"))
    assert [r.pk for r in rows] == [r.pk for r in stored]
    assert [r.inserted_at for r in rows] == [r.inserted_at for r in stored]
    assert [r.content for r in stored] == [{"text": t} for t in "abc"]
    assert all(not r._state.adding and r._state.db == "default" for r in rows)
    conversation.refresh_from_db()
    assert conversation.updated_at > before


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_an_append_outside_the_scope_writes_nothing(
    other_scope: Scope, anonymous_scope: Scope, conversation: Any
) -> None:
    before = snapshot()
    for stranger in (other_scope, anonymous_scope):
        with pytest.raises(NotFound):
            services.append_text_message(stranger, conversation.pk, "user", "hi")
    assert snapshot() == before


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_a_transition_in_autocommit_is_one_statement(
    scope: Scope, conversation: Any
) -> None:
    call = tool_call_row(scope, conversation, "c1")
    with CaptureQueriesContext(connection) as queries:
        row = services.mark_tool_executing(scope, "c1", conversation_id=conversation.pk)
    [sql] = statements(queries)
    assert sql.startswith("UPDATE") and "FOR UPDATE" in sql
    with CaptureQueriesContext(connection) as queries:
        done = services.complete_tool_call(scope, "c1", {"result": "42"})
    assert len(queries) == 1
    # The row comes back whole and converted, as the ORM would load it.
    stored = DisplayMessage.objects.get(pk=call.pk)
    assert (row.pk, row.status) == (call.pk, "executing")
    assert (done.status, done.metadata) == ("completed", {"result": "42"})
    assert done.content == stored.content == call.content
    assert isinstance(done.inserted_at, datetime) and done.inserted_at.tzinfo
    assert [getattr(done, f.attname) for f in DisplayMessage._meta.concrete_fields] == [
        getattr(stored, f.attname) for f in DisplayMessage._meta.concrete_fields
    ]


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_save_message_in_autocommit_adds_no_savepoint(
    scope: Scope, conversation: Any
) -> None:
    display = DjangoDisplayMessagePersistence()
    with CaptureQueriesContext(connection) as queries:
        rows = display.save_message(scope, Message.user("hi"), context_of(conversation))
    assert len(rows) == 1
    [sql] = statements(queries)
    assert "SAVEPOINT" not in sql


# Inside a caller's transaction: a savepoint, so a failure does not poison it ------


@pytest.fixture
def refuse_boom(db: None) -> None:
    """A trigger that fails any display row whose text is "boom", and any change
    to a tool call's status to "failed" (a database error after validation)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'refused'; END $$"
            )
            cursor.execute(
                "CREATE TRIGGER refuse_insert BEFORE INSERT ON sagents_display_messages"
                " FOR EACH ROW WHEN (NEW.content->>'text' = 'boom')"
                " EXECUTE FUNCTION refuse_boom()"
            )
            cursor.execute(
                "CREATE TRIGGER refuse_update BEFORE UPDATE ON sagents_display_messages"
                " FOR EACH ROW WHEN (NEW.status = 'failed')"
                " EXECUTE FUNCTION refuse_boom()"
            )
        else:
            cursor.execute(
                "CREATE TRIGGER refuse_insert BEFORE INSERT ON sagents_display_messages"
                " WHEN json_extract(NEW.content, '$.text') = 'boom'"
                " BEGIN SELECT RAISE(ABORT, 'refused'); END"
            )
            cursor.execute(
                "CREATE TRIGGER refuse_update BEFORE UPDATE ON sagents_display_messages"
                " WHEN NEW.status = 'failed' BEGIN SELECT RAISE(ABORT, 'refused'); END"
            )


@pytest.mark.django_db
def test_a_failed_append_leaves_the_callers_transaction_usable(
    scope: Scope, conversation: Any, refuse_boom: None
) -> None:
    with transaction.atomic():
        with pytest.raises(DatabaseError):
            services.append_text_message(scope, conversation.pk, "user", "boom")
        kept = services.append_text_message(scope, conversation.pk, "user", "fine")
    loaded = services.load_display_messages(scope, conversation.pk)
    assert [r.pk for r in loaded] == [kept.pk]


@pytest.mark.django_db
def test_a_failed_transition_leaves_the_callers_transaction_usable(
    scope: Scope, conversation: Any, refuse_boom: None
) -> None:
    call = tool_call_row(scope, conversation, "c1")
    with transaction.atomic():
        with pytest.raises(DatabaseError):
            services.fail_tool_call(scope, "c1", {"error": "x"})
        services.mark_tool_executing(scope, "c1")
    call.refresh_from_db()
    assert (call.status, call.metadata) == ("executing", {})


@pytest.mark.django_db
def test_a_failed_save_message_leaves_the_callers_transaction_usable(
    scope: Scope, conversation: Any, refuse_boom: None
) -> None:
    display = DjangoDisplayMessagePersistence()
    context = context_of(conversation)
    with transaction.atomic():
        assert display.save_message(scope, Message.user("boom"), context) == []
        assert len(display.save_message(scope, Message.user("fine"), context)) == 1
    assert [r.content["text"] for r in DisplayMessage.objects.all()] == ["fine"]


# Whatever the scope's queryset does, its SQL is the ownership condition ----------


@dataclass(frozen=True, kw_only=True)
class UsernameScope(Scope):
    """Owns the conversations of users with its user's name (a join)."""

    def filter_conversations(self, queryset: models.QuerySet) -> models.QuerySet:
        return queryset.filter(user__username=self.user.username)


@pytest.mark.django_db
def test_a_scope_that_joins_is_the_ownership_condition(
    user: Any, other_user: Any, conversation: Any
) -> None:
    mine, theirs = UsernameScope(user=user), UsernameScope(user=other_user)
    services.append_text_message(mine, conversation.pk, "user", "100% sure")
    tool_call_row(mine, conversation, "call_%s%")
    before = snapshot()
    with pytest.raises(NotFound):
        services.append_text_message(theirs, conversation.pk, "user", "hi")
    with pytest.raises(NotFound):
        services.mark_tool_executing(theirs, "call_%s%")
    assert snapshot() == before
    assert services.mark_tool_executing(mine, "call_%s%").status == "executing"


# Ownership written by sql.py is exactly Scope.filter_conversations ---------------


@dataclass(frozen=True, kw_only=True)
class OrmScope(Scope):
    """The default scope's ownership, through a filter of its own: the services
    cannot write its SQL themselves, so every call takes the ORM path."""

    def filter_conversations(self, queryset: models.QuerySet) -> models.QuerySet:
        return super().filter_conversations(queryset)


@dataclass(frozen=True, kw_only=True)
class ResolvingScope(Scope):
    """Overrides only resolve_owner, as a team site's scope does."""

    @classmethod
    def resolve_owner(cls, user: Any) -> Any:
        return user


def scopes_of(user: Any, other_user: Any) -> dict[str, dict[str, Any]]:
    """Scope fields by case: owners given every way a scope may hold them."""
    from django.contrib.auth.models import AnonymousUser, Group

    # A group whose id is the user's: an owner of the wrong model owns nothing.
    group = Group.objects.create(name="same id")
    Group.objects.filter(pk=group.pk).update(id=user.pk)
    return {
        "owner": {"user": user, "owner": user},
        "owner by id": {"user": user, "owner": user.pk},
        "owner by id as text": {"user": user, "owner": str(user.pk)},
        "another user": {"user": other_user, "owner": other_user},
        "anonymous": {"user": AnonymousUser(), "owner": None},
        "a group with the user's id": {
            "user": user,
            "owner": Group.objects.get(pk=user.pk),
        },
    }


def outcomes(scope: Scope, conversation: Any) -> list[str]:
    """What an append and a transition answer for ``scope``."""
    found = []
    for call in (
        lambda: services.append_text_message(scope, conversation.pk, "user", "hi"),
        lambda: services.mark_tool_executing(
            scope, "c1", conversation_id=conversation.pk
        ),
        lambda: services.complete_tool_call(scope, "c1", {"ms": 3}),
    ):
        try:
            row = call()
        except NotFound as exc:
            found.append(f"not found: {exc}".replace(str(conversation.pk), "<id>"))
        else:
            found.append(f"{row.content_type} {row.status} {row.metadata}")
    return found


@pytest.mark.django_db
def test_the_one_statement_path_and_the_orm_path_answer_alike_for_every_scope(
    user: Any, other_user: Any, scope: Scope
) -> None:
    cases = scopes_of(user, other_user)
    answers: dict[str, list[list[str]]] = {}
    for name, fields in cases.items():
        answers[name] = []
        for scope_class in (Scope, OrmScope):
            conversation = services.create_conversation(scope, title=name)
            tool_call_row(scope, conversation, "c1")
            before = snapshot()
            found = outcomes(scope_class(**fields), conversation)
            if found[0].startswith("not found"):
                assert snapshot() == before, (name, scope_class)
            answers[name].append(found)
    for name, (direct, orm) in answers.items():
        assert direct == orm, name
    assert answers["owner"][0] == [
        "text completed {}",
        "tool_call executing {}",
        "tool_call completed {'ms': 3}",
    ]
    assert answers["owner by id as text"][0] == answers["owner"][0]
    for name in ("another user", "anonymous", "a group with the user's id"):
        assert all(a.startswith("not found") for a in answers[name][0]), name


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_a_scope_that_only_resolves_its_owner_writes_in_one_statement(
    user: Any, conversation: Any
) -> None:
    resolving = ResolvingScope.for_user(user)
    with CaptureQueriesContext(connection) as queries:
        services.append_text_message(resolving, conversation.pk, "user", "hi")
        tool_call_row(resolving, conversation, "c1")
        services.mark_tool_executing(resolving, "c1")
    assert len(queries) == 3


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_a_scope_with_a_filter_of_its_own_takes_the_orm_path(
    user: Any, conversation: Any
) -> None:
    own = OrmScope.for_user(user)
    with CaptureQueriesContext(connection) as queries:
        row = services.append_text_message(own, conversation.pk, "user", "hi")
    sql = statements(queries)
    # BEGIN is not logged; the ownership check, the INSERT and the COMMIT are.
    assert len(sql) > 1 and not any(s.startswith("WITH") for s in sql)
    assert DisplayMessage.objects.get().pk == row.pk
