"""Requests nobody decided in time: the sweeper's chore applies the site's default
outcome (``APPROVALS["ON_EXPIRY"]``: "reject" tells the agent the call was refused
because nobody decided, "dismiss" abandons the pause), recorded as such: the rows
end ``expired`` with an "expire" vote by nobody, via the sweeper.

Several sweepers at once are safe: each interrupt is closed in one transaction that
locks its conversation first and takes only rows still pending.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from sagents_django.conf import sagents_settings
from sagents_django.exceptions import Conflict, InvalidInput, NotFound

from . import records
from .models import EXPIRED, PENDING, ApprovalRequest, ApprovalVote

logger = logging.getLogger(__name__)

BATCH = 50
"""Interrupts closed per sweep (the next sweep takes the rest)."""
EXPIRED_TEXT = "Nobody decided in time: the approval request expired."


def expire_due() -> int:
    """Close the interrupts with an expired request; how many were closed."""
    due = list(
        ApprovalRequest.objects.filter(status=PENDING, expires_at__lte=timezone.now())
        .order_by("expires_at")
        .values_list("conversation_ref", "run_ref")
        .distinct()[:BATCH]
    )
    closed = 0
    for conversation_ref, run_ref in dict.fromkeys(due):
        try:
            closed += _expire(conversation_ref, run_ref)
        except Exception:
            logger.exception("Expiring the approval requests of %s failed", run_ref)
    return closed


def _expire(conversation_ref: str, run_ref: str) -> int:
    from sagents_django.runtime import agent_server
    from sagents_django.scope import conversation_model

    outcome = sagents_settings.APPROVALS.on_expiry
    with transaction.atomic():
        manager = conversation_model()._default_manager
        list(manager.select_for_update().filter(pk=conversation_ref).values_list("pk"))
        rows = list(
            ApprovalRequest.objects.select_for_update()
            .filter(run_ref=run_ref, resumed_run_ref="", execution_status="")
            .order_by("index")
        )
        pending = [r for r in rows if r.status == PENDING]
        if not pending:
            return 0
        now = timezone.now()
        for row in pending:
            ApprovalVote.objects.create(request=row, decision="expire", via="sweeper")
            row.status = EXPIRED
            row.decided_at = now
            if outcome == "reject" and "reject" in row.allowed_decisions:
                row.decision = {"type": "reject", "message": EXPIRED_TEXT}
            row.save(update_fields=["status", "decided_at", "decision"])
        waiting = [r for r in rows if r.decision is None]
        try:
            scope = records.requester_scope(rows[0])
            if outcome == "reject" and not waiting:
                agent_server.resume(scope, conversation_ref, [r.decision for r in rows])
            else:
                records.close_open(conversation_ref, status=EXPIRED, via="sweeper")
                agent_server.dismiss(scope, conversation_ref)
        except (Conflict, NotFound, InvalidInput):
            # The conversation moved on (reset, deleted, answered another way):
            # the rows stay closed as expired, with nothing run.
            records.close_open(conversation_ref, status=EXPIRED, via="sweeper")
        return 1
