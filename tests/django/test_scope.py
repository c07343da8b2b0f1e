"""Scope: built from the request's user, replaceable by the host, JSON round-trip."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied
from django.test import RequestFactory, override_settings

from sagents_django import services
from sagents_django.checks import check_scope_resolves_owner
from sagents_django.exceptions import InvalidInput
from sagents_django.scope import Scope, get_scope, scope_class

pytestmark = pytest.mark.django_db


def request_for(user: Any) -> Any:
    request = RequestFactory().get("/")
    request.user = user
    return request


def test_the_default_scope_of_a_signed_in_user_owns_their_conversations(
    user: Any,
) -> None:
    scope = Scope.from_request(request_for(user))
    assert scope.user == user
    assert scope.owner == user
    assert scope.is_authenticated


def test_an_anonymous_user_owns_nothing(conversation: Any) -> None:
    scope = Scope.from_request(request_for(AnonymousUser()))
    assert scope.owner is None
    assert not scope.is_authenticated
    assert services.list_conversations(scope) == []


def test_a_request_without_a_user_owns_nothing() -> None:
    assert Scope.from_request(RequestFactory().get("/")).owner is None


def test_an_anonymous_scope_cannot_create_a_conversation(
    anonymous_scope: Scope,
) -> None:
    with pytest.raises(PermissionDenied, match="anonymous scope cannot create"):
        services.create_conversation(anonymous_scope, title="x")
    assert not services.conversation_model().objects.exists()


def test_a_scope_is_frozen(scope: Scope) -> None:
    with pytest.raises(FrozenInstanceError):
        scope.owner = None  # type: ignore[misc]


def test_filter_conversations_keeps_only_the_owners_rows(
    scope: Scope, conversation: Any, other_conversation: Any
) -> None:
    model = services.conversation_model()
    assert list(scope.filter_conversations(model.objects.all())) == [conversation]


def test_the_owner_may_be_given_as_a_primary_key(user: Any, conversation: Any) -> None:
    scope = Scope(user=user, owner=user.pk)
    assert services.get_conversation(scope, conversation.pk) == conversation
    created = services.create_conversation(scope, title="By pk")
    assert created.user == user


def test_get_scope_builds_the_default_scope(user: Any) -> None:
    assert get_scope(request_for(user)) == Scope.for_user(user)


@dataclass(frozen=True, kw_only=True)
class EveryoneShares(Scope):
    """A host scope: every signed-in user sees the conversations of user 'alice'."""

    @classmethod
    def for_user(cls, user: Any) -> EveryoneShares:
        from django.contrib.auth import get_user_model

        owner = None
        if user is not None and user.is_authenticated:
            owner = get_user_model().objects.get(username="alice")
        return cls(user=user, owner=owner)


@override_settings(SAGENTS={"SCOPE": "tests.django.test_scope.EveryoneShares"})
def test_a_host_replaces_the_scope_class_through_the_setting(
    conversation: Any, other_user: Any
) -> None:
    assert scope_class() is EveryoneShares
    scope = get_scope(request_for(other_user))
    assert isinstance(scope, EveryoneShares)
    assert services.get_conversation(scope, conversation.pk) == conversation


def test_a_scope_round_trips_through_json_and_rechecks_ownership(
    scope: Scope, user: Any
) -> None:
    data = scope.to_dict()
    assert data == {"user_id": user.pk}
    assert Scope.from_dict(data) == scope
    user.delete()
    assert Scope.from_dict(data).owner is None


def test_an_anonymous_scope_round_trips_as_owning_nothing(
    anonymous_scope: Scope,
) -> None:
    assert anonymous_scope.to_dict() == {"user_id": None}
    assert Scope.from_dict({"user_id": None}).owner is None


def test_an_ownerless_conversation_model_is_shared_by_every_signed_in_scope(
    scope: Scope, anonymous_scope: Scope, conversation: Any, monkeypatch: Any
) -> None:
    model = services.conversation_model()
    monkeypatch.setattr(model, "OWNER_FIELD", None)
    assert list(scope.filter_conversations(model.objects.all())) == [conversation]
    assert scope.owner_values(model) == {}
    assert list(anonymous_scope.filter_conversations(model.objects.all())) == []


# resolve_owner: the one override point ------------------------------------------------


def test_the_default_scope_resolves_a_user_to_themselves_for_user_owned_conversations(
    user: Any,
) -> None:
    assert Scope.resolve_owner(user) == user
    assert Scope.for_user(user).owner == user


def test_resolve_owner_is_not_asked_about_an_anonymous_user() -> None:
    asked: list[Any] = []

    @dataclass(frozen=True, kw_only=True)
    class Recording(Scope):
        @classmethod
        def resolve_owner(cls, user: Any) -> Any:
            asked.append(user)
            return user

    assert Recording.for_user(AnonymousUser()).owner is None
    assert Recording.for_user(None).owner is None
    assert asked == []


@dataclass(frozen=True, kw_only=True)
class NobodyOwns(Scope):
    """A host scope whose resolve_owner refuses everyone (e.g. a user in no team)."""

    @classmethod
    def resolve_owner(cls, user: Any) -> Any:
        return None


def test_a_scope_whose_resolve_owner_answers_none_sees_nothing_and_cannot_create(
    user: Any, conversation: Any
) -> None:
    scope = NobodyOwns.for_user(user)
    assert scope.owner is None
    assert services.list_conversations(scope) == []
    assert services.get_conversation(scope, conversation.pk) is None
    with pytest.raises(PermissionDenied):
        services.create_conversation(scope, title="mine?")
    assert services.conversation_model().objects.count() == 1


@dataclass(frozen=True, kw_only=True)
class MissingMembership(Scope):
    """A host scope reading a reverse one-to-one the user does not have."""

    @classmethod
    def resolve_owner(cls, user: Any) -> Any:
        return user.__class__.objects.get(pk=-1)  # DoesNotExist, like user.membership


def test_a_resolve_owner_that_finds_no_related_object_means_owning_nothing(
    user: Any, conversation: Any
) -> None:
    scope = MissingMembership.for_user(user)
    assert scope.owner is None
    assert services.list_conversations(scope) == []


def test_an_owner_instance_of_another_model_than_the_owner_field_owns_nothing(
    user: Any, conversation: Any
) -> None:
    # A Group whose id equals the user's id must not pass for the user.
    from django.contrib.auth.models import Group

    group = Group.objects.create(name="same id")
    Group.objects.filter(pk=group.pk).update(id=user.pk)
    group = Group.objects.get(pk=user.pk)
    scope = Scope(user=user, owner=group)
    assert services.list_conversations(scope) == []
    assert services.get_conversation(scope, conversation.pk) is None
    with pytest.raises(PermissionDenied):
        services.create_conversation(scope, title="through a group")


# from_dict: junk is an error, never somebody ------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        pytest.param({"user_id": 1.5}, id="float"),
        pytest.param({"user_id": 1.0}, id="integral float"),
        pytest.param({"user_id": True}, id="bool"),
        pytest.param({"user_id": "abc"}, id="text"),
        pytest.param({"user_id": "1"}, id="digits as text"),
        pytest.param({"user_id": [1]}, id="list"),
        pytest.param({"user_id": {"pk": 1}}, id="dict"),
        pytest.param({"user_id": 10**30}, id="huge int"),
        pytest.param({"user_id": -(10**30)}, id="huge negative int"),
        pytest.param({"user_id": 10**5000}, id="5,001 digits"),
        pytest.param({}, id="missing key"),
        pytest.param({"user": 1}, id="another key"),
        pytest.param("garbage", id="not a dict"),
        pytest.param(None, id="None"),
        pytest.param([1], id="a list"),
    ],
)
def test_from_dict_refuses_junk_with_a_clear_error_and_never_picks_a_user(
    data: Any,
) -> None:
    # Someone is user 1, so a junk id read as 1 would find a real user.
    get_user_model().objects.create_user(username="first", id=1)
    with pytest.raises(InvalidInput, match=r"user_id|scope"):
        Scope.from_dict(data)


def test_from_dict_of_a_valid_id_still_finds_the_user(user: Any) -> None:
    assert Scope.from_dict({"user_id": user.pk}).owner == user


# The system check ---------------------------------------------------------------------
# The failing case needs a team-owned model, swapped in before the app registry
# loads: it runs in a fresh interpreter in test_team_scope.py.


def test_the_scope_check_passes_for_the_default_scope_over_user_owned_conversations() -> (
    None
):
    assert check_scope_resolves_owner() == []


@override_settings(SAGENTS={"SCOPE": "tests.django.test_scope.NobodyOwns"})
def test_the_scope_check_passes_for_a_host_scope_over_user_owned_conversations() -> (
    None
):
    assert check_scope_resolves_owner() == []


@override_settings(SAGENTS={"SCOPE": "no.such.Scope"})
def test_the_scope_check_leaves_an_unimportable_scope_to_the_settings_checks() -> None:
    assert check_scope_resolves_owner() == []


def test_the_scope_check_is_registered() -> None:
    from django.core import checks

    assert check_scope_resolves_owner in checks.registry.registry.get_checks()
