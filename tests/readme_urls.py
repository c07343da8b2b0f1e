"""The URLconf the README's steps give a new project: startproject's admin, the
chat pages under agents/ and django.contrib.auth's sign-in and sign-out."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("agents/", include("sagents_django.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
]
