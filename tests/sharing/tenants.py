"""A site's SHARE_WITH for the tests: a user's tenant is the domain of their email
address; a conversation may be shared only within its owner's tenant."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group

from sagents_django.sharing.policy import same_tenant


def tenant_of(user: Any) -> str:
    return str(getattr(user, "email", "")).rpartition("@")[2].lower()


def share_with(scope: Any, conversation: Any, target: Any) -> bool:
    if isinstance(target, Group):
        members = target.user_set.all()
        owner = tenant_of(scope.user)
        return all(tenant_of(m) == owner for m in members) and same_tenant(
            scope, conversation, target
        )
    return tenant_of(target) == tenant_of(scope.user) and same_tenant(
        scope, conversation, target
    )
