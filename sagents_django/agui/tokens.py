"""Bearer tokens for AG-UI clients that have no Django session (a script, an app on
another origin): ``Authorization: Bearer <token>``.

A token is the user's primary key signed with the site's ``SECRET_KEY``
(``django.core.signing``, salted for this use) together with a hash of the user's
password, so changing the password revokes every token issued before; it expires
after ``max_age`` seconds. A site issues one from a view of its own, e.g.::

    from sagents_django.agui.tokens import issue

    @login_required
    def agui_token(request):
        return JsonResponse({"token": issue(request.user)})

Over the WebSocket (``ws/sagents/agui/``), where a browser cannot set a header, the
same token rides in the ``Sec-WebSocket-Protocol`` list, next to ``agui``:
``["agui", subprotocol(token)]``, i.e. ``"bearer." + base64url(token)`` without
padding (a token's ``:`` is not allowed in a subprotocol name). The server answers
``agui`` only: the secret is never echoed. It is never read from the query string,
which ends up in access logs.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from typing import Any, Final

from django.contrib.auth import get_user_model
from django.core import signing
from django.utils.crypto import salted_hmac

SALT: Final = "sagents_django.agui.token"
MAX_AGE: Final = 24 * 3600
"""Seconds a token is good for, unless the caller says otherwise."""


def issue(user: Any) -> str:
    """A bearer token for ``user``."""
    return signing.dumps({"u": str(user.pk), "p": _password_mark(user)}, salt=SALT)


def user_for(token: str, *, max_age: int = MAX_AGE) -> Any:
    """The active user a token names, or None (bad, expired, or revoked)."""
    try:
        data = signing.loads(token, salt=SALT, max_age=max_age)
    except signing.BadSignature:  # SignatureExpired is one too
        return None
    if not isinstance(data, dict) or not isinstance(data.get("u"), str):
        return None
    model = get_user_model()
    try:
        user = model._default_manager.get(pk=data["u"])
    except (model.DoesNotExist, ValueError, TypeError):
        return None
    if not user.is_active or data.get("p") != _password_mark(user):
        return None
    return user


SUBPROTOCOL: Final = "agui"
"""The subprotocol the AG-UI socket answers with (never the bearer entry)."""
BEARER_PREFIX: Final = "bearer."
MAX_SUBPROTOCOL_CHARS: Final = 1024


def subprotocol(token: str) -> str:
    """The ``Sec-WebSocket-Protocol`` entry that carries ``token``."""
    encoded = base64.urlsafe_b64encode(token.encode()).rstrip(b"=").decode()
    return BEARER_PREFIX + encoded


def from_subprotocols(offered: Iterable[Any]) -> str | None:
    """The token a client's subprotocol list carries; None: no bearer entry; ""
    for one that cannot be decoded (not valid, as a bad token is)."""
    for entry in offered:
        if isinstance(entry, str) and entry.startswith(BEARER_PREFIX):
            encoded = entry[len(BEARER_PREFIX) :]
            if len(entry) > MAX_SUBPROTOCOL_CHARS:
                return ""
            try:
                padded = encoded + "=" * (-len(encoded) % 4)
                return base64.urlsafe_b64decode(padded.encode("ascii")).decode()
            except (binascii.Error, UnicodeError, ValueError):
                return ""
    return None


def seconds_left(token: str, *, max_age: int = MAX_AGE) -> float | None:
    """Seconds until a valid ``token`` expires (None: it has no readable time)."""
    import time

    parts = token.split(":")
    if len(parts) < 3:
        return None
    try:
        issued = signing.b62_decode(parts[-2])
    except (ValueError, TypeError):
        return None
    return max(0.0, issued + max_age - time.time())


def _password_mark(user: Any) -> str:
    return salted_hmac(SALT, user.password or "").hexdigest()[:16]
