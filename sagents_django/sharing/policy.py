"""Who a conversation may be shared with: the site's say, or the default rule.

``SAGENTS["SHARE_WITH"]`` names a function ``(scope, conversation, target) ->
bool`` (``target`` a user or a ``Group``); a site with tenants answers False for a
user of another tenant, and the share is refused. Without one, the default rule:

- a user must be active; for conversations owned by users (the default model),
  any active user of the site may be shared with, and so may any group;
- for conversations owned by something else (a team), only a user whose own scope
  resolves to the same owner (the same tenant); a group is refused (its members
  cannot be vouched for without the site's word).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group
from django.utils.module_loading import import_string

from sagents_django.conf import sagents_settings
from sagents_django.scope import Scope, owned_by_users, scope_class


def may_share_with(scope: Scope, conversation: Any, target: Any) -> bool:
    """Whether the site lets ``scope`` share ``conversation`` with ``target``."""
    path = sagents_settings.SHARE_WITH
    if path is not None:
        return bool(import_string(path)(scope, conversation, target))
    return same_tenant(scope, conversation, target)


def same_tenant(scope: Scope, conversation: Any, target: Any) -> bool:
    """The default rule (this module's docstring); a site's function may call it
    and add its own conditions."""
    model = type(conversation)
    if isinstance(target, Group):
        return owned_by_users(model)
    if not getattr(target, "is_active", False):
        return False
    if owned_by_users(model):
        return True
    theirs = scope_class().for_user(target).owner_pk(model)
    return theirs is not None and theirs == scope.owner_pk(model)
