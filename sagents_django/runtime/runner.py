"""The runner: where a run handed to this process becomes a turn.

Both executors end here: a Celery worker's ``run_agent_turn`` task calls
``run_turn`` on the worker's runtime loop, and the inline executor hands the run to
``start_inline`` (by name, as Celery hands it to the task by name: the modules a turn
uses submit runs, so none of them imports what runs them). The runner sits at the
top of the runtime: it imports the turn and the sweeper, nothing imports it.
"""

from __future__ import annotations

import concurrent.futures
import logging

from sagents_django.conf import sagents_settings

from . import draining, executors, loop, runs, sweeper
from .database import db
from .opening import open_turn
from .tenure import worker_name
from .tracing import traced

logger = logging.getLogger(__name__)


async def run_turn(run_id: str) -> str | None:
    """Run the run ``run_id`` (queued, or taken over from a worker that died); its
    final status, or None when this delivery found it held by a living worker or
    finished (nothing is done then)."""
    if draining.is_draining():
        # A deploy stops this worker: another one takes the run.
        if sagents_settings.EXECUTOR == "celery":
            await executors.CeleryExecutor().asubmit(run_id)
        return None
    run = await db(runs.claim_run)(
        run_id,
        owner=worker_name(),
        lease_seconds=sagents_settings.LEASE_SECONDS,
        max_attempts=sagents_settings.MAX_ATTEMPTS,
    )
    if run is None:
        logger.info("Run %s is held by another worker or finished", run_id)
        return None
    turn = await db(open_turn)(run)
    return await traced(turn)


def start_inline(run_id: str) -> concurrent.futures.Future[str | None]:
    """Run ``run_id`` on this process's runtime loop (the inline executor)."""
    sweeper.ensure_running()  # this process picks up the runs a dead one left
    future = loop.submit(run_turn(run_id))
    executors.track(future)
    return future
