"""``approval_requested``: sent after commit for each request that waits for
people (again after a partial approval of a quorum), with what a receiver needs to
tell them: the row, the path of its signed link, and how many approvals it still
needs. ``deciders(row)`` lists who may decide it (docs/approvals.md has an example
that emails them)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.urls import NoReverseMatch

from sagents_django.signals import approval_requested

from .models import ApprovalRequest


def announce(row: ApprovalRequest, *, still_needed: int | None = None) -> None:
    def send() -> None:
        from . import links

        fresh = ApprovalRequest.objects.filter(pk=row.pk).first()
        if fresh is None or fresh.is_final:
            return
        try:
            link = links.path_for(fresh)
        except NoReverseMatch:
            link = ""  # a site without the chat pages' URLs: no page to link to
        approval_requested.send_robust(
            sender=ApprovalRequest,
            request=fresh,
            link=link,
            still_needed=still_needed
            if still_needed is not None
            else fresh.approvals_needed,
        )

    # robust: a failing receiver (or link) never undoes the run's ending.
    transaction.on_commit(send, robust=True)


def deciders(row: ApprovalRequest) -> Any:
    """Active users who may decide ``row`` (its owner, holders of its permission
    within the tenancy), as a queryset."""
    from .routing import deciders as find

    return find(row)
