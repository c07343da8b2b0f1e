"""A host's URLconf without the chat pages (the admin only): the core, the
runtime and the JSON socket need no page of the app."""

from __future__ import annotations

from django.contrib import admin
from django.urls import path

urlpatterns = [path("admin/", admin.site.urls)]
