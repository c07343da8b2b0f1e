"""WebSocket URL routes, included by the project's ASGI router.

``ws/sagents/`` is the JSON protocol of docs/protocol.md; ``ws/sagents/agui/`` the
AG-UI events of docs/agui.md; ``ws/sagents/html/...``
pushes HTML fragments to the chat pages (``sagents_django.ui.socket``), and
``ws/sagents/html/files/<id>/`` to the shared files page
(``sagents_django.sharing.file_socket``). A host
that wants them under a prefix of its own nests the list instead of copying it::

    URLRouter([path("myapp/", URLRouter(websocket_urlpatterns))])
"""

from __future__ import annotations

from django.urls import URLPattern, path

from sagents_django.agui.socket import AgUiSocketConsumer
from sagents_django.consumers import AgentSocketConsumer
from sagents_django.sharing.file_socket import SharedFilesConsumer
from sagents_django.ui.socket import ChatPageConsumer

websocket_urlpatterns: list[URLPattern] = [
    path("ws/sagents/", AgentSocketConsumer.as_asgi(), name="sagents-socket"),
    path("ws/sagents/agui/", AgUiSocketConsumer.as_asgi(), name="sagents-agui"),
    path("ws/sagents/html/", ChatPageConsumer.as_asgi(), name="sagents-html-list"),
    path(
        "ws/sagents/html/files/<int:filesystem_id>/",
        SharedFilesConsumer.as_asgi(),
        name="sagents-html-files",
    ),
    path(
        "ws/sagents/html/<uuid:conversation_id>/",
        ChatPageConsumer.as_asgi(),
        name="sagents-html",
    ),
    path(
        "ws/sagents/html/<uuid:conversation_id>/debug/",
        ChatPageConsumer.as_asgi(),
        kwargs={"debug": True},
        name="sagents-html-debug",
    ),
]
