"""The shared files page: a filesystem's files, for its owner and the people it
is shared with (``sharing.filesystems``), read-only.

Every request goes through ``filesystems.open_filesystem`` with the viewer's
scope: a filesystem that is not theirs and not shared with them (or no longer:
a revoked share) is 404, whatever the id. The page lists and opens files; it has
no form (a write share lets a turn use the files, ``add_message(...,
filesystem_scope=...)``; uploads stay on the owner's chat pages).
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from sagents_django.exceptions import NotFound
from sagents_django.scope import get_scope
from sagents_django.security import csp
from sagents_django.ui import files

MAX_PATH = 1024


@csp
@login_required
@require_safe
def shared_files(request: HttpRequest, filesystem_id: int) -> HttpResponse:
    """The filesystem's tree, and the file ``?path=`` names."""
    from . import filesystems

    try:
        filesystem, level = filesystems.open_filesystem(
            get_scope(request), filesystem_id
        )
    except NotFound:
        raise Http404("No such filesystem.") from None
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
