"""WebSocket URL routes, included by the project's ASGI router."""

from __future__ import annotations

from django.urls import URLPattern

websocket_urlpatterns: list[URLPattern] = []
