"""What budgets say to people, translated when shown.

Rows keep the numbers (``content["budget"]``), not only the sentence, so the chat
page says it again in the reader's language (``ui.transcript``).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from django.utils.translation import gettext as _

AMOUNTS = ("limit", "spent", "remaining", "estimate")


def money(value: Any) -> str:
    """An amount in dollars as people read it: cents, or four decimals for what
    is under a cent (model calls often are), "<0.0001" below that."""
    try:
        amount = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return str(value)
    if amount == 0 or abs(amount) >= Decimal("0.01"):
        return f"{amount:.2f}"
    if abs(amount) >= Decimal("0.0001"):
        return f"{amount:.4f}"
    return "<0.0001"


def _words(data: dict[str, Any]) -> dict[str, Any]:
    period = {
        "day": _("today's"),
        "month": _("this month's"),
        "total": _("the overall"),
    }.get(data.get("period", ""), "")
    scope = {
        "site": _("the site"),
        "owner": _("your organisation"),
        "user": _("you"),
        "conversation": _("this conversation"),
    }.get(data.get("scope", ""), "")
    amounts = {key: money(data[key]) for key in AMOUNTS if key in data}
    return {**data, **amounts, "period_words": period, "scope_words": scope}


def exhausted_text(data: dict[str, Any]) -> str:
    return _(
        "Budget exhausted: %(period_words)s budget for %(scope_words)s is $%(limit)s "
        "and $%(spent)s is used; the next model call would need about "
        "$%(estimate)s. Ask an administrator to raise it."
    ) % _words(data)


def warning_text(data: dict[str, Any]) -> str:
    return _(
        "Near the budget: %(period_words)s budget for %(scope_words)s is $%(limit)s; "
        "$%(remaining)s is left."
    ) % _words(data)


def approval_text(data: dict[str, Any]) -> str:
    """What the person the agent acts for reads while the call waits."""
    return _(
        "This reply needs budget approval: $%(remaining)s left of $%(limit)s "
        "(%(period_words)s budget for %(scope_words)s). Someone allowed to raise "
        "budgets must approve it before the agent goes on."
    ) % _words(data)


def request_text(data: dict[str, Any]) -> str:
    """What a person who may decide it reads (the inbox, the chat page, a link)."""
    words = _words(data)
    words["period_name"] = {
        "day": _("daily"),
        "month": _("monthly"),
        "total": _("overall"),
    }.get(data.get("period", ""), "")
    kind, _sep, value = str(data.get("key", "")).partition(":")
    words["whose"] = {
        "site": _("the site"),
        "owner": _("owner %(value)s"),
        "user": _("user %(value)s"),
        "conversation": _("this conversation"),
    }.get(kind, kind) % {"value": value}
    return (
        _(
            "This reply needs budget approval: $%(remaining)s left of $%(limit)s "
            "(the %(period_name)s budget of %(whose)s); the call needs about "
            "$%(estimate)s. Approve to let the agent go on past the soft limit this "
            "period, or reject to stop it there."
        )
        % words
    )


def unpriced_text(data: dict[str, Any]) -> str:
    return (
        _(
            "The model %(model)s has no price, and this site does not run unpriced "
            "models while a budget applies."
        )
        % data
    )


def describe(data: Any, *, exhausted: bool) -> str | None:
    """The sentence for a stored row's ``budget`` details, in the current language;
    None when they are not what this module wrote."""
    if not isinstance(data, dict):
        return None
    try:
        if data.get("reason") == "unpriced":
            return unpriced_text(data)
        return exhausted_text(data) if exhausted else warning_text(data)
    except (KeyError, TypeError, ValueError):
        return None


def pause_text(data: Any, *, deciding: bool) -> str | None:
    """A budget approval's sentence for a reader who decides it or waits for it;
    None when ``data`` is not what this module wrote."""
    if not isinstance(data, dict):
        return None
    try:
        return request_text(data) if deciding else approval_text(data)
    except (KeyError, TypeError, ValueError):
        return None
