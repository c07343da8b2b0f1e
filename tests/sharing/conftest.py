"""The Django layer's fixtures (users, scopes, conversations), and a third person."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model

from sagents_django.scope import Scope
from tests.django.conftest import (  # noqa: F401  (fixtures, reused)
    anonymous_scope,
    conversation,
    other_conversation,
    other_scope,
    other_user,
    scope,
    user,
)
from tests.django.test_tenancy import owned_world  # noqa: F401  (a fixture, reused)


@pytest.fixture
def carol(db: None) -> Any:
    return get_user_model().objects.create_user(username="carol")


@pytest.fixture
def carol_scope(carol: Any) -> Scope:
    return Scope.for_user(carol)
