"""What every chat view shares: the caller's conversation, and the answer to a
form whether htmx sent it (a fragment) or a browser without JavaScript (a
redirect back to the page, the Post/Redirect/Get pattern)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from sagents_django import services
from sagents_django.core.limits import MAX_MESSAGE_BYTES
from sagents_django.exceptions import InvalidInput, NotFound
from sagents_django.scope import Scope, get_scope
from sagents_django.sharing.access import Needed, scope_for


def is_htmx(request: HttpRequest) -> bool:
    return request.headers.get("HX-Request") == "true"


def owned(
    request: HttpRequest, conversation_id: Any, *, access: Needed = "own"
) -> tuple[Scope, Any]:
    """The scope to act in and the conversation: the caller's own, or, with
    ``access`` "read" or "write", the scope a share of theirs lends
    (``sharing.access``); Http404 for anything else."""
    scope = get_scope(request)
    try:
        scope = scope_for(scope, conversation_id, access=access)
    except (NotFound, InvalidInput):
        raise Http404("Conversation not found.") from None
    return scope, services.get_conversation_or_404(scope, conversation_id)


def message_problem(text: str) -> str:
    """What is wrong with a message a form posted ("" when nothing is)."""
    if not text.strip():
        return "Write a message first."
    if len(text.encode("utf-8", "surrogatepass")) > MAX_MESSAGE_BYTES:
        return "That message is too long."
    return ""


def page_url(conversation: Any) -> str:
    return reverse("sagents_django:conversation", args=[conversation.pk])


def done(
    request: HttpRequest,
    conversation: Any,
    *,
    error: str = "",
    fragment: str = "",
    status: int = 200,
    to: str = "",
) -> HttpResponse:
    """htmx: ``fragment`` (or nothing: the socket brings the change), with the
    error as a 422 the page shows. A plain form: back to the conversation (or to
    the page ``to`` names), the error as a message."""
    if is_htmx(request):
        if error:
            response = HttpResponse(error, status=422, content_type="text/plain")
            return response
        return HttpResponse(fragment, status=status)
    if error:
        messages.error(request, error, fail_silently=True)
    return HttpResponseRedirect(to or page_url(conversation))
