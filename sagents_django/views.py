from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from sagents_django import __version__
from sagents_django.conf import sagents_settings


@require_safe
def home(request: HttpRequest) -> HttpResponse:
    """A public landing page: what is running and with which model."""
    return render(
        request,
        "sagents_django/home.html",
        {"model": sagents_settings.MODEL, "version": __version__},
    )
