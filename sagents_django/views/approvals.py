"""Decisions on approval requests: from a conversation, the inbox, or a signed link.

One form answers the waiting requests of an interrupt together; each decision names
the hash of the arguments it was made on. Everything goes through
``approvals.deciding`` (who may decide, quorum, stale or tampered arguments, a
second decision); the agent is resumed when the interrupt is decided. The form's
Dismiss button abandons the request instead. A signed link opens a confirmation
page: its GET shows, only its POST (with CSRF, by a signed-in person who may
decide) decides.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import (
    require_http_methods,
    require_POST,
    require_safe,
)

from sagents_django.admin.presentation import pretty_json
from sagents_django.approvals import deciding, links, routing
from sagents_django.approvals.deciding import Vote
from sagents_django.exceptions import Conflict, InvalidInput, NotFound, RunConflict
from sagents_django.runtime import agent_server
from sagents_django.scope import conversation_model, get_scope
from sagents_django.security import csp
from sagents_django.ui import approval_inbox, approvals
from sagents_django.ui.context import Chat

from .common import done, is_htmx

TOO_LATE = "Someone already answered this."


@csp
@login_required
@require_POST
def decide(request: HttpRequest, conversation_id: str) -> HttpResponse:
    found = _conversation(conversation_id)
    back = request.POST.get("next", "")
    try:
        requests = approval_inbox.requests_for(request.user, found)
    except NotFound:
        writer = _writer_scope(request, found)
        if writer is None:
            raise Http404("No approval waits for you here.") from None
        if request.POST.get("action") == "dismiss" and approvals.waiting_without_form(
            writer, found.pk
        ):
            # A middleware's own pause (no request rows): whoever may send may
            # stop it waiting, or the conversation would wait for good.
            try:
                agent_server.dismiss(writer, found.pk)
            except (Conflict, RunConflict):
                return _answer(request, found, back, error=TOO_LATE)
            return _answer(request, found, back)
        return _answer(request, found, back, error="Nothing waits for a decision.")
    if request.POST.get("action") == "dismiss":
        try:
            deciding.dismiss(request.user, found.pk)
        except (Conflict, RunConflict):
            return _answer(request, found, back, error=TOO_LATE)
        except NotFound:
            return _answer(request, found, back, error="You may not dismiss this.")
        return _answer(request, found, back)
    try:
        votes = approval_inbox.votes_from_post(request.POST, requests)
        outcome = deciding.decide(request.user, found.pk, votes, via="page")
    except approvals.FieldErrors as exc:
        return _fix(request, found, exc.requests, back)
    except approvals.FormError as exc:
        return _answer(request, found, back, error=str(exc))
    except deciding.AlreadyDecided as exc:
        return _answer(request, found, back, error=f"{TOO_LATE} {exc}")
    except NotFound:
        return _answer(request, found, back, error="You may not decide this request.")
    except InvalidInput as exc:
        return _answer(request, found, back, error=f"Not sent: {exc}")
    except (Conflict, RunConflict):
        return _answer(request, found, back, error=TOO_LATE)
    return _answer(request, found, back, note=_waiting_note(outcome))


def _writer_scope(request: HttpRequest, conversation: Any) -> Any:
    """The scope in which the person may write the conversation (their own, or a
    write share's), else None."""
    from sagents_django.sharing.access import scope_for

    try:
        return scope_for(get_scope(request), conversation.pk, access="write")
    except (NotFound, InvalidInput):
        return None


def _owns(request: HttpRequest, conversation: Any) -> bool:
    return _writer_scope(request, conversation) is not None


def _waiting_note(outcome: deciding.Outcome) -> str:
    if outcome.run_id is not None or not outcome.waiting:
        return ""
    return "Your decision is recorded; the request waits for another approver."


def _conversation(conversation_id: str) -> Any:
    found = conversation_model()._default_manager.filter(pk=conversation_id).first()
    if found is None:
        raise Http404("No such conversation.")
    return found


def _fix(
    request: HttpRequest, conversation: Any, requests: list, back: str
) -> HttpResponse:
    """The form drawn again with what was typed and each error beside its field:
    htmx swaps it in place of the form (chat.js), a plain form gets the page (the
    inbox's, for someone else's conversation)."""
    scope = _writer_scope(request, conversation) or get_scope(request)
    approvals.with_previews(scope, conversation, requests)
    if is_htmx(request):
        return render(
            request,
            "sagents_django/partials/approval_form.html",
            {"requests": requests, "conversation": conversation, "next": back},
            status=422,
        )
    if not _owns(request, conversation):
        pending = [approvals.Pending(conversation=conversation, requests=requests)]
        return render(
            request,
            "sagents_django/inbox.html",
            {"pending": pending, "inbox_url": reverse("sagents_django:inbox")},
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
    request: HttpRequest,
    conversation: object,
    back: str,
    *,
    error: str = "",
    note: str = "",
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
            messages.error(request, error, fail_silently=True)
        elif note:
            messages.info(request, note, fail_silently=True)
        return HttpResponseRedirect(back)
    if is_htmx(request) and not error:
        # The form goes; the socket brings the run's rows.
        return HttpResponse("")
    return done(request, conversation, error=error)


@csp
@login_required
@require_safe
def inbox(request: HttpRequest) -> HttpResponse:
    """Every approval the user may give, across conversations."""
    pending = approval_inbox.inbox(request.user, get_scope(request))
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
        {"inbox_count": approval_inbox.inbox_count(request.user, get_scope(request))},
    )


@csp
@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def link(request: HttpRequest, token: str) -> HttpResponse:
    """A signed link's confirmation page. GET shows the request; POST decides it."""
    try:
        row = links.request_of(token)
    except links.LinkRefused as exc:
        return _link_page(request, error=str(exc), status=410)
    if not routing.may_decide(request.user, row):
        # Opened by someone else (a forwarded email): no detail of the request.
        return _link_page(
            request, error="This link is not for your account.", status=403
        )
    if row.is_final:
        return _link_page(
            request,
            row=row,
            error=f"This request was already {row.status}.",
            status=409,
        )
    if request.method != "POST":
        return _link_page(request, row=row)
    kind = request.POST.get("decision", "")
    decision: dict[str, Any] = {"type": kind}
    reason = request.POST.get("message", "").strip()
    if kind == "reject" and reason:
        decision["message"] = reason[: approvals.MAX_MESSAGE_CHARS]
    if kind not in ("approve", "reject"):
        return _link_page(
            request, row=row, error="Choose approve or reject.", status=422
        )
    vote = Vote(
        tool_call_id=row.tool_call_id,
        arguments_hash=request.POST.get("hash", ""),
        decision=decision,
    )
    try:
        outcome = deciding.decide(
            request.user, row.conversation_id, [vote], via="link", link_of=row
        )
    except deciding.AlreadyDecided as exc:
        return _link_page(request, row=row, error=str(exc), status=409)
    except NotFound:
        return _link_page(
            request, error="This link is not for your account.", status=403
        )
    except InvalidInput as exc:
        return _link_page(request, row=row, error=str(exc), status=422)
    except (Conflict, RunConflict):
        return _link_page(request, row=row, error=TOO_LATE, status=409)
    row.refresh_from_db()
    return _link_page(request, row=row, done=True, note=_waiting_note(outcome))


def _link_page(
    request: HttpRequest,
    *,
    row: Any = None,
    error: str = "",
    note: str = "",
    done: bool = False,
    status: int = 200,
) -> HttpResponse:
    context: dict[str, Any] = {"row": row, "error": error, "note": note, "done": done}
    if row is not None:
        context["arguments"] = pretty_json(row.arguments)
        context["approvals_given"] = row.votes.filter(decision="approve").count()
    return render(request, "sagents_django/approval_link.html", context, status=status)
