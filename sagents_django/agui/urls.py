"""The AG-UI endpoints (docs/agui.md), included by ``sagents_django.urls`` under
``agui/``."""

from __future__ import annotations

from django.urls import URLPattern, path

from . import views

urlpatterns: list[URLPattern] = [
    path("agui/", views.run, name="agui_run"),
    path("agui/capabilities/", views.agent_capabilities, name="agui_capabilities"),
    path("agui/threads/", views.new_thread, name="agui_new_thread"),
    path("agui/<uuid:thread_id>/", views.connect, name="agui_connect"),
]
