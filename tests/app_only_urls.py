"""A host's URLconf with nothing but the app: no admin, no sign-in pages."""

from __future__ import annotations

from django.urls import include, path

urlpatterns = [path("", include("sagents_django.urls"))]
