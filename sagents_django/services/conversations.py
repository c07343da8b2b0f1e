"""Conversations: create, read, update, delete, list, search, all within a scope.

The scope decides ownership (``Scope.filter_conversations``); everything here reads
through ``owned_conversations(scope)``, so a conversation outside the scope behaves
exactly like one that does not exist.

List cursors are opaque strings that carry the sort key of the last row seen
(``(updated_at, id)`` by default): a conversation's ``updated_at`` changes whenever
it is used, so a cursor naming only a row id would move under the reader's feet.
Opaque is not secret: anyone can decode and forge one, so a cursor is read as
untrusted input and anything ``conversation_cursor`` could not have made is
InvalidInput before a query runs.
"""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, cast

from django.db import models, transaction
from django.http import Http404
from django.utils import timezone

from sagents_django import scope as scopes
from sagents_django.exceptions import InvalidInput, NotFound
from sagents_django.models import DisplayMessage
from sagents_django.scope import Scope
from sagents_django.signals import conversation_changed, send_after_commit

from .branches import shown_filter
from .keyset import beyond
from .validation import clean_mapping, clean_text, parse_int, parse_uuid, storable

if TYPE_CHECKING:
    from sagents_django.models import AbstractConversation

METADATA_MAX_BYTES: Final = 1024 * 1024
"""Largest conversation or display-message metadata document (UTF-8 JSON bytes)."""
TITLE_MAX_LENGTH: Final = 255
ORDERINGS: Final = (
    "-updated_at",
    "updated_at",
    "-created_at",
    "created_at",
    "title",
    "-title",
)
MAX_PAGE: Final = 1000
CURSOR_MAX_LENGTH: Final = 2048
SEARCH_MAX_LENGTH: Final = 200
SEARCH_MAX_RESULTS: Final = 100

_UNSET: Any = object()


def conversation_model() -> type[AbstractConversation]:
    """The active (possibly swapped) conversation model."""
    # swapper answers a plain Model class; a swapped-in model must subclass
    # AbstractConversation (its migration and the services rely on the fields).
    return cast("type[AbstractConversation]", scopes.conversation_model())


def owned_conversations(scope: Scope) -> models.QuerySet:
    """Every conversation ``scope`` owns (a lent scope: the one its share lends)."""
    rows = scope.filter_conversations(conversation_model()._default_manager.all())
    lent = getattr(scope, "lent", None)
    if lent is not None:
        # Again here: a host's own filter_conversations may not know lending.
        rows = rows.filter(pk=lent.conversation_id)
    return rows


def refuse_read_only(scope: Scope, conversation_id: Any) -> None:
    """NotFound when ``scope`` was lent by a read share: every write of the
    services starts here, so a read share changes nothing, whatever the entry
    point."""
    if getattr(scope, "read_only", False):
        raise NotFound("conversation", str(conversation_id))


def refuse_lent(scope: Scope, conversation_id: Any) -> None:
    """NotFound for any lent scope: renaming, deleting and sharing are the
    owner's (their own scope), never a share's."""
    if getattr(scope, "lent", None) is not None:
        raise NotFound("conversation", str(conversation_id))


def owned_ids(scope: Scope) -> models.QuerySet:
    """The ids of the conversations ``scope`` owns, as a subquery."""
    return owned_conversations(scope).values("pk")


def conversation_pk(value: Any) -> uuid.UUID:
    """The id of a conversation given as an instance, a UUID or its string."""
    if isinstance(value, models.Model):
        value = value.pk
    return parse_uuid(value, what="conversation_id")


def require_conversation(
    scope: Scope, conversation_id: Any, *, touch: bool
) -> uuid.UUID:
    """The parsed id of a conversation ``scope`` owns, or NotFound.

    ``touch`` also moves its ``updated_at`` to now (it was just used), in the same
    query that checks ownership.
    """
    pk = conversation_pk(conversation_id)
    owned = owned_conversations(scope).filter(pk=pk)
    found = owned.update(updated_at=timezone.now()) if touch else owned.exists()
    if not found:
        raise NotFound("conversation", str(pk))
    return pk


def create_conversation(
    scope: Scope, *, title: str = "", metadata: dict[str, Any] | None = None
) -> AbstractConversation:
    """A new conversation owned by ``scope`` (PermissionDenied if it owns nothing)."""
    model = conversation_model()
    title = clean_text(title, what="title", max_length=TITLE_MAX_LENGTH, strip=True)
    metadata = clean_mapping(metadata, what="metadata", max_bytes=METADATA_MAX_BYTES)
    owner = scope.owner_values(model)
    with transaction.atomic():
        conversation = model._default_manager.create(
            title=title, metadata=metadata, **owner
        )
        _changed(conversation, "created")
    return conversation


