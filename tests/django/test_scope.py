"""Scope: built from the request's user, replaceable by the host, JSON round-trip."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied
from django.test import RequestFactory, override_settings

from sagents_django import services
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
    assert Scope.from_dict("garbage").owner is None  # type: ignore[arg-type]


def test_an_ownerless_conversation_model_is_shared_by_every_signed_in_scope(
    scope: Scope, anonymous_scope: Scope, conversation: Any, monkeypatch: Any
) -> None:
    model = services.conversation_model()
    monkeypatch.setattr(model, "OWNER_FIELD", None)
    assert list(scope.filter_conversations(model.objects.all())) == [conversation]
    assert scope.owner_values(model) == {}
    assert list(anonymous_scope.filter_conversations(model.objects.all())) == []
