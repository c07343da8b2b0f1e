"""Actions on one message of a conversation: rate a reply, fork from a turn; and
the signed-in person's own usage.

Each action is a plain form POST (without JavaScript: back to the page, or on to the
fork); with htmx, a rating answers the row's actions alone and a fork answers an
``HX-Redirect`` to the new conversation. A row of another conversation, or of
another tenant's, is a 404 like one that does not exist.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.views.decorators.http import require_POST, require_safe

from sagents_django import services
from sagents_django.budgets.reports import standings
from sagents_django.exceptions import Conflict, InvalidInput, NotFound
from sagents_django.models import DataExport, DisplayMessage
from sagents_django.runtime import agent_server
from sagents_django.scope import get_scope
from sagents_django.security import csp
from sagents_django.services.feedback import COMMENT_MAX_LENGTH
from sagents_django.ui import transcript
from sagents_django.ui.context import Chat

from .common import done, is_htmx, owned, page_url

MAX_ID_DIGITS = 19


@csp
@login_required
@require_POST
def rate(request: HttpRequest, conversation_id: str, message_id: int) -> HttpResponse:
    """A thumbs up or down (``rating``: up, down; clear takes it back) on a
    reply, with ``comment`` (the person's own word: a read share may give it
    too)."""
    scope, found = owned(request, conversation_id, access="read")
    row = DisplayMessage.objects.filter(pk=message_id, conversation_id=found.pk).first()
    if row is None:
        raise Http404("Message not found.")
    comment = request.POST.get("comment", "")
    if len(comment) > COMMENT_MAX_LENGTH:
        return done(
            request,
            found,
            error=f"A comment has at most {COMMENT_MAX_LENGTH} characters; this "
            f"one has {len(comment)}.",
        )
    rating = request.POST.get("rating", "")
    try:
        if rating == "clear":  # the pressed thumb again: the rating is taken back
            services.clear_rating(scope, row.pk)
            feedback = None
        else:
            feedback = services.rate_reply(
                scope, row.pk, rating=rating, comment=comment
            )
    except NotFound:
        raise Http404("Message not found.") from None
    except InvalidInput as exc:
        return done(request, found, error=str(exc))
    if not is_htmx(request):
        return HttpResponseRedirect(f"{page_url(found)}#sg-msg-{row.pk}")
    chat = Chat(scope, found)
    [entry] = chat.annotate(transcript.entries([row]))
    entry.feedback = feedback
    return render(
        request,
        "sagents_django/partials/message_actions.html",
        {"e": entry, "chat": chat},
    )


@csp
@login_required
@require_POST
def fork(request: HttpRequest, conversation_id: str) -> HttpResponse:
    """A new conversation with this one's history up to the end of the turn of
    ``at_message`` (a row id; none: the last completed turn)."""
    scope, found = owned(request, conversation_id)
    raw = request.POST.get("at_message", "")
    at: int | None = None
    if raw:
        if not raw.isdigit() or len(raw) > MAX_ID_DIGITS:
            return done(request, found, error="at_message must be a message id.")
        at = int(raw)
    try:
        new = agent_server.fork(scope, found.pk, at_message=at)
    except NotFound:
        raise Http404("Message not found.") from None
    except (InvalidInput, Conflict) as exc:
        return done(request, found, error=str(exc))
    if is_htmx(request):
        response = HttpResponse(status=204)
        response["HX-Redirect"] = page_url(new)
        return response
    return HttpResponseRedirect(page_url(new))


@csp
@login_required
@require_safe
def my_usage(request: HttpRequest) -> HttpResponse:
    """The signed-in person's tokens and cost: in all, and per conversation."""
    scope = get_scope(request)
    by_conversation = services.usage_by_conversation(scope)
    titled: list[tuple[Any, services.UsageTotals]] = []
    if by_conversation:
        conversations = services.owned_conversations(scope).filter(
            pk__in=list(by_conversation)
        )
        titled = sorted(
            ((c, by_conversation[c.pk]) for c in conversations),
            key=lambda pair: pair[1].total_tokens,
            reverse=True,
        )
    return render(
        request,
        "sagents_django/my_usage.html",
        {
            "totals": services.usage_totals(scope),
            "conversations": titled,
            "exports": DataExport.objects.filter(user_id=scope.user.pk)[:5],
            "budgets": standings(scope),
        },
    )
