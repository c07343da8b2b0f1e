"""A conversation: read it, send, stop, retry, and page back through history.

Sending is a plain form POST: with JavaScript off the browser is redirected back
to the page (which shows the message, and the reply on reload); with htmx the
request answers 204 and the socket brings the rows, so a row reaches the page
exactly once whichever way it came.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.views.decorators.http import require_POST, require_safe

from sagents_django.core import SagentsError
from sagents_django.core.transports import warm_litellm
from sagents_django.exceptions import Conflict, InvalidInput, RunConflict
from sagents_django.runtime import agent_server, executors
from sagents_django.security import csp
from sagents_django.ui.context import Chat

from .common import done, message_problem, owned, page_url


def _cursor(request: HttpRequest) -> int | str | None:
    raw = request.GET.get("before")
    if raw is None or raw == "":
        return None
    if not raw.isdigit() or len(raw) > 19:
        return "bad"
    return int(raw)


@csp
@login_required
@require_safe
def conversation(request: HttpRequest, conversation_id: str) -> HttpResponse:
    """The chat page; ``?before=<row id>`` shows the page of history before it."""
    scope, found = owned(request, conversation_id, access="read")
    before = _cursor(request)
    if before == "bad":
        return HttpResponse("before must be a message id", status=400)
    chat = Chat(scope, found, before=before)
    try:
        chat.rows  # noqa: B018  (a cursor of another conversation is bad input)
    except InvalidInput as exc:
        return HttpResponse(str(exc), status=400, content_type="text/plain")
    # The person will send a message: the model library's import (seconds) starts
    # now, not when the first turn needs it; where turns run on Celery workers,
    # this process never needs it (3 s of CPU and 160 MB spared per web process).
    if executors.turns_run_here():
        warm_litellm()
    return render(request, "sagents_django/conversation.html", {"chat": chat})


@csp
@login_required
@require_safe
def older(request: HttpRequest, conversation_id: str) -> HttpResponse:
    """The rows before ``?before=`` (htmx swaps them in above the list)."""
    scope, found = owned(request, conversation_id, access="read")
    before = _cursor(request)
    if before is None or before == "bad":
        return HttpResponse("before must be a message id", status=400)
    chat = Chat(scope, found, before=before)
    try:
        chat.rows  # noqa: B018
    except InvalidInput as exc:
        return HttpResponse(str(exc), status=400, content_type="text/plain")
    return render(request, "sagents_django/partials/older.html", {"chat": chat})


@csp
@login_required
@require_POST
def send(request: HttpRequest, conversation_id: str) -> HttpResponse:
    scope, found = owned(request, conversation_id, access="write")
    text = request.POST.get("text", "")
    problem = message_problem(text)
    if problem:
        return done(request, found, error=problem)
    try:
        agent_server.add_message(scope, found.pk, text)
    except RunConflict:
        return done(
            request, found, error="A turn is running: wait for it, then send again."
        )
    except Conflict:
        return done(request, found, error="Answer the approval request first.")
    except (InvalidInput, SagentsError) as exc:
        return done(request, found, error=str(exc))
    return done(request, found, status=204)


@csp
@login_required
@require_POST
def stop(request: HttpRequest, conversation_id: str) -> HttpResponse:
    scope, found = owned(request, conversation_id, access="write")
    agent_server.cancel(scope, found.pk)
    return done(request, found, status=204)


@csp
@login_required
@require_POST
def reset(request: HttpRequest, conversation_id: str) -> HttpResponse:
    """Start the agent afresh (``agent_server.reset``): what it remembers, its plan
    and a pending approval are cleared; the transcript stays, with a note. A plain
    form: the page reloads with the cleared panels."""
    scope, found = owned(request, conversation_id)
    try:
        agent_server.reset(scope, found.pk)
    except (RunConflict, Conflict) as exc:
        messages.error(request, str(exc), fail_silently=True)
    return HttpResponseRedirect(page_url(found))


@csp
@login_required
@require_POST
def retry(request: HttpRequest, conversation_id: str) -> HttpResponse:
    """Run the agent again on the stored state (after a failed turn)."""
    scope, found = owned(request, conversation_id, access="write")
    try:
        agent_server.execute(scope, found.pk)
    except (RunConflict, Conflict) as exc:
        return done(request, found, error=str(exc))
    return done(request, found, status=204)
