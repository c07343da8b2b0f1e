"""Decisions on approval requests, from a conversation or from the inbox.

One form answers every action request of an interrupt together (the core resumes
with one decision per request). The decisions go through ``agent_server.resume``:
the first answer wins, a second one (another tab, the inbox) is told it came late.
The form's Dismiss button abandons the request instead (``agent_server.dismiss``).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST, require_safe

from sagents_django.exceptions import Conflict, InvalidInput, RunConflict
from sagents_django.runtime import agent_server
from sagents_django.scope import Scope, get_scope
from sagents_django.security import csp
from sagents_django.ui import approvals
from sagents_django.ui.context import Chat

from .common import done, is_htmx, owned


@csp
@login_required
@require_POST
def decide(request: HttpRequest, conversation_id: str) -> HttpResponse:
    scope, found = owned(request, conversation_id, access="write")
    requests = approvals.pending_for(scope, found.pk)
    back = request.POST.get("next", "")
    if request.POST.get("action") == "dismiss":
        try:
            agent_server.dismiss(scope, found.pk)
        except (Conflict, RunConflict):
            return _answer(request, found, back, error="Someone already answered this.")
        return _answer(request, found, back)
    try:
        decisions = approvals.decisions_from_post(request.POST, requests)
        agent_server.resume(scope, found.pk, decisions)
    except approvals.FieldErrors as exc:
        return _fix(request, scope, found, exc.requests, back)
    except approvals.FormError as exc:
        return _answer(request, found, back, error=str(exc))
    except InvalidInput as exc:
        return _answer(request, found, back, error=f"Not sent: {exc}")
    except (Conflict, RunConflict):
        return _answer(request, found, back, error="Someone already answered this.")
    return _answer(request, found, back)


def _fix(
    request: HttpRequest, scope: Scope, conversation: Any, requests: list, back: str
) -> HttpResponse:
    """The form drawn again with what was typed and each error beside its field:
    htmx swaps it in place of the form (chat.js), a plain form gets the page."""
    approvals.with_previews(scope, conversation, requests)
    if is_htmx(request):
        return render(
            request,
            "sagents_django/partials/approval_form.html",
            {"requests": requests, "conversation": conversation, "next": back},
            status=422,
        )
    chat = Chat(scope, conversation)
    chat.approvals = requests
    return render(
        request,
        "sagents_django/conversation.html",
        {"chat": chat, "next": back},
        status=422,
    )


def _answer(
    request: HttpRequest, conversation: object, back: str, *, error: str = ""
) -> HttpResponse:
    # From the inbox, a plain form returns to the inbox.
    if (
        not is_htmx(request)
        and back
        and url_has_allowed_host_and_scheme(
            back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
        )
    ):
        if error:
            from django.contrib import messages

            messages.error(request, error, fail_silently=True)
        return HttpResponseRedirect(back)
    if is_htmx(request) and not error:
        # The form goes; the socket brings the run's rows.
        return HttpResponse("")
    return done(request, conversation, error=error)


@csp
@login_required
@require_safe
def inbox(request: HttpRequest) -> HttpResponse:
    """Every approval the user may give, across their conversations."""
    pending = approvals.inbox(get_scope(request))
    return render(
        request,
        "sagents_django/inbox.html",
        {"pending": pending, "inbox_url": reverse("sagents_django:inbox")},
    )


@csp
@login_required
@require_safe
def inbox_count(request: HttpRequest) -> HttpResponse:
    """The header's badge (htmx polls it; the socket pushes it too)."""
    return render(
        request,
        "sagents_django/partials/inbox_count.html",
        {"inbox_count": approvals.inbox_count(get_scope(request))},
    )
