"""Feedback on the agent's replies: a thumbs up or down and a comment, per person.

A reply is rated by the people its conversation's scope lets in (the owner, or a
team's members for a team-owned conversation), each with a row of their own; rating
it again replaces the rating and the comment. A reply of a conversation outside
the scope is "not found", as everywhere in the services. Each rating sends the
``feedback_given`` signal after commit, so a site can feed an evaluation set.
"""

from __future__ import annotations

from typing import Any, Final

from django.db import IntegrityError, transaction

from sagents_django.exceptions import InvalidInput, NotFound
from sagents_django.models import (
    FEEDBACK_COMMENT_MAX_LENGTH,
    RATINGS,
    DisplayMessage,
    ReplyFeedback,
)
from sagents_django.scope import Scope
from sagents_django.signals import feedback_given, send_after_commit

from .conversations import owned_ids, require_conversation
from .validation import choice, clean_text, parse_int

COMMENT_MAX_LENGTH: Final = FEEDBACK_COMMENT_MAX_LENGTH
MAX_MESSAGE_ID: Final = 2**63 - 1


def rate_reply(
    scope: Scope, message_id: Any, *, rating: Any, comment: Any = ""
) -> ReplyFeedback:
    """Store the scope's user's ``rating`` ("up" or "down") of the reply shown by
    display row ``message_id``, with an optional ``comment`` (at most
    ``COMMENT_MAX_LENGTH`` characters); the row. NotFound for a row outside the
    scope; InvalidInput for anything but an assistant's text, a bad rating or
    comment."""
    pk = parse_int(message_id, what="message_id", minimum=1, maximum=MAX_MESSAGE_ID)
    rating = choice(rating, RATINGS, what="rating")
    comment = clean_text(
        comment, what="comment", max_length=COMMENT_MAX_LENGTH, strip=True
    )
    message = _owned_message(scope, pk)
    if message.message_type != "assistant" or message.content_type != "text":
        raise InvalidInput(
            f"Only the agent's replies can be rated; message {pk} is a "
            f"{message.message_type} {message.content_type}"
        )
    model = message.run.model if message.run is not None else ""
    fields = {"rating": rating, "comment": comment, "model": model}
    for attempt in range(2):
        try:
            with transaction.atomic():
                feedback, created = ReplyFeedback.objects.update_or_create(
                    user=scope.user,
                    message=message,
                    defaults={**fields, "conversation_id": message.conversation_id},
                )
            break
        except IntegrityError:
            # Two ratings of the same reply at once: the second updates the first.
            if attempt:
                raise
    send_after_commit(
        feedback_given, sender=ReplyFeedback, feedback=feedback, created=created
    )
    return feedback


def clear_rating(scope: Scope, message_id: Any) -> bool:
    """Take back the scope's user's rating (and comment) of a reply: True when
    there was one. NotFound for a row outside the scope. No signal: a receiver
    keeping an evaluation set reads ``ReplyFeedback`` again for what is left."""
    pk = parse_int(message_id, what="message_id", minimum=1, maximum=MAX_MESSAGE_ID)
    message = _owned_message(scope, pk)
    deleted, _ = ReplyFeedback.objects.filter(user=scope.user, message=message).delete()
    return deleted > 0


def feedback_for(scope: Scope, conversation_id: Any) -> dict[int, ReplyFeedback]:
    """The scope's user's ratings in one conversation, by display row id (NotFound
    outside the scope)."""
    pk = require_conversation(scope, conversation_id, touch=False)
    if not scope.is_authenticated:
        return {}
    rows = ReplyFeedback.objects.filter(conversation_id=pk, user=scope.user)
    return {row.message_id: row for row in rows}


def _owned_message(scope: Scope, pk: int) -> DisplayMessage:
    found = (
        DisplayMessage.objects.filter(pk=pk, conversation__in=owned_ids(scope))
        .select_related("run")
        .first()
    )
    if found is None or not scope.is_authenticated:
        raise NotFound("message", pk)
    return found
