"""What a share lends: the scope's querysets keep a shared user to the one
conversation and to the share's access, through every service function."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.contrib.auth.models import Group

from sagents_django import services
from sagents_django.exceptions import InvalidInput, NotFound
from sagents_django.scope import Scope
from sagents_django.sharing import services as sharing
from sagents_django.sharing.access import scope_for
from tests.django.factories import snapshot
from tests.django.test_tenancy import CASES

pytestmark = pytest.mark.django_db

READS = {
    "get_conversation",
    "get_conversation_or_404",
    "list_conversations",
    "search_messages",
    "state_revision",
    "load_agent_state",
    "load_agent_state_revision",
    "load_todos",
    "load_display_messages",
    "load_display_messages with a cursor",
    "active_run",
    "usage_totals",
    "usage_totals of every conversation",
    "usage_by_conversation",
    "usage_by_turn",
    "feedback_for",
    # A person's own rating of a reply they can read: theirs, not the transcript's.
    "rate_reply",
    "clear_rating",
    # Never raises: an operator's record, not a change of the conversation.
    "record_failure",
}
WRITES = sorted(set(CASES) - READS)


def lent(owner: Scope, world: Any, user: Any, access: str) -> Scope:
    sharing.share(owner, world.pk, user, access)
    return scope_for(Scope.for_user(user), world.pk, access="read")


@pytest.mark.parametrize("name", WRITES)
def test_a_read_share_changes_nothing_through_any_service(
    name: str, scope: Scope, other_user: Any, owned_world: Any
) -> None:
    reader = lent(scope, owned_world, other_user, "read")
    call, _ = CASES[name]
    before = snapshot()
    with pytest.raises(NotFound):
        call(reader, owned_world)
    assert snapshot() == before


@pytest.mark.parametrize(
    "name", sorted(READS - {"rate_reply", "clear_rating", "record_failure"})
)
def test_a_read_share_reads_what_the_owner_reads(
    name: str, scope: Scope, other_user: Any, owned_world: Any
) -> None:
    reader = lent(scope, owned_world, other_user, "read")
    call, _ = CASES[name]
    assert call(reader, owned_world) == call(scope, owned_world)


@pytest.mark.parametrize("access", ["read", "write"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_lent_scope_sees_nothing_else_of_the_owners(
    name: str, access: str, scope: Scope, other_user: Any, owned_world: Any
) -> None:
    """Shared one conversation, the user is a stranger to the owner's others."""
    shared = services.create_conversation(scope, title="Shared one")
    holder = lent(scope, shared, other_user, access)
    call, expected = CASES[name]
    before = snapshot()
    if isinstance(expected, type) and issubclass(expected, Exception):
        with pytest.raises(expected):
            call(holder, owned_world)
    elif name in {"list_conversations", "usage_by_conversation"}:
        assert owned_world.pk not in {
            getattr(c, "pk", c) for c in call(holder, owned_world)
        }
    elif name != "usage_totals of every conversation":
        assert call(holder, owned_world) == expected
    assert snapshot() == before


def test_a_write_share_sends_in_the_owners_turn_and_names_who_acted(
    scope: Scope, other_user: Any, conversation: Any
) -> None:
    from sagents_django.models import AgentRun
    from sagents_django.runtime import admission
    from sagents_django.runtime.requests import RunRequest

    writer = lent(scope, conversation, other_user, "write")
    writer = scope_for(Scope.for_user(other_user), conversation.pk, access="write")
    submission = admission.add_message(writer, conversation.pk, "From Bob")
    run = AgentRun.objects.get(pk=submission.run_id)
    run_scope = Scope.from_dict(RunRequest.of(run).scope or {})
    # The run acts for the owner, on this conversation only, as Bob.
    assert run_scope.user == other_user
    assert run_scope.owner_pk(type(conversation)) == scope.user.pk
    assert run_scope.lent is not None and run_scope.lent.access == "write"
    row = services.load_display_messages(scope, conversation.pk)[0]
    assert row.metadata["sent_by"] == {"id": other_user.pk, "name": "bob"}
    services.finish_run(run_scope, run.pk, status="completed")


def test_a_read_share_starts_no_turn_and_decides_nothing(
    scope: Scope, other_user: Any, conversation: Any
) -> None:
    from sagents_django.runtime import admission

    reader = lent(scope, conversation, other_user, "read")
    before = snapshot()
    for verb in (
        lambda: admission.add_message(reader, conversation.pk, "hi"),
        lambda: admission.execute(reader, conversation.pk),
        lambda: admission.resume(reader, conversation.pk, [{"type": "approve"}]),
        lambda: admission.dismiss(reader, conversation.pk),
        lambda: admission.cancel(reader, conversation.pk),
    ):
        with pytest.raises(NotFound):
            verb()
    assert snapshot() == before
    with pytest.raises(NotFound):
        scope_for(Scope.for_user(other_user), conversation.pk, access="write")


