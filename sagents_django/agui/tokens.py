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
"""

from __future__ import annotations

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


def _password_mark(user: Any) -> str:
    return salted_hmac(SALT, user.password or "").hexdigest()[:16]
