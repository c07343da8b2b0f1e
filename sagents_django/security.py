"""The chat pages' Content-Security-Policy.

Why a decorator rather than a site-wide middleware: the app cannot decide the
policy of a host's other pages (the admin, the host's own templates), but it can
promise that its own pages run no inline script and load nothing from elsewhere.
Our JavaScript and CSS are files under ``static/sagents_django/``; htmx comes from
django-htmx's static files; the socket is same-origin (``'self'`` covers ws: and
wss: of the page's own host in CSP Level 3 browsers; the explicit schemes are for
older ones).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponseBase

POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self' ws: wss:",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)


def csp(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """Set the policy on the view's responses (unless the view set one)."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        response = view(request, *args, **kwargs)
        response.headers.setdefault("Content-Security-Policy", POLICY)
        return response

    return wrapped
