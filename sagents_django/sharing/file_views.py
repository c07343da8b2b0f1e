"""The shared files page: a filesystem's files, for its owner and the people it
is shared with (``sharing.filesystems``), live, and with an upload form for those
who may write.

Every request goes through ``filesystems.open_filesystem`` with the viewer's
scope: a filesystem that is not theirs and not shared with them (or no longer:
a revoked share) is 404, whatever the id, and so is an upload from someone who
may only read it (a read share's page draws no form; the view refuses anyway).
An upload follows the chat page's rules and limits (``views.files.take_upload``,
``ui.files.store_upload``). The page follows the files over its socket
(``file_socket``): what a turn writes or someone uploads appears without a
reload, and a revoked share closes it.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from sagents_django.exceptions import NotFound
from sagents_django.scope import get_scope
from sagents_django.security import csp
from sagents_django.ui import files
from sagents_django.views.common import done
from sagents_django.views.files import take_upload

MAX_PATH = 1024


def _opened(request: HttpRequest, filesystem_id: int, access: Any = "read") -> Any:
    from . import filesystems

    try:
        return filesystems.open_filesystem(
            get_scope(request), filesystem_id, access=access
        )
    except NotFound:
        raise Http404("No such filesystem.") from None


def page_url(filesystem: Any) -> str:
    return reverse("sagents_django:shared_files", args=[filesystem.pk])


@csp
@login_required
@require_safe
def shared_files(request: HttpRequest, filesystem_id: int) -> HttpResponse:
    """The filesystem's tree, and the file ``?path=`` names."""
    filesystem, level = _opened(request, filesystem_id)
    rows = files.rows_in(filesystem.key)
    path = request.GET.get("path", "")
    opened = None
    if path:
        if len(path) > MAX_PATH:
            raise Http404("No such file.")
        opened = files.read_in(rows, path)
        if opened is None:
            raise Http404("No such file.")
    return render(
        request,
        "sagents_django/shared_files.html",
        {
            "filesystem": filesystem,
            "access": level,
            "tree": files.tree_of(rows),
            "path": path,
            "content": opened[0] if opened else None,
            "mime": opened[1] if opened else None,
        },
    )


@csp
@login_required
@require_POST
def upload_shared(request: HttpRequest, filesystem_id: int) -> HttpResponse:
    """An upload to ``/uploads/`` of the filesystem, for its owner and a write
    share (404 for anyone else)."""
    filesystem, _level = _opened(request, filesystem_id, access="write")
    error = take_upload(
        request, lambda name, data: files.upload_to(filesystem.key, name, data)
    )
    return done(request, None, error=error, status=204, to=page_url(filesystem))


def tree_fragment(filesystem: Any) -> str:
    """The page's file list alone, to swap in (its socket, after a change)."""
    return render_to_string(
        "sagents_django/partials/file_list.html",
        {
            "tree": files.tree_of(files.rows_in(filesystem.key)),
            "open_url": page_url(filesystem),
            "oob": True,
        },
    )
