"""What a share lets its holder do, as a scope: the one place shares are read.

``scope_for(scope, conversation_id, access=...)`` answers the scope to use on a
conversation: the caller's own when it owns it; else the scope its share *lends*
(the owner's scope narrowed to that conversation, ``Scope.lent``); else
``NotFound``. Everything after that (services, runtime, sockets, pages) runs on
the scope it got, and the scope's querysets keep it to the one conversation and
the share's access, so no entry point can do more than its share allows.

A turn a write share starts belongs to the conversation's owner (the run's scope
owns the conversation, the owner's files and factory apply), while the person who
acted stays ``scope.user`` and is recorded in the run's scope JSON
(``{"user_id": <them>, "lent": {...}}``). A worker rebuilding that scope asks the
share again (``lend_again``): a share revoked meanwhile lends nothing.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from django.db.models import Q, QuerySet

from sagents_django.exceptions import NotFound
from sagents_django.scope import Access, Lending, Scope, owner_field
from sagents_django.services.conversations import (
    conversation_model,
    conversation_pk,
    owned_conversations,
)

from .models import ConversationShare

Needed = Literal["read", "write", "own"]
"""What a caller needs: to read, to write (send, approve, stop), or to own
(rename, delete, share)."""


def _member_of(user: Any) -> Q:
    """Shares naming ``user`` or one of their groups."""
    condition = Q(user=user)
    groups = getattr(user, "groups", None)  # a user model without PermissionsMixin
    if groups is not None:
        condition |= Q(group__in=groups.all())
    return condition


def _authenticated(user: Any) -> bool:
    return user is not None and bool(getattr(user, "is_authenticated", False))


def share_access(user: Any, conversation_id: Any) -> Access | None:
    """The best access ``user``'s shares (their own and their groups') give on
    the conversation; None: none."""
    return best_access(
        ConversationShare.objects.filter(conversation_id=conversation_id), user
    )


def best_access(shares: QuerySet, user: Any) -> Access | None:
    """The best access of those of ``shares`` that reach ``user`` (theirs and
    their groups'); None: none (or a user signed out or inactive)."""
    if not _authenticated(user) or not getattr(user, "is_active", True):
        return None
    found = set(
        shares.filter(_member_of(user)).order_by().values_list("access", flat=True)
    )
    if "write" in found:
        return "write"
    return "read" if found else None


def shares_for(user: Any) -> QuerySet[ConversationShare]:
    """Every share that reaches ``user`` (none for anyone signed out)."""
    if not _authenticated(user) or not getattr(user, "is_active", True):
        return ConversationShare.objects.none()
    return ConversationShare.objects.filter(_member_of(user))


def _lent(scope: Scope, conversation: Any, access: Access) -> Scope:
    field = owner_field(type(conversation))
    owner = (
        scope.owner
        if field is None
        else getattr(conversation, type(conversation)._meta.get_field(field).attname)
    )
    lending = Lending(conversation_id=conversation.pk, access=access)
    return dataclasses.replace(scope, owner=owner, lent=lending)


def scope_for(scope: Scope, conversation_id: Any, *, access: Needed = "read") -> Scope:
    """The scope to use on the conversation for ``access``: the caller's own when
    it owns the conversation, the one a share lends when a share gives enough,
    else ``NotFound`` (as for a conversation that does not exist). A malformed id
    is ``InvalidInput``."""
    pk = conversation_pk(conversation_id)
    lent = getattr(scope, "lent", None)
    if lent is not None:
        # Already lent: only its own conversation, at most its own access.
        if lent.conversation_id != pk or not _enough(lent.access, access):
            raise NotFound("conversation", str(pk))
        return scope
    if owned_conversations(scope).filter(pk=pk).exists():
        return scope
    given = share_access(scope.user, pk) if access != "own" else None
    if given is None or not _enough(given, access):
        raise NotFound("conversation", str(pk))
    conversation = conversation_model()._default_manager.filter(pk=pk).first()
    if conversation is None:
        raise NotFound("conversation", str(pk))
    return _lent(scope, conversation, given)


def _enough(given: Access, needed: Needed) -> bool:
    return needed == "read" or (needed == "write" and given == "write")


def lend_again(scope: Scope, lent: Lending) -> Scope:
    """A lent scope rebuilt from its JSON form (``Scope.from_dict``): what the
    share gives now, never more than it gave; a share gone lends nothing (the
    scope then owns nothing)."""
    given = share_access(scope.user, lent.conversation_id)
    conversation = (
        conversation_model()._default_manager.filter(pk=lent.conversation_id).first()
    )
    if given is None or conversation is None:
        return dataclasses.replace(scope, owner=None, lent=lent)
    access: Access = "write" if given == lent.access == "write" else "read"
    return _lent(scope, conversation, access)


def shared_conversations(scope: Scope) -> QuerySet:
    """The conversations shared with ``scope``'s user that it does not own."""
    user = scope.user
    model = conversation_model()
    if not _authenticated(user) or not getattr(user, "is_active", True):
        return model._default_manager.none()
    # One subquery per way a share reaches the user: each walks its own index
    # (an OR inside one subquery made SQLite scan every share).
    reached = Q(
        pk__in=ConversationShare.objects.filter(user=user).values("conversation_id")
    )
    groups = getattr(user, "groups", None)
    if groups is not None:
        by_group = ConversationShare.objects.filter(group__in=groups.all())
        reached |= Q(pk__in=by_group.values("conversation_id"))
    owned = owned_conversations(scope).values("pk")
    return model._default_manager.filter(reached).exclude(pk__in=owned)
