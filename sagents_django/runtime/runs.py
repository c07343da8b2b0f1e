"""The executor's side of a run: claiming it, and the heartbeat of its lease.

Not scoped: an executor acts for the run's own scope, stored with the run; these are
never reachable from a request.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import F, Q
from django.utils import timezone

from sagents_django.models import ACTIVE_RUN_STATUSES, AgentRun
from sagents_django.services.validation import parse_uuid


def claim_run(run_id: Any, *, owner: str) -> AgentRun | None:
    """Take a queued run for ``owner`` (one statement: of two workers given the same
    run, one gets it); None when it was already claimed, finished or deleted, which
    is what a duplicate or late delivery of its task finds. Not scoped: the executor
    acts for the run's own scope, stored with it."""
    pk = parse_uuid(run_id, what="run_id")
    now = timezone.now()
    claimed = AgentRun.objects.filter(pk=pk, status="queued").update(
        status="running",
        started_at=now,
        heartbeat_at=now,
        lease_owner=owner[:255],
        attempts=F("attempts") + 1,
    )
    return AgentRun.objects.filter(pk=pk).first() if claimed else None


def beat(run_id: Any) -> bool:
    """Renew a running run's heartbeat; whether someone asked it to stop."""
    pk = parse_uuid(run_id, what="run_id")
    AgentRun.objects.filter(pk=pk, status="running").update(heartbeat_at=timezone.now())
    return bool(
        AgentRun.objects.filter(pk=pk)
        .values_list("cancel_requested", flat=True)
        .first()
    )


def end_plainly(run_id: Any, status: str, error: str) -> bool:
    """End an active run with ``status``, its row alone (the last resort of a turn
    whose full ending failed); whether it was still active."""
    pk = parse_uuid(run_id, what="run_id")
    return bool(
        AgentRun.objects.filter(pk=pk, status__in=ACTIVE_RUN_STATUSES).update(
            status=status, error=error, finished_at=timezone.now()
        )
    )


def end_unattended(run: AgentRun, *, stale_after: float) -> bool:
    """End ``run`` as cancelled when no turn holds it: still queued (a worker that
    claims it later finds it ended), or running without a heartbeat for
    ``stale_after`` seconds (its process died). Whether it ended here; one
    statement, so a worker claiming or beating meanwhile wins or loses cleanly."""
    now = timezone.now()
    unattended = Q(status="queued") | Q(
        status="running", heartbeat_at__lt=now - timedelta(seconds=stale_after)
    )
    return bool(
        AgentRun.objects.filter(unattended, pk=run.pk).update(
            status="cancelled", finished_at=now, error=""
        )
    )
