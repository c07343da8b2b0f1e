"""A person's export of their own data: asked for on their usage page, downloaded
once from it. Another person's export is a 404 (not theirs to know of); a spent
link is 410 Gone."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import (
    FileResponse,
    HttpRequest,
    HttpResponse,
    HttpResponseGone,
    HttpResponseRedirect,
)
from django.http.response import HttpResponseBase
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from sagents_django.lifecycle.export import Gone, request_export, take_download
from sagents_django.security import csp


@login_required
@require_POST
def export(request: HttpRequest) -> HttpResponse:
    """Start an export of the signed-in person's data; back to their usage page."""
    request_export(request.user)
    return HttpResponseRedirect(reverse("sagents_django:my_usage"))


@csp
@login_required
@require_safe
def download(request: HttpRequest, export_id: str) -> HttpResponseBase:
    """The archive, once, for the person it belongs to."""
    try:
        archive = take_download(request.user, export_id)
    except Gone:
        return HttpResponseGone("This export was downloaded already.")
    return FileResponse(
        archive,
        as_attachment=True,
        filename=f"sagents-export-{export_id}.zip",
        content_type="application/zip",
    )
