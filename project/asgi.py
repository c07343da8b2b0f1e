"""ASGI entry point: plain HTTP through Django, WebSockets through Channels, and a
drain on SIGTERM around both (readiness says "not ready", sockets close with 4503)."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

# Django must be set up before anything that imports models (the routing's consumers).
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from sagents_django.asgi import DrainOnSigterm  # noqa: E402
from sagents_django.routing import websocket_urlpatterns  # noqa: E402

application = DrainOnSigterm(
    ProtocolTypeRouter(
        {
            "http": django_asgi_app,
            "websocket": AllowedHostsOriginValidator(
                AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
            ),
        }
    )
)
