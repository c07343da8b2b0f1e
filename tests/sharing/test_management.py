"""The owner's sharing API: share, revoke, list; the site's tenancy rule; links."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core import signing
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from sagents_django import services
from sagents_django.exceptions import InvalidInput, NotFound
from sagents_django.scope import Scope
from sagents_django.sharing import links
from sagents_django.sharing import services as sharing
from sagents_django.sharing.models import ConversationShare, ShareLink
from tests.django.factories import snapshot

pytestmark = pytest.mark.django_db

TENANTS = {"SHARE_WITH": "tests.sharing.tenants.share_with"}


def person(name: str, email: str = "") -> Any:
    return get_user_model().objects.create_user(username=name, email=email)


def test_sharing_again_changes_the_access_and_lists_once(
    scope: Scope, other_user: Any, conversation: Any
) -> None:
    sharing.share(scope, conversation.pk, other_user, "read")
    row = sharing.share(scope, conversation.pk, other_user, "write")
    assert [(s.user, s.access) for s in sharing.shares_of(scope, conversation.pk)] == [
        (other_user, "write")
    ]
    assert row.created_by == scope.user


@pytest.mark.parametrize(
    "target, access",
    [
        ("bob", "admin"),
        ("bob", None),
        ("bob", ["read"]),
        ("a string", "read"),
        (None, "read"),
    ],
)
def test_bad_arguments_are_invalid_input_and_write_nothing(
    scope: Scope, other_user: Any, conversation: Any, target: Any, access: Any
) -> None:
    who = other_user if target == "bob" else target
    before = snapshot()
    with pytest.raises(InvalidInput):
        sharing.share(scope, conversation.pk, who, access)
    assert snapshot() == before
    assert not ConversationShare.objects.exists()


def test_the_owner_cannot_share_with_themselves(
    scope: Scope, conversation: Any
) -> None:
    with pytest.raises(InvalidInput):
        sharing.share(scope, conversation.pk, scope.user, "read")


def test_another_tenants_ids_are_not_found(
    scope: Scope, other_scope: Scope, other_conversation: Any, carol: Any
) -> None:
    for verb in (
        lambda: sharing.share(scope, other_conversation.pk, carol, "read"),
        lambda: sharing.revoke(scope, other_conversation.pk, carol),
        lambda: sharing.shares_of(scope, other_conversation.pk),
        lambda: sharing.find_target(scope, other_conversation.pk, "carol"),
        lambda: links.create_link(scope, other_conversation.pk),
        lambda: links.links_of(scope, other_conversation.pk),
        lambda: sharing.share(scope, uuid.uuid4(), carol, "read"),
    ):
        with pytest.raises(NotFound):
            verb()
    with pytest.raises(InvalidInput):
        sharing.share(scope, "not-a-uuid", carol, "read")
    assert not ConversationShare.objects.exists() and not ShareLink.objects.exists()


def test_a_share_of_another_owners_conversation_cannot_be_revoked_by_id(
    scope: Scope, other_scope: Scope, other_conversation: Any, carol: Any
) -> None:
    theirs = sharing.share(other_scope, other_conversation.pk, carol, "read")
    mine = services.create_conversation(scope)
    assert sharing.revoke_share(scope, mine.pk, theirs.pk) is False
    assert ConversationShare.objects.filter(pk=theirs.pk).exists()
    with pytest.raises(InvalidInput):
        sharing.revoke_share(scope, mine.pk, str(theirs.pk))


def test_a_site_that_forbids_another_tenant_refuses_the_share(settings: Any) -> None:
    settings.SAGENTS = TENANTS
    alice = person("alice", "alice@acme.test")
    owner = Scope.for_user(alice)
    conversation = services.create_conversation(owner)
    colleague = person("ann", "ann@acme.test")
    outsider = person("olga", "olga@other.test")
    before = snapshot()
    with pytest.raises(PermissionDenied):
        sharing.share(owner, conversation.pk, outsider, "read")
    assert snapshot() == before and not ConversationShare.objects.exists()
    mixed = Group.objects.create(name="mixed")
    mixed.user_set.add(colleague, outsider)
    with pytest.raises(PermissionDenied):
        sharing.share(owner, conversation.pk, mixed, "read")
    # The panel's look-up answers "not found" for both: no probing across tenants.
    with pytest.raises(NotFound):
        sharing.find_target(owner, conversation.pk, "olga@other.test")
    with pytest.raises(NotFound):
        sharing.find_target(owner, conversation.pk, "nobody")
    assert sharing.find_target(owner, conversation.pk, "ANN@acme.test") == colleague
    sharing.share(owner, conversation.pk, colleague, "write")
    assert [s.user for s in sharing.shares_of(owner, conversation.pk)] == [colleague]


def test_an_inactive_user_cannot_be_shared_with_or_use_a_share(
    scope: Scope, other_user: Any, conversation: Any
) -> None:
    sharing.share(scope, conversation.pk, other_user, "read")
    other_user.is_active = False
    other_user.save()
    assert sharing.shared_with_me(Scope.for_user(other_user)) == []
    with pytest.raises(PermissionDenied):
        sharing.share(scope, conversation.pk, other_user, "write")


def test_deleting_the_conversation_deletes_its_shares_and_links(
    scope: Scope, other_user: Any, conversation: Any
) -> None:
    sharing.share(scope, conversation.pk, other_user, "read")
    token = links.token_of(links.create_link(scope, conversation.pk))
    services.delete_conversation(scope, conversation.pk)
    assert not ConversationShare.objects.exists()
    with pytest.raises(NotFound):
        links.open_link(token)


def test_a_link_opens_until_revoked(scope: Scope, conversation: Any) -> None:
    link = links.create_link(scope, conversation.pk)
    token = links.token_of(link)
    assert links.open_link(token).conversation == conversation
    assert links.links_of(scope, conversation.pk) == [link]
    assert links.revoke_link(scope, conversation.pk, link.pk) is True
    assert links.revoke_link(scope, conversation.pk, link.pk) is False
    with pytest.raises(NotFound):
        links.open_link(token)
    assert links.links_of(scope, conversation.pk) == []


def test_a_link_stops_at_its_expiry(scope: Scope, conversation: Any) -> None:
    link = links.create_link(scope, conversation.pk, expires_in=timedelta(days=1))
    token = links.token_of(link)
    assert links.open_link(token) == link
    ShareLink.objects.filter(pk=link.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    with pytest.raises(NotFound):
        links.open_link(token)


@pytest.mark.parametrize(
    "expires_in", [timedelta(0), timedelta(days=-1), timedelta(days=400), 7, "7"]
)
def test_a_bad_lifetime_is_invalid_input(
    scope: Scope, conversation: Any, expires_in: Any
) -> None:
    with pytest.raises(InvalidInput):
        links.create_link(scope, conversation.pk, expires_in=expires_in)
    assert not ShareLink.objects.exists()


def test_forged_and_altered_tokens_open_nothing(
    scope: Scope, conversation: Any
) -> None:
    link = links.create_link(scope, conversation.pk)
    token = links.token_of(link)
    forged = [
        "",
        "x" * 10_000,
        str(link.pk),  # the bare id, unsigned
        signing.dumps(str(link.pk), salt="another.salt"),
        signing.dumps(str(uuid.uuid4()), salt=links.SALT),  # signed, no such row
        signing.dumps({"id": str(link.pk)}, salt=links.SALT),
        signing.dumps("not a uuid", salt=links.SALT),
        token[:-1] + ("A" if token[-1] != "A" else "B"),
        None,
        42,
    ]
    for bad in forged:
        with pytest.raises(NotFound):
            links.open_link(bad)


def test_a_revoked_link_of_another_owner_cannot_be_revoked_here(
    scope: Scope, other_scope: Scope, other_conversation: Any
) -> None:
    theirs = links.create_link(other_scope, other_conversation.pk)
    mine = services.create_conversation(scope)
    assert links.revoke_link(scope, mine.pk, theirs.pk) is False
    assert links.open_link(links.token_of(theirs)) == theirs
    with pytest.raises(InvalidInput):
        links.revoke_link(scope, mine.pk, "not-a-uuid")