def get_conversation(scope: Scope, conversation_id: Any) -> AbstractConversation | None:
    """The conversation, or None when it does not exist in ``scope``."""
    pk = conversation_pk(conversation_id)
    return owned_conversations(scope).filter(pk=pk).first()


def get_conversation_or_404(scope: Scope, conversation_id: Any) -> AbstractConversation:
    """For views: the conversation, or Http404 (a malformed id is not found too)."""
    try:
        conversation = get_conversation(scope, conversation_id)
    except InvalidInput:
        conversation = None
    if conversation is None:
        raise Http404("Conversation not found.")
    return conversation


def update_conversation(
    scope: Scope,
    conversation_id: Any,
    *,
    title: str = _UNSET,
    metadata: dict[str, Any] = _UNSET,
) -> AbstractConversation:
    """Set the title and/or replace the metadata; NotFound outside ``scope``."""
    pk = conversation_pk(conversation_id)
    refuse_lent(scope, pk)
    fields = ["updated_at"]
    if title is not _UNSET:
        title = clean_text(title, what="title", max_length=TITLE_MAX_LENGTH, strip=True)
        fields.append("title")
    if metadata is not _UNSET:
        if not isinstance(metadata, dict):
            raise InvalidInput(
                f"metadata must be a dict, not {type(metadata).__name__}"
            )
        metadata = clean_mapping(
            metadata, what="metadata", max_bytes=METADATA_MAX_BYTES
        )
        fields.append("metadata")
    with transaction.atomic():
        conversation = (
            owned_conversations(scope).select_for_update().filter(pk=pk).first()
        )
        if conversation is None:
            raise NotFound("conversation", str(pk))
        if title is not _UNSET:
            conversation.title = title
        if metadata is not _UNSET:
            conversation.metadata = metadata
        conversation.save(update_fields=fields)
        if title is not _UNSET:
            _changed(conversation, "renamed")
    return conversation


def set_generated_title(scope: Scope, conversation_id: Any, title: Any) -> bool:
    """Give the conversation the title its agent generated, unless it has one: a
    title a person chose wins. True when this set it; NotFound outside ``scope``."""
    pk = conversation_pk(conversation_id)
    if not isinstance(title, str):
        raise InvalidInput(f"title must be a string, not {type(title).__name__}")
    title = clean_text(
        title[:TITLE_MAX_LENGTH], what="title", max_length=TITLE_MAX_LENGTH, strip=True
    )
    if not title:
        return False
    refuse_read_only(scope, pk)
    require_conversation(scope, pk, touch=False)
    updated = (
        owned_conversations(scope)
        .filter(pk=pk, title="")
        .update(title=title, updated_at=timezone.now())
    )
    return updated == 1


def delete_conversation(scope: Scope, conversation_id: Any) -> None:
    """Delete it with its state, display messages and runs; NotFound outside scope."""
    pk = conversation_pk(conversation_id)
    refuse_lent(scope, pk)
    with transaction.atomic():
        conversation = owned_conversations(scope).filter(pk=pk).first()
        if conversation is None:
            raise NotFound("conversation", str(pk))
        conversation.delete()
        conversation.pk = pk  # as it was, for the receivers
        _changed(conversation, "deleted")


def _changed(conversation: AbstractConversation, change: str) -> None:
    send_after_commit(
        conversation_changed,
        sender=type(conversation),
        conversation=conversation,
        change=change,
    )


def list_conversations(
    scope: Scope,
    *,
    order_by: str = "-updated_at",
    limit: int = 50,
    offset: int = 0,
    cursor: str | None = None,
) -> list[AbstractConversation]:
    """A page of ``scope``'s conversations.

    ``order_by`` is one of ``ORDERINGS`` (ties broken by id). Page with ``offset``,
    or, stable under concurrent writes, with ``cursor=conversation_cursor(last_row,
    order_by=...)`` of the previous page (not both).
    """
    if not isinstance(order_by, str) or order_by not in ORDERINGS:
        raise InvalidInput(
            f"order_by must be one of {', '.join(ORDERINGS)}; got {order_by!r}"
        )
    limit = parse_int(limit, what="limit", minimum=1, maximum=MAX_PAGE)
    offset = parse_int(offset, what="offset", maximum=2**31 - 1)
    descending = order_by.startswith("-")
    field = order_by.lstrip("-")
    queryset = owned_conversations(scope).order_by(
        order_by, "-pk" if descending else "pk"
    )
    if cursor is not None:
        if offset:
            raise InvalidInput("Pass either offset or cursor, not both")
        value, pk = _decode_cursor(cursor, order_by)
        queryset = queryset.filter(
            beyond((field, "pk"), (value, pk), descending=descending)
        )
    return list(queryset[offset : offset + limit])


