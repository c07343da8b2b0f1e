"""The sweeper: finds runs nobody is running and gets them going again.

Every worker (and every embedded web process) sweeps every ``SWEEP_SECONDS``:

- a running run whose lease went stale (no heartbeat for ``LEASE_SECONDS``: its
  worker died, its machine vanished) is queued again and handed to the executor,
  which continues it from its last step checkpoint; after ``MAX_ATTEMPTS`` it is
  ended as an error that says why, in the transcript, the admin and the events;
- a queued run not claimed within ``LEASE_SECONDS`` of being handed over (its task
  was lost: the broker was down, or the process that ran it inline died) is handed
  over again;
- each of ``chores`` runs (the apps above the runtime add theirs: the triggers'
  queue of starts waiting for their rate).

Several sweepers at once are safe: every change is one conditional statement that
one of them wins, and a run handed over twice is claimed once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db.models import Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from sagents_django.conf import sagents_settings
from sagents_django.models import AgentRun

from . import draining, loop, runs
from .database import db

logger = logging.getLogger(__name__)

BATCH = 100
"""Runs looked at per kind and sweep (the next sweep takes the rest)."""

EXHAUSTED = (
    "The worker running this turn stopped {attempts} times before it could finish "
    "(last: {owner}), so it was not tried again. Its completed steps are kept; "
    "send a message to go on."
)


chores: list[Callable[[], Any]] = []
"""Synchronous jobs run on a database thread after each sweep, each on its own (one
that raises is logged; the others still run)."""


@dataclass
class Sweep:
    requeued: int = 0
    ended: int = 0
    resubmitted: int = 0


async def sweep_once() -> Sweep:
    """One pass; what it did."""
    found = Sweep()
    lease = sagents_settings.LEASE_SECONDS
    attempts = sagents_settings.MAX_ATTEMPTS
    for run_id in await db(_stale_runs)(lease):
        if await db(runs.requeue_stale)(
            run_id, lease_seconds=lease, max_attempts=attempts
        ):
            found.requeued += 1
            await _submit(run_id)
        elif await _end_exhausted(run_id, lease, attempts):
            found.ended += 1
    lost = await db(_lost_queued)(lease)
    if lost:
        await db(runs.mark_submitted)(lost)
        for run_id in lost:
            await _submit(run_id)
        found.resubmitted = len(lost)
    if found.requeued or found.ended or found.resubmitted:
        logger.warning("Sweeper: %s", found)
    for chore in list(chores):
        try:
            await db(chore)()
        except Exception:
            logger.exception("The sweeper's chore %r failed", chore)
    return found


async def sweep_forever() -> None:
    while not draining.is_draining():
        await asyncio.sleep(sagents_settings.SWEEP_SECONDS)
        try:
            await sweep_once()
        except Exception:
            logger.exception("The sweep failed; the next one tries again")


_running: dict[int, Any] = {}
_lock = threading.Lock()
autostart = True
"""Whether ``ensure_running`` starts one (a test session sweeps when it says so)."""


def ensure_running() -> None:
    """Start this process's sweeper on its runtime loop (once per process)."""
    with _lock:
        if not autostart or os.getpid() in _running:
            return
        _running[os.getpid()] = loop.submit(sweep_forever())


def stop() -> None:
    """Stop this process's sweeper (a test session ending, a process exiting)."""
    with _lock:
        future = _running.pop(os.getpid(), None)
    if future is not None:
        future.cancel()


# Helpers ----------------------------------------------------------------------------
def _stale_runs(lease_seconds: float) -> list[Any]:
    return list(
        AgentRun.objects.filter(runs.stale_lease(lease_seconds))
        .order_by("heartbeat_at")
        .values_list("pk", flat=True)[:BATCH]
    )


def _lost_queued(lease_seconds: float) -> list[Any]:
    cutoff = timezone.now() - timedelta(seconds=lease_seconds)
    return list(
        AgentRun.objects.filter(status="queued")
        .annotate(handed=Coalesce("submitted_at", "created_at"))
        .filter(Q(handed__lt=cutoff))
        .order_by("handed")
        .values_list("pk", flat=True)[:BATCH]
    )


async def _submit(run_id: Any) -> None:
    from .executors import get_executor

    await get_executor().asubmit(str(run_id))


async def _end_exhausted(run_id: Any, lease: float, attempts: int) -> bool:
    from .opening import open_turn
    from .tenure import worker_name

    before = await AgentRun.objects.filter(pk=run_id).values("lease_owner").afirst()
    run = await db(runs.claim_exhausted)(
        run_id, owner=worker_name(), lease_seconds=lease, max_attempts=attempts
    )
    if run is None:
        return False
    owner = (before["lease_owner"] if before else "") or "unknown"
    turn = await db(open_turn)(run)
    await turn.end_abandoned(EXHAUSTED.format(attempts=run.attempts, owner=owner))
    return True
