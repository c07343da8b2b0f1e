"""Tools offered by Django permission: the core's ``ToolAccess`` for a scope.

``ScopeToolAccess(scope)`` gives an agent the tools the scope's user may use:
a tool's ``permission`` is checked with ``user.has_perms`` (so every
authentication backend has its say, and an active superuser holds them all), its
``available(scope)`` is called with the scope. A scope without a signed-in user
holds no permission.

Django caches a user's permissions on the user object (``_perm_cache``,
``_user_perm_cache``, ``_group_perm_cache``), so a permission taken away would
still count on the object a turn started with. The per-call check therefore reads
the user again (one query, two more for the permissions of a user who is not a
superuser: bench/tool_permissions.py) on the runtime's database threads, and gives
``available`` a copy of the scope holding that user. Offering, when the agent is
built, uses the scope's user as it is: the runtime builds a scope, and its user,
for every turn.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from sagents_django.core import Tool, ToolAccess
from sagents_django.runtime.database import db
from sagents_django.scope import Scope

_SCOPE_USER: Any = object()


class ScopeToolAccess(ToolAccess):
    """The tools ``scope.user`` may use, by Django permission and ``available``."""

    subject: Scope

    def __init__(self, scope: Scope, *, user: Any = _SCOPE_USER) -> None:
        super().__init__(scope)
        self.user = getattr(scope, "user", None) if user is _SCOPE_USER else user
        """Whose permissions count (the scope's user, or a fresher copy of it)."""

    @property
    def scope(self) -> Scope:
        return self.subject

    def has_perms(self, permissions: tuple[str, ...]) -> bool:
        user = self.user
        if user is None or not getattr(user, "is_authenticated", False):
            return False
        check = getattr(user, "has_perms", None)  # a user model without the mixin
        return check is not None and check(permissions) is True

    async def allows(self, tool: Tool) -> bool:
        return await db(self._allows_now)(tool)

    async def ahas_perms(self, permissions: Iterable[str]) -> bool:
        """Whether the user holds every one of ``permissions`` now (read again
        from the database), for an approval policy's ``review_tool_calls``."""
        return await db(self._has_perms_now)(tuple(permissions))

    def refreshed(self) -> ScopeToolAccess:
        """This access for the user as the database has it now (None when the
        user was deleted). ``available`` gets a copy of the scope holding that
        user when the scope is a dataclass (a host's own kind of scope is kept)."""
        user = self.user
        if user is None or getattr(user, "pk", None) is None:
            return self  # anonymous: nothing cached to go stale
        fresh = user._meta.model._default_manager.filter(pk=user.pk).first()
        scope = self.subject
        if dataclasses.is_dataclass(scope) and hasattr(scope, "user"):
            scope = dataclasses.replace(scope, user=fresh)
        return type(self)(scope, user=fresh)

    def _allows_now(self, tool: Tool) -> bool:
        return self.refreshed().permits(tool)

    def _has_perms_now(self, permissions: tuple[str, ...]) -> bool:
        return bool(permissions) and self.refreshed().has_perms(permissions)