def conversation_cursor(
    conversation: AbstractConversation, *, order_by: str = "-updated_at"
) -> str:
    """The cursor that continues a list after ``conversation``."""
    if order_by not in ORDERINGS:
        raise InvalidInput(
            f"order_by must be one of {', '.join(ORDERINGS)}; got {order_by!r}"
        )
    value = getattr(conversation, order_by.lstrip("-"))
    if isinstance(value, datetime):
        value = value.isoformat()
    raw = json.dumps([order_by, value, str(conversation.pk)], ensure_ascii=False)
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_cursor(cursor: Any, order_by: str) -> tuple[Any, uuid.UUID]:
    """The sort key a cursor carries, checked as hostile input: every way it can be
    malformed (encoding, nesting, types, a time no database holds, text no title
    can be) is InvalidInput."""
    if not isinstance(cursor, str):
        raise InvalidInput(
            f"cursor must be a string made by conversation_cursor(), not "
            f"{type(cursor).__name__}"
        )
    bad = InvalidInput(f"cursor {cursor[:80]!r} is not a conversation list cursor")
    if len(cursor) > CURSOR_MAX_LENGTH:
        raise bad
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        parts = json.loads(raw)
    except (ValueError, RecursionError):  # binascii.Error and bad UTF-8 included
        raise bad from None
    if type(parts) is not list or len(parts) != 3:
        raise bad
    ordering, value, pk = parts
    if not isinstance(ordering, str) or ordering not in ORDERINGS:
        raise bad
    if ordering != order_by:
        raise InvalidInput(
            f"cursor was made for order_by={ordering!r}, not {order_by!r}"
        )
    if not isinstance(pk, str) or len(pk) > 64:
        raise bad
    try:
        pk = uuid.UUID(pk)
    except ValueError:
        raise bad from None
    if order_by.lstrip("-") == "title":
        # Stored titles are at most TITLE_MAX_LENGTH characters with NULs and lone
        # surrogates replaced (validation.storable): a cursor made from one is too.
        if (
            not isinstance(value, str)
            or len(value) > TITLE_MAX_LENGTH
            or storable(value) != value
        ):
            raise bad
        return value, pk
    if not isinstance(value, str) or len(value) > 64:
        raise bad
    try:
        moment = datetime.fromisoformat(value)
        # In UTC, as stored: an offset that moves the moment past year 1 or 9999
        # fails here instead of in the database adapter.
        utc = moment.astimezone(UTC) if timezone.is_aware(moment) else None
    except (ValueError, OverflowError):
        raise bad from None
    if utc is None:
        raise bad
    return utc, pk


@dataclass(frozen=True, kw_only=True, slots=True)
class SearchResult:
    """A conversation that matched by title (``message`` None) or by a message."""

    conversation: Any
    message: DisplayMessage | None = None


def search_messages(scope: Scope, query: str, *, limit: int = 20) -> list[SearchResult]:
    """Conversations whose title, and display messages whose text, contain ``query``
    (case-insensitive; on SQLite for ASCII letters only), newest first, titles
    before messages, at most ``limit`` results. Only the messages a person sees
    are searched: those of each conversation's shown branch (the rows of the
    branches a regenerate or an edit left are not)."""
    query = clean_text(query, what="query", max_length=SEARCH_MAX_LENGTH, strip=True)
    if not query:
        raise InvalidInput("query must contain something besides spaces")
    limit = parse_int(limit, what="limit", minimum=1, maximum=SEARCH_MAX_RESULTS)
    owned = owned_conversations(scope)
    results = [
        SearchResult(conversation=c)
        for c in owned.filter(title__icontains=query).order_by("-updated_at", "-pk")[
            :limit
        ]
    ]
    remaining = limit - len(results)
    if remaining:
        matching = DisplayMessage.objects.filter(
            conversation__in=owned.values("pk"),
            content_type__in=("text", "thinking"),
            content__text__icontains=query,
        )
        messages = (
            matching.filter(shown_filter(matching.values("conversation_id")))
            .select_related("conversation")
            .order_by("-inserted_at", "-id")[:remaining]
        )
        results.extend(
            SearchResult(conversation=m.conversation, message=m) for m in messages
        )
    return results
