"""Read-only links: a signed token that names a ``ShareLink`` row.

The token is ``django.core.signing`` over the row's id (salted for this use), so
a token cannot be made up or altered; the row decides whether it still works
(revoked, expired, or its conversation deleted: the link is "not found", one
answer for all, as is a token that fails its signature). The page it opens shows
the transcript only: no action, no files, no state, no socket.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from django.core import signing
from django.utils import timezone

from sagents_django.exceptions import InvalidInput, NotFound
from sagents_django.scope import Scope

from .models import ShareLink
from .services import MAX_LISTED, owned_conversation

SALT = "sagents_django.sharing.link"
TOKEN_MAX_LENGTH = 200
MAX_LIFETIME = timedelta(days=366)


def token_of(link: ShareLink) -> str:
    """The link's token (the same each time: it signs only the row's id)."""
    return signing.dumps(str(link.pk), salt=SALT)


def create_link(
    scope: Scope, conversation_id: Any, *, expires_in: timedelta | None = None
) -> ShareLink:
    """A new read-only link to the conversation (the owner's), valid until
    revoked or for ``expires_in`` (at most ``MAX_LIFETIME``)."""
    if expires_in is not None and (
        not isinstance(expires_in, timedelta)
        or not timedelta(0) < expires_in <= MAX_LIFETIME
    ):
        raise InvalidInput(
            f"expires_in must be a timedelta up to {MAX_LIFETIME.days} days, or None"
        )
    conversation = owned_conversation(scope, conversation_id)
    expires_at = timezone.now() + expires_in if expires_in is not None else None
    return ShareLink.objects.create(
        conversation=conversation,
        created_by=scope.user if scope.is_authenticated else None,
        expires_at=expires_at,
    )


def links_of(scope: Scope, conversation_id: Any) -> list[ShareLink]:
    """The conversation's links that still work, newest first."""
    conversation = owned_conversation(scope, conversation_id)
    return list(
        _working(ShareLink.objects.filter(conversation=conversation))[:MAX_LISTED]
    )


def revoke_link(scope: Scope, conversation_id: Any, link_id: Any) -> bool:
    """End a link of the conversation; whether it still worked."""
    conversation = owned_conversation(scope, conversation_id)
    try:
        pk = uuid.UUID(str(link_id)) if not isinstance(link_id, uuid.UUID) else link_id
    except ValueError:
        raise InvalidInput(f"link_id must be a link's id, not {link_id!r}") from None
    return bool(
        _working(ShareLink.objects.filter(conversation=conversation, pk=pk)).update(
            revoked_at=timezone.now()
        )
    )


def open_link(token: Any) -> ShareLink:
    """The working link a token names, with its conversation; NotFound for a
    token that is forged, altered, revoked, expired or of a deleted
    conversation."""
    if not isinstance(token, str) or not 0 < len(token) <= TOKEN_MAX_LENGTH:
        raise NotFound("link")
    try:
        value = signing.loads(token, salt=SALT)
        pk = uuid.UUID(value) if isinstance(value, str) else None
    except (signing.BadSignature, ValueError):
        pk = None
    link = (
        _working(ShareLink.objects.filter(pk=pk)).select_related("conversation").first()
        if pk is not None
        else None
    )
    if link is None:
        raise NotFound("link")
    return link


def _working(links: Any, now: datetime | None = None) -> Any:
    from django.db.models import Q

    now = now or timezone.now()
    return links.filter(revoked_at__isnull=True).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=now)
    )