def test_no_share_renames_deletes_forks_resets_or_shares(
    scope: Scope, other_user: Any, carol: Any, conversation: Any
) -> None:
    from sagents_django.runtime import forks, stored_state

    writer = lent(scope, conversation, other_user, "write")
    before = snapshot()
    for verb in (
        lambda: services.update_conversation(writer, conversation.pk, title="x"),
        lambda: services.delete_conversation(writer, conversation.pk),
        lambda: forks.fork(writer, conversation.pk),
        lambda: stored_state.reset(writer, conversation.pk),
        lambda: stored_state.export_state(writer, conversation.pk),
        lambda: sharing.share(writer, conversation.pk, carol, "read"),
        lambda: sharing.shares_of(writer, conversation.pk),
        lambda: sharing.revoke(writer, conversation.pk, other_user),
        lambda: sharing.share(Scope.for_user(other_user), conversation.pk, carol),
    ):
        with pytest.raises(NotFound):
            verb()
    assert snapshot() == before
    with pytest.raises(NotFound):
        scope_for(Scope.for_user(other_user), conversation.pk, access="own")


def test_a_group_share_reaches_its_members_while_they_are_members(
    scope: Scope, other_user: Any, conversation: Any
) -> None:
    team = Group.objects.create(name="travel")
    team.user_set.add(other_user)
    sharing.share(scope, conversation.pk, team, "read")
    bob = Scope.for_user(other_user)
    assert scope_for(bob, conversation.pk).lent is not None
    assert [s.conversation for s in sharing.shared_with_me(bob)] == [conversation]
    team.user_set.remove(other_user)
    with pytest.raises(NotFound):
        scope_for(bob, conversation.pk)
    assert sharing.shared_with_me(bob) == []


def test_the_best_of_a_users_shares_counts(
    scope: Scope, other_user: Any, conversation: Any
) -> None:
    team = Group.objects.create(name="editors")
    team.user_set.add(other_user)
    sharing.share(scope, conversation.pk, other_user, "read")
    sharing.share(scope, conversation.pk, team, "write")
    bob = Scope.for_user(other_user)
    assert scope_for(bob, conversation.pk, access="write").lent.access == "write"
    assert sharing.shared_with_me(bob)[0].access == "write"


def test_a_revoked_share_lends_nothing_not_even_to_a_queued_run(
    scope: Scope, other_user: Any, conversation: Any
) -> None:
    writer = lent(scope, conversation, other_user, "write")
    stored = writer.to_dict()
    assert sharing.revoke(scope, conversation.pk, other_user) is True
    assert sharing.revoke(scope, conversation.pk, other_user) is False
    with pytest.raises(NotFound):
        scope_for(Scope.for_user(other_user), conversation.pk)
    rebuilt = Scope.from_dict(stored)
    assert services.get_conversation(rebuilt, conversation.pk) is None
    with pytest.raises(NotFound):
        services.append_text_message(rebuilt, conversation.pk, "user", "late")


def test_a_narrowed_share_rebuilds_as_read_only(
    scope: Scope, other_user: Any, conversation: Any
) -> None:
    writer = lent(scope, conversation, other_user, "write")
    sharing.share(scope, conversation.pk, other_user, "read")
    rebuilt = Scope.from_dict(writer.to_dict())
    assert rebuilt.read_only
    assert services.get_conversation(rebuilt, conversation.pk) == conversation


def test_a_forged_lent_scope_json_gets_nothing(
    scope: Scope, other_user: Any, conversation: Any
) -> None:
    forged = {
        "user_id": other_user.pk,
        "lent": {"conversation_id": str(conversation.pk), "access": "write"},
    }
    rebuilt = Scope.from_dict(forged)
    assert services.get_conversation(rebuilt, conversation.pk) is None
    assert services.list_conversations(rebuilt) == []


@pytest.mark.parametrize(
    "lent_json",
    [
        "write",
        {"conversation_id": "not-a-uuid", "access": "write"},
        {"conversation_id": str(uuid.uuid4()), "access": "admin"},
        {"conversation_id": str(uuid.uuid4()), "access": "read", "extra": 1},
        {"conversation_id": 7, "access": "read"},
        {"conversation_id": "x" * 10_000, "access": "read"},
    ],
)
def test_a_malformed_lent_scope_json_is_invalid_input(
    other_user: Any, lent_json: Any
) -> None:
    with pytest.raises(InvalidInput):
        Scope.from_dict({"user_id": other_user.pk, "lent": lent_json})


def test_a_lent_scope_cannot_be_pointed_at_another_conversation(
    scope: Scope, other_user: Any, conversation: Any
) -> None:
    writer = lent(scope, conversation, other_user, "write")
    theirs = services.create_conversation(scope, title="Not shared")
    with pytest.raises(NotFound):
        scope_for(writer, theirs.pk)
    with pytest.raises(NotFound):
        scope_for(writer, uuid.uuid4())
    with pytest.raises(InvalidInput):
        scope_for(writer, "not-a-uuid")
