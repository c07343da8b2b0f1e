"""The executor's side of a run: claiming it, and the heartbeat of its lease.

Not scoped: an executor acts for the run's own scope, stored with the run; these are
never reachable from a request.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import connections, router
from django.db.models import F, Q
from django.utils import timezone

from sagents_django.models import ACTIVE_RUN_STATUSES, AgentRun
from sagents_django.services import sql
from sagents_django.services.validation import parse_uuid


@dataclass(frozen=True, slots=True)
class Lease:
    """A worker's hold on a running run: its owner name and the attempt it claimed.
    Every write a turn makes as the run's holder checks both (a fencing token), so
    a worker that lost its run (it paused past the lease and was taken over) can
    no longer change it."""

    run_id: uuid.UUID
    owner: str
    attempt: int


class LeaseLost(Exception):
    """This worker no longer holds the run: another worker took it over."""


def stale_lease(lease_seconds: float) -> Q:
    """Running runs whose heartbeat is older than the lease (their worker died)."""
    cutoff = timezone.now() - timedelta(seconds=lease_seconds)
    return Q(status="running") & (
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True)
    )


def claim_run(
    run_id: Any, *, owner: str, lease_seconds: float, max_attempts: int
) -> AgentRun | None:
    """Take ``run_id`` for ``owner``: a queued run, or a running one whose lease went
    stale and that has attempts left (a takeover). One statement, so of two workers
    given the same run one gets it; None when it is held, finished or deleted,
    which is what a duplicate or late delivery of its task finds. Not scoped: the
    executor acts for the run's own scope, stored with it."""
    pk = parse_uuid(run_id, what="run_id")
    now = timezone.now()
    using = router.db_for_write(AgentRun)
    if connections[using].vendor == "postgresql":
        return sql.claim_returning(
            pk,
            owner=owner[:255],
            now=now,
            stale_before=now - timedelta(seconds=lease_seconds),
            max_attempts=max_attempts,
            using=using,
        )
    takeover = stale_lease(lease_seconds) & Q(attempts__lt=max_attempts)
    claimed = (
        AgentRun.objects.filter(pk=pk)
        .filter(Q(status="queued") | takeover)
        .update(
            status="running",
            started_at=now,
            heartbeat_at=now,
            lease_owner=owner[:255],
            attempts=F("attempts") + 1,
        )
    )
    if not claimed:
        return None
    run = AgentRun.objects.filter(pk=pk).first()
    if run is None or run.lease_owner != owner[:255]:
        return None
    return run


def lease_of(run: AgentRun) -> Lease:
    return Lease(run.pk, run.lease_owner, run.attempts)


def holding(lease: Lease) -> dict[str, Any]:
    """What the run's row says while ``lease`` holds it (a fencing token)."""
    return {
        "id": lease.run_id,
        "status": "running",
        "lease_owner": lease.owner,
        "attempts": lease.attempt,
    }


def held(lease: Lease) -> Any:
    """The run's row while ``lease`` holds it (a queryset to update)."""
    return AgentRun.objects.filter(**holding(lease))


def beat(lease: Lease) -> bool:
    """Renew the lease's heartbeat; whether someone asked the run to stop. Raises
    LeaseLost when another worker holds the run now (or it waits for one); a run
    that just ended (its turn is finishing) is not lost."""
    renewed = held(lease).update(heartbeat_at=timezone.now())
    row = (
        AgentRun.objects.filter(pk=lease.run_id)
        .values("status", "cancel_requested")
        .first()
    )
    if not renewed and row is not None and row["status"] in ACTIVE_RUN_STATUSES:
        raise LeaseLost(f"Run {lease.run_id} is no longer held by {lease.owner}")
    return bool(row and row["cancel_requested"])


def release(lease: Lease) -> bool:
    """Give a running run back to the queue (a draining worker hands it over); the
    attempt does not count, the worker did not fail. Whether it was still held."""
    return bool(
        held(lease).update(
            status="queued",
            lease_owner="",
            heartbeat_at=None,
            attempts=F("attempts") - 1,
            submitted_at=timezone.now(),
        )
    )


def requeue_stale(run_id: Any, *, lease_seconds: float, max_attempts: int) -> bool:
    """Queue a run whose worker died again, if it has attempts left (the sweeper
    then hands it to the executor); whether it was requeued here."""
    return bool(
        AgentRun.objects.filter(
            stale_lease(lease_seconds), pk=run_id, attempts__lt=max_attempts
        ).update(status="queued", lease_owner="", submitted_at=timezone.now())
    )


def claim_exhausted(
    run_id: Any, *, owner: str, lease_seconds: float, max_attempts: int
) -> AgentRun | None:
    """Hold a run whose worker died on its last attempt, to end it as an error
    (one statement: of two sweepers, one ends it)."""
    now = timezone.now()
    claimed = AgentRun.objects.filter(
        stale_lease(lease_seconds), pk=run_id, attempts__gte=max_attempts
    ).update(heartbeat_at=now, lease_owner=owner[:255])
    return AgentRun.objects.filter(pk=run_id).first() if claimed else None


def mark_submitted(run_ids: list[Any]) -> None:
    AgentRun.objects.filter(pk__in=run_ids, status="queued").update(
        submitted_at=timezone.now()
    )


def end_plainly(run_id: Any, status: str, error: str) -> bool:
    """End an active run with ``status``, its row alone (the last resort of a turn
    whose full ending failed); whether it was still active."""
    pk = parse_uuid(run_id, what="run_id")
    return bool(
        AgentRun.objects.active()
        .filter(pk=pk)
        .update(status=status, error=error, finished_at=timezone.now())
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
