"""Branches from the chat page: regenerate a reply, edit a person's message and
send it again, show another branch (``< n / m >``).

Each is a plain form POST: without JavaScript the browser goes back to the page
(at the row acted on), which shows the branch now shown; with htmx the request
answers 204 and the socket's ``branch_switched`` redraws the transcript (other
tabs of the conversation follow the same way). A row of another conversation, or
of another tenant's, is a 404 like one that does not exist; a turn running or an
approval waiting is an error beside the form, and nothing changes.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.views.decorators.http import require_POST

from sagents_django.exceptions import Conflict, InvalidInput, NotFound, RunConflict
from sagents_django.runtime import agent_server
from sagents_django.security import csp

from .common import done, is_htmx, message_problem, owned, page_url

BUSY = "A turn is running: wait for it (or stop it), then try again."
MAX_INDEX_DIGITS = 5


def _act(
    request: HttpRequest, found: Any, message_id: int, verb: Callable[[], Any]
) -> HttpResponse:
    try:
        verb()
    except NotFound:
        raise Http404("Message not found.") from None
    except RunConflict:
        return done(request, found, error=BUSY)
    except (InvalidInput, Conflict) as exc:
        return done(request, found, error=str(exc))
    if is_htmx(request):
        return HttpResponse(status=204)
    return HttpResponseRedirect(f"{page_url(found)}#sg-msg-{message_id}")


@csp
@login_required
@require_POST
def regenerate(
    request: HttpRequest, conversation_id: str, message_id: int
) -> HttpResponse:
    """Make the reply ``message_id`` again, in a new branch."""
    scope, found = owned(request, conversation_id)
    verb = partial(agent_server.regenerate, scope, found.pk, message_id)
    return _act(request, found, message_id, verb)


@csp
@login_required
@require_POST
def edit(request: HttpRequest, conversation_id: str, message_id: int) -> HttpResponse:
    """Send ``text`` in place of the person's message ``message_id``."""
    scope, found = owned(request, conversation_id)
    text = request.POST.get("text", "")
    problem = message_problem(text)
    if problem:
        return done(request, found, error=problem)
    verb = partial(agent_server.edit_and_resend, scope, found.pk, message_id, text)
    return _act(request, found, message_id, verb)


@csp
@login_required
@require_POST
def switch(request: HttpRequest, conversation_id: str, message_id: int) -> HttpResponse:
    """Show alternative ``index`` (from 1) of the branch point at ``message_id``."""
    scope, found = owned(request, conversation_id)
    raw = request.POST.get("index", "")
    if not raw.isdigit() or len(raw) > MAX_INDEX_DIGITS:
        return done(request, found, error="index must be a number from 1.")
    verb = partial(agent_server.switch_branch, scope, found.pk, message_id, int(raw))
    return _act(request, found, message_id, verb)
