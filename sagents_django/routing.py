"""WebSocket URL routes, included by the project's ASGI router.

``ws/sagents/`` is the JSON protocol of docs/protocol.md. A host that wants it under
a prefix of its own nests the list instead of copying it::

    URLRouter([path("myapp/", URLRouter(websocket_urlpatterns))])
"""

from __future__ import annotations

from django.urls import URLPattern, path

from sagents_django.consumers import AgentSocketConsumer

websocket_urlpatterns: list[URLPattern] = [
    path("ws/sagents/", AgentSocketConsumer.as_asgi(), name="sagents-socket"),
]
