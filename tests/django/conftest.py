"""Fixtures for the Django layer: users, their scopes, and a conversation."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser

from sagents_django import services
from sagents_django.scope import Scope


@pytest.fixture
def user(db: None) -> Any:
    return get_user_model().objects.create_user(username="alice")


@pytest.fixture
def other_user(db: None) -> Any:
    return get_user_model().objects.create_user(username="bob")


@pytest.fixture
def scope(user: Any) -> Scope:
    return Scope.for_user(user)


@pytest.fixture
def other_scope(other_user: Any) -> Scope:
    return Scope.for_user(other_user)


@pytest.fixture
def anonymous_scope() -> Scope:
    return Scope.for_user(AnonymousUser())


@pytest.fixture
def conversation(scope: Scope) -> Any:
    return services.create_conversation(scope, title="Trip planning")


@pytest.fixture
def other_conversation(other_scope: Scope) -> Any:
    return services.create_conversation(other_scope, title="Bob's taxes")
