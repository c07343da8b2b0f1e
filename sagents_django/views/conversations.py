"""The conversation list (the signed-in home page): search, new, rename, delete."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import (
    require_http_methods,
    require_POST,
    require_safe,
)

from sagents_django import __version__, services
from sagents_django.conf import sagents_settings
from sagents_django.exceptions import InvalidInput, NotFound
from sagents_django.scope import get_scope
from sagents_django.security import csp
from sagents_django.ui import search
from sagents_django.ui.live_lists import PAGE_SIZE

from .common import done, is_htmx, owned, page_url

MAX_QUERY = 200
SEARCH_SIZE = 100
"""Matches read for one search: folded to one result per conversation."""


@csp
@require_safe
def home(request: HttpRequest) -> HttpResponse:
    """Signed in: the conversations, newest first (``?q=`` searches titles and
    messages: one result per conversation, with a snippet). Anyone else: a
    landing page."""
    if not request.user.is_authenticated:
        return render(
            request,
            "sagents_django/home.html",
            {"model": sagents_settings.MODEL, "version": __version__},
        )
    scope = get_scope(request)
    query = request.GET.get("q", "").strip()[:MAX_QUERY]
    results: list[search.Hit] = []
    error = ""
    if query:
        try:
            found = services.search_messages(scope, query, limit=SEARCH_SIZE)
        except InvalidInput as exc:
            error = str(exc)
        else:
            results = search.hits(found, query)
    # While searching, the results stand alone: the whole list is not read.
    conversations = [] if query else services.list_conversations(scope, limit=PAGE_SIZE)
    context = {
        "conversations": conversations,
        "query": query,
        "results": results,
        "error": error,
    }
    template = (
        "sagents_django/partials/conversation_rows.html"
        if is_htmx(request) and request.headers.get("HX-Target") == "sg-results"
        else "sagents_django/conversation_list.html"
    )
    return render(request, template, context)


@csp
@login_required
@require_POST
def new(request: HttpRequest) -> HttpResponse:
    scope = get_scope(request)
    title = request.POST.get("title", "")
    try:
        conversation = services.create_conversation(scope, title=title[:255])
    except InvalidInput as exc:
        return HttpResponse(str(exc), status=400, content_type="text/plain")
    return HttpResponseRedirect(page_url(conversation))


@csp
@login_required
@require_POST
def rename(request: HttpRequest, conversation_id: str) -> HttpResponse:
    scope, conversation = owned(request, conversation_id)
    title = request.POST.get("title", "")
    if len(title) > 255:
        return done(request, conversation, error="A title has at most 255 characters.")
    try:
        conversation = services.update_conversation(scope, conversation.pk, title=title)
    except InvalidInput as exc:
        return done(request, conversation, error=str(exc))
    if is_htmx(request):
        return render(
            request,
            "sagents_django/partials/title.html",
            {"conversation": conversation},
        )
    return done(request, conversation)


@csp
@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def delete(request: HttpRequest, conversation_id: str) -> HttpResponse:
    """GET asks for confirmation; POST deletes (state, messages, runs)."""
    scope, conversation = owned(request, conversation_id)
    if request.method == "POST":
        try:
            services.delete_conversation(scope, conversation.pk)
        except NotFound:
            raise Http404("Conversation not found.") from None
        return HttpResponseRedirect(reverse("sagents_django:home"))
    return render(
        request,
        "sagents_django/conversation_confirm_delete.html",
        {"conversation": conversation},
    )
