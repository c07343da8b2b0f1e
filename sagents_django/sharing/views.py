"""The share panels' forms (the owner's) and the read-only link page (anyone's).

Two panels share these views, one template of who and form
(``partials/share_targets.html``) and the same errors: the conversation's Sharing
panel, and the files panel's "Share files" (the conversation's filesystem,
``sharing.filesystems``); the URL says which (``panel=``). The forms are plain
POSTs, answered like the chat page's other forms (``views.common.done``): with
htmx, the panel drawn again; without, back to the page. Every one goes through
the owner's scope (``services.owned_conversation``):
a person the conversation is only shared with gets 404, whatever they post.

The link page shows the transcript's text and nothing else: no form, no script, no
socket, no file, no state; a policy that forbids every script and every form, and
no ``Referer`` (the token is in the URL, and the transcript may hold links).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import wraps
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST, require_safe

from sagents_django.exceptions import InvalidInput, NotFound
from sagents_django.models import DisplayMessage
from sagents_django.scope import Scope, get_scope
from sagents_django.security import csp
from sagents_django.services.branches import load_tree, path_filter
from sagents_django.ui import transcript
from sagents_django.views.common import done, is_htmx

from . import filesystems, links, services

View = Callable[..., HttpResponse]

LINK_ROWS = 1000
"""The latest this many display rows show on a link page."""
EXPIRIES = {"": None, "1": 1, "7": 7, "30": 30}
"""The link lifetimes the panel offers, in days ("": until revoked)."""
LINK_POLICY = "; ".join(
    [
        "default-src 'none'",
        "style-src 'self'",
        "img-src 'self' data:",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)


def panel_context(scope: Scope, conversation: Any) -> dict[str, Any]:
    """What the share panel shows (NotFound unless ``scope`` owns it)."""
    pk = conversation.pk
    return {
        "conversation": conversation,
        "shares": services.shares_of(scope, pk),
        "links": [(link, links.token_of(link)) for link in links.links_of(scope, pk)],
    }


def files_panel_context(scope: Scope, conversation: Any) -> dict[str, Any]:
    """What the files panel's "Share files" shows: the conversation's filesystem
    (claimed for its owner if no one had) and its shares; NotFound unless
    ``scope`` owns both."""
    pk = conversation.pk
    return {
        "conversation": conversation,
        "filesystem": filesystems.filesystem_of(scope, pk),
        "shares": filesystems.file_shares_of(scope, pk),
    }


@dataclass(frozen=True, kw_only=True, slots=True)
class Panel:
    """One of the owner's share panels: what it draws, and how it shares."""

    template: str
    context: Callable[[Scope, Any], dict[str, Any]]
    share: Callable[[Scope, Any, Any, Any], Any]
    """``(scope, conversation_id, target, access)``."""
    revoke: Callable[[Scope, Any, Any], bool]
    """``(scope, conversation_id, share_id)``."""


PANELS = {
    "conversation": Panel(
        template="sagents_django/partials/share_panel.html",
        context=panel_context,
        share=services.share,
        revoke=services.revoke_share,
    ),
    "files": Panel(
        template="sagents_django/partials/file_share_panel.html",
        context=files_panel_context,
        share=filesystems.share_files,
        revoke=filesystems.revoke_file_share,
    ),
}
"""The panels the same views serve (the URL says which: ``panel=``)."""


def _panel(
    request: HttpRequest,
    conversation_id: str,
    *,
    error: str = "",
    panel: str = "conversation",
) -> HttpResponse:
    scope = get_scope(request)
    conversation = services.owned_conversation(scope, conversation_id)
    if is_htmx(request):
        shown = PANELS[panel]
        context = {**shown.context(scope, conversation), "error": error}
        status = 422 if error else 200
        return render(request, shown.template, context, status=status)
    return done(request, conversation, error=error)


def _owner_only(view: View) -> View:
    """NotFound from the owner's scope is a 404, like any other chat view."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except NotFound:
            raise Http404("Conversation not found.") from None

    return wrapped


@csp
@login_required
@require_POST
@_owner_only
def add_share(
    request: HttpRequest, conversation_id: str, panel: str = "conversation"
) -> HttpResponse:
    """Share (the conversation, or with ``panel="files"`` its filesystem) with
    the user (username or email) or group (name) typed."""
    scope = get_scope(request)
    shown = PANELS[panel]
    shown.context(scope, services.owned_conversation(scope, conversation_id))  # 404
    access = request.POST.get("access", "read")
    try:
        target = services.find_target(
            scope, conversation_id, request.POST.get("name", "")
        )
        shown.share(scope, conversation_id, target, access)
    except NotFound:
        error = "No one you may share with has that name."
        return _panel(request, conversation_id, error=error, panel=panel)
    except (InvalidInput, PermissionDenied) as exc:
        return _panel(request, conversation_id, error=str(exc), panel=panel)
    return _panel(request, conversation_id, panel=panel)


@csp
@login_required
@require_POST
@_owner_only
def remove_share(
    request: HttpRequest,
    conversation_id: str,
    share_id: int,
    panel: str = "conversation",
) -> HttpResponse:
    PANELS[panel].revoke(get_scope(request), conversation_id, share_id)
    return _panel(request, conversation_id, panel=panel)


@csp
@login_required
@require_POST
@_owner_only
def add_link(request: HttpRequest, conversation_id: str) -> HttpResponse:
    days = EXPIRIES.get(request.POST.get("expires", ""), "bad")
    if days == "bad":
        return _panel(request, conversation_id, error="Choose how long the link works.")
    expires = timedelta(days=days) if isinstance(days, int) else None
    links.create_link(get_scope(request), conversation_id, expires_in=expires)
    if not is_htmx(request):
        messages.success(request, "Link made: copy it from the Sharing panel.")
    return _panel(request, conversation_id)


@csp
@login_required
@require_POST
@_owner_only
def remove_link(
    request: HttpRequest, conversation_id: str, link_id: str
) -> HttpResponse:
    links.revoke_link(get_scope(request), conversation_id, link_id)
    return _panel(request, conversation_id)


@require_safe
def shared_link(request: HttpRequest, token: str) -> HttpResponse:
    """The transcript a read-only link shows, to anyone who has the link."""
    try:
        link = links.open_link(token)
    except NotFound:
        raise Http404("This link does not work (any more).") from None
    conversation = link.conversation
    rows_of = DisplayMessage.objects.filter(conversation=conversation)
    # The branch the owner shows, as the chat page does: never an abandoned edit.
    shown = path_filter(load_tree(conversation.pk))
    if shown is not None:
        rows_of = rows_of.filter(shown)
    latest = list(
        rows_of.exclude(content_type__in=("thinking",)).order_by(
            "-inserted_at", "-sequence", "-id"
        )[: LINK_ROWS + 1]
    )
    older = len(latest) > LINK_ROWS
    rows = list(reversed(latest[:LINK_ROWS]))
    entries = [
        e
        for e in transcript.entries(rows)
        if e.kind in ("text", "tool", "notification")
    ]
    response = render(
        request,
        "sagents_django/shared_link.html",
        {"conversation": conversation, "entries": entries, "older": older},
    )
    response.headers["Content-Security-Policy"] = LINK_POLICY
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["X-Robots-Tag"] = "noindex, nofollow"
    response.headers["Cache-Control"] = "private, no-store"
    return response
