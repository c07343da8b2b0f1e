"""The file panel: the agent's files, opened, downloaded, uploaded."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST, require_safe

from sagents_django.core.limits import MAX_FILE_BYTES
from sagents_django.security import csp
from sagents_django.ui import files

from .common import done, owned

MAX_PATH = 1024


def _path(request: HttpRequest) -> str:
    path = request.GET.get("path", "")
    if not path or len(path) > MAX_PATH:
        raise Http404("No such file.")
    return path


@csp
@login_required
@require_safe
def open_file(request: HttpRequest, conversation_id: str) -> HttpResponse:
    scope, found = owned(request, conversation_id, access="read")
    path = _path(request)
    stored = files.read(scope, found, path)
    if stored is None:
        raise Http404("No such file.")
    content, mime = stored
    return render(
        request,
        "sagents_django/file.html",
        {"conversation": found, "path": path, "content": content, "mime": mime},
    )


@csp
@login_required
@require_safe
def download(request: HttpRequest, conversation_id: str) -> HttpResponse:
    scope, found = owned(request, conversation_id, access="read")
    path = _path(request)
    stored = files.read(scope, found, path)
    if stored is None:
        raise Http404("No such file.")
    content, _mime = stored
    # Always an attachment of plain text: a file the model wrote is never a page
    # of this site (an .html file would otherwise run in our origin).
    response = HttpResponse(content, content_type="text/plain; charset=utf-8")
    name = path.rsplit("/", 1)[-1]
    response["Content-Disposition"] = _attachment(name)
    response["X-Content-Type-Options"] = "nosniff"
    return response


def _attachment(name: str) -> str:
    from urllib.parse import quote

    ascii_name = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
    return f"attachment; filename=\"{ascii_name or 'file'}\"; filename*=UTF-8''{quote(name)}"


@csp
@login_required
@require_POST
def upload(request: HttpRequest, conversation_id: str) -> HttpResponse:
    scope, found = owned(request, conversation_id, access="write")
    error = take_upload(
        request, lambda name, data: files.upload(scope, found, name, data)
    )
    return done(request, found, error=error, status=204)


def take_upload(request: HttpRequest, store: Callable[[str, bytes], Any]) -> str:
    """Store the form's file with ``store(name, data)`` (``ui.files``' rules and
    limits); what went wrong, for the person ("" when it was stored)."""
    uploaded = request.FILES.get("file")
    if uploaded is None:
        return "Choose a file to upload."
    if uploaded.size is not None and uploaded.size > MAX_FILE_BYTES:
        return "That file is too large."
    try:
        store(uploaded.name or "", uploaded.read())
    except files.UploadError as exc:
        return str(exc)
    return ""


@csp
@login_required
@require_safe
def panel(request: HttpRequest, conversation_id: str) -> HttpResponse:
    """The file panel alone (after an upload without the socket)."""
    scope, found = owned(request, conversation_id, access="read")
    from sagents_django.ui.context import Chat

    return render(
        request,
        "sagents_django/partials/file_panel.html",
        {"chat": Chat(scope, found)},
    )
