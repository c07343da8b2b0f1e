"""Signed links to one approval request, for email or chat-ops.

A link carries the request's id and its current nonce, signed with the site's
``SECRET_KEY`` (``django.core.signing``, its own salt). It only opens a confirmation
page: GET never decides, the page's POST does (with CSRF, by a signed-in user who
may decide the request). A decision made through a link changes the request's nonce,
so the same link later ("replayed") is refused; so is one past its age, one whose
signature does not verify, and one opened by someone who may not decide.
"""

from __future__ import annotations

import secrets
from typing import Any

from django.core import signing
from django.urls import reverse

from sagents_django.conf import sagents_settings

from .models import ApprovalRequest

SALT = "sagents_django.approvals.link"
DEFAULT_MAX_AGE = 7 * 24 * 3600
"""How long a link lives when requests never expire (seconds)."""
MAX_TOKEN = 512


class LinkRefused(Exception):
    """A link that cannot be used; the message says why, for the page."""


def max_age() -> int:
    return sagents_settings.APPROVALS.expires_after or DEFAULT_MAX_AGE


def token_for(row: ApprovalRequest) -> str:
    """The signed token of ``row``'s link (gives the row a nonce if it has none)."""
    if not row.link_nonce:
        row.link_nonce = secrets.token_hex(16)
        ApprovalRequest.objects.filter(pk=row.pk, link_nonce="").update(
            link_nonce=row.link_nonce
        )
        row.link_nonce = (
            ApprovalRequest.objects.filter(pk=row.pk)
            .values_list("link_nonce", flat=True)
            .get()
        )
    return signing.dumps({"r": str(row.pk), "n": row.link_nonce}, salt=SALT)


def path_for(row: ApprovalRequest) -> str:
    """The site-relative URL of ``row``'s link (prefix it with the site's origin)."""
    return reverse("sagents_django:approval_link", args=[token_for(row)])


def read(token: str) -> tuple[str, str]:
    """The request id and nonce of a token; ``LinkRefused`` for a forged or old one."""
    if not isinstance(token, str) or len(token) > MAX_TOKEN:
        raise LinkRefused("This link is not valid.")
    try:
        data: Any = signing.loads(token, salt=SALT, max_age=max_age())
    except signing.SignatureExpired:
        raise LinkRefused("This link has expired.") from None
    except signing.BadSignature:
        raise LinkRefused("This link is not valid.") from None
    if not isinstance(data, dict) or not all(
        isinstance(data.get(k), str) for k in ("r", "n")
    ):
        raise LinkRefused("This link is not valid.")
    return data["r"], data["n"]


def request_of(token: str) -> ApprovalRequest:
    """The request a live token names; ``LinkRefused`` otherwise (used or gone)."""
    request_id, nonce = read(token)
    row = ApprovalRequest.objects.filter(pk=_uuid(request_id)).first()
    if row is None:
        raise LinkRefused("This link is not valid.")
    if not secrets.compare_digest(row.link_nonce, nonce):
        raise LinkRefused("This link was already used.")
    return row


def spend(row: ApprovalRequest) -> None:
    """Make ``row``'s current link unusable (called in the deciding transaction)."""
    row.link_nonce = secrets.token_hex(16)
    ApprovalRequest.objects.filter(pk=row.pk).update(link_nonce=row.link_nonce)


def _uuid(value: str) -> Any:
    import uuid

    try:
        return uuid.UUID(value)
    except ValueError:
        raise LinkRefused("This link is not valid.") from None
