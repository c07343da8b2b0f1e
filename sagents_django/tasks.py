"""Celery tasks: thin, they call the runtime.

Run a worker with the threads pool (a turn waits on the network, not the CPU)::

    celery -A myproject worker --pool threads --concurrency 50

The task's thread waits while the turn runs on the worker's runtime loop, so
``--concurrency`` is the number of turns one worker runs at once. Celery never retries
a turn on its own (retries live in the LLM chain); a duplicate delivery finds the
run claimed or finished and does nothing.

Liveness is the run's lease, not the broker: the task is acknowledged only once the
turn ends (``acks_late``), so a message whose worker died is delivered again (after
the broker's visibility timeout) and takes the run over if its lease went stale;
meanwhile every worker's sweeper (started when the worker is ready) takes stale runs
over within ``LEASE_SECONDS`` + ``SWEEP_SECONDS``. On SIGTERM a worker drains: it
claims nothing more and hands its running turns to other workers at their next step;
once they are handed over, file writes still waiting on a debounce are stored before
the process exits (``worker_shutdown``, and ``worker_process_shutdown`` in a prefork
child).
"""

from __future__ import annotations

from typing import Any

try:
    from celery import shared_task
    from celery.signals import (
        worker_process_shutdown,
        worker_ready,
        worker_shutdown,
        worker_shutting_down,
    )
except ImportError as exc:
    raise ImportError(
        "Running turns on Celery needs it: pip install 'sagents-django[celery]'"
    ) from exc


@shared_task(  # type: ignore[untyped-decorator]
    name="sagents_django.run_agent_turn",
    ignore_result=True,
    acks_late=True,
    reject_on_worker_lost=True,
)
def run_agent_turn(run_id: str) -> str | None:
    """Run the queued run ``run_id``; its final status (None: already taken)."""
    from sagents_django.runtime import heap, loop
    from sagents_django.runtime.runner import run_turn

    try:
        return loop.submit(run_turn(str(run_id))).result()
    finally:
        heap.first_turn_done()


@worker_ready.connect  # type: ignore[untyped-decorator]
def start_sweeper(**_kwargs: Any) -> None:
    from sagents_django.core.transports import warm_litellm
    from sagents_django.runtime import heap, sweeper

    sweeper.ensure_running()
    # The first turn does not wait for the import; once it is done, the heap of
    # the start-up is frozen (runtime/heap.py).
    heap.settle_after(warm_litellm(), "start-up")


@worker_shutting_down.connect  # type: ignore[untyped-decorator]
def start_draining(**_kwargs: Any) -> None:
    """SIGTERM (warm shutdown): hand the running turns over, claim nothing more."""
    from sagents_django.runtime import draining

    draining.start()


@worker_shutdown.connect  # type: ignore[untyped-decorator]
@worker_process_shutdown.connect  # type: ignore[untyped-decorator]
def store_pending_files(**_kwargs: Any) -> None:
    """The worker stops (its turns ended or handed over): debounced file writes
    waiting in this process are stored now, not lost with its timer threads."""
    from sagents_django.core.filesystem.debounce import flush_pending_writes

    flush_pending_writes()


@shared_task(name="sagents_django.tasks.run_schedule", ignore_result=True)  # type: ignore[untyped-decorator]
def run_schedule(name: str) -> int | None:
    """Celery beat's entry for a trigger schedule (``triggers.beat_schedule``): this
    slot's start, recorded once; the event's id (None: nothing to start)."""
    from sagents_django.triggers import run_schedule as record_slot

    return record_slot(name)


@shared_task(name="sagents_django.tasks.apply_retention", ignore_result=True)  # type: ignore[untyped-decorator]
def apply_retention() -> dict[str, Any]:
    """Celery beat's entry for retention (``lifecycle.retention``): one pass,
    resumable, in bounded batches; what it removed."""
    from sagents_django.lifecycle.retention import apply_retention as apply

    return apply().to_dict()


@shared_task(name="sagents_django.tasks.build_export", ignore_result=True)  # type: ignore[untyped-decorator]
def build_export(export_id: str) -> str:
    """Build a large account's export archive (``lifecycle.export``)."""
    from sagents_django.lifecycle.export import build_export as build

    return build(export_id)
