"""The owner's sharing API, scope first like every service.

Only the owner manages a conversation's shares (their own scope: a lent scope, or
anyone else's, gets ``NotFound``). A share to someone the site does not let the
owner share with (``policy``) is ``PermissionDenied``, and nothing is written.
Every change tells the conversation's open sockets (``notify``), so a revoked
share stops at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, models, transaction

from sagents_django.exceptions import InvalidInput, NotFound
from sagents_django.scope import ACCESS, Access, Scope
from sagents_django.services.conversations import (
    conversation_pk,
    owned_conversations,
    refuse_lent,
)
from sagents_django.services.validation import clean_text

from . import notify
from .access import shared_conversations, shares_for
from .models import ConversationShare
from .policy import may_share_with

MAX_LISTED = 200
TARGET_MAX_LENGTH = 254


def owned_conversation(scope: Scope, conversation_id: Any) -> Any:
    """The conversation ``scope`` owns itself (not through a share), else
    NotFound: what managing its shares needs."""
    pk = conversation_pk(conversation_id)
    refuse_lent(scope, pk)
    conversation = owned_conversations(scope).filter(pk=pk).first()
    if conversation is None:
        raise NotFound("conversation", str(pk))
    return conversation


def _target(value: Any) -> tuple[str, Any]:
    if isinstance(value, Group):
        return "group", value
    if isinstance(value, get_user_model()):
        return "user", value
    raise InvalidInput(f"Share with a user or a Group, not {type(value).__name__}")


def _access(value: Any) -> Access:
    if not isinstance(value, str) or value not in ACCESS:
        raise InvalidInput(f"access must be one of {ACCESS!r}; got {value!r}")
    return value  # type: ignore[return-value]


def share(
    scope: Scope, conversation_id: Any, target: Any, access: Any = "read"
) -> ConversationShare:
    """Share the conversation with ``target`` (a user or a ``Group``) at
    ``access`` ("read" or "write"); sharing again changes the access. The row."""
    access = _access(access)
    kind, who = _target(target)
    if who.pk is None:
        raise InvalidInput(f"The {kind} to share with is not saved")
    with transaction.atomic():
        conversation = owned_conversation(scope, conversation_id)
        if (
            kind == "user"
            and owned_conversations(scope.__class__.for_user(who))
            .filter(pk=conversation.pk)
            .exists()
        ):
            raise InvalidInput("That user already owns the conversation")
        if not may_share_with(scope, conversation, who):
            raise PermissionDenied(
                f"This conversation cannot be shared with that {kind}."
            )
        row = save_share(
            ConversationShare,
            {"conversation": conversation, kind: who},
            access,
            scope.user if scope.is_authenticated else None,
        )
        notify.share_changed(conversation.pk)
    return row


def revoke(scope: Scope, conversation_id: Any, target: Any) -> bool:
    """End ``target``'s share of the conversation; whether there was one. Its
    sockets following the conversation close at once."""
    kind, who = _target(target)
    with transaction.atomic():
        conversation = owned_conversation(scope, conversation_id)
        deleted, _ = ConversationShare.objects.filter(
            conversation=conversation, **{kind: who}
        ).delete()
        if deleted:
            notify.share_changed(conversation.pk)
    return bool(deleted)


def revoke_share(scope: Scope, conversation_id: Any, share_id: Any) -> bool:
    """``revoke`` by the share row's id (what the share panel posts)."""
    if type(share_id) is not int:
        raise InvalidInput(f"share_id must be an integer, not {share_id!r}")
    with transaction.atomic():
        conversation = owned_conversation(scope, conversation_id)
        deleted, _ = ConversationShare.objects.filter(
            conversation=conversation, pk=share_id
        ).delete()
        if deleted:
            notify.share_changed(conversation.pk)
    return bool(deleted)


def shares_of(scope: Scope, conversation_id: Any) -> list[ConversationShare]:
    """The conversation's shares (the owner's view), users first."""
    conversation = owned_conversation(scope, conversation_id)
    return listed(ConversationShare.objects.filter(conversation=conversation))


def save_share(model: Any, names: dict[str, Any], access: Access, creator: Any) -> Any:
    """The share row of ``model`` that ``names`` (what is shared, and with whom)
    pick, at ``access``: made, or its access changed."""
    try:
        with transaction.atomic():
            row, _ = model.objects.update_or_create(
                **names, defaults={"access": access, "created_by": creator}
            )
    except IntegrityError:  # two shares at once: the second updates the first
        row = model.objects.get(**names)
        row.access = access
        row.save(update_fields=["access", "updated_at"])
    return row


def listed(shares: models.QuerySet) -> list[Any]:
    """Shares as the owner sees them: users first, then groups by name."""
    return list(
        shares.select_related("user", "group").order_by(
            models.F("user").asc(nulls_last=True), "group__name", "id"
        )[:MAX_LISTED]
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class SharedConversation:
    """A conversation shared with the viewer, and what they may do there."""

    conversation: Any
    access: Access


def shared_with_me(scope: Scope, *, limit: int = 50) -> list[SharedConversation]:
    """The conversations shared with ``scope``'s user (not their own), the most
    recently used first, with the best access their shares give."""
    if type(limit) is not int or not 1 <= limit <= MAX_LISTED:
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_LISTED}")
    rows = list(shared_conversations(scope).order_by("-updated_at", "-pk")[:limit])
    writable = set(
        shares_for(scope.user)
        .filter(conversation__in=[r.pk for r in rows], access="write")
        .values_list("conversation_id", flat=True)
    )
    return [
        SharedConversation(
            conversation=r, access="write" if r.pk in writable else "read"
        )
        for r in rows
    ]


def find_target(scope: Scope, conversation_id: Any, name: Any) -> Any:
    """The user (by username or email, exactly, case-insensitively) or group (by
    name) the owner typed, if the site lets the conversation be shared with them;
    else NotFound, one answer for "no such person" and "not one you may share
    with", so the panel cannot be used to look people up across tenants."""
    conversation = owned_conversation(scope, conversation_id)
    name = clean_text(name, what="name", max_length=TARGET_MAX_LENGTH, strip=True)
    if not name:
        raise InvalidInput("Give a username, an email address or a group name")
    users = get_user_model()._default_manager
    field = get_user_model().USERNAME_FIELD
    email = get_user_model().get_email_field_name()
    found: list[Any] = list(users.filter(**{f"{field}__iexact": name})[:2])
    if not found and "@" in name:
        found = list(users.filter(**{f"{email}__iexact": name})[:2])
    if not found:
        found = list(Group.objects.filter(name__iexact=name)[:2])
    if len(found) != 1 or not may_share_with(scope, conversation, found[0]):
        raise NotFound("person or group", name)
    return found[0]
