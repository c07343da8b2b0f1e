"""Celery tasks: thin, they call the runtime.

Run a worker with the threads pool (a turn waits on the network, not the CPU)::

    celery -A myproject worker --pool threads --concurrency 50

The task's thread waits while the turn runs on the worker's runtime loop, so
``--concurrency`` is the number of turns one worker runs at once. Celery never retries
a turn on its own (retries live in the LLM chain); a duplicate delivery finds the
run claimed or finished and does nothing.
"""

from __future__ import annotations

try:
    from celery import shared_task
except ImportError as exc:
    raise ImportError(
        "Running turns on Celery needs it: pip install 'sagents-django[celery]'"
    ) from exc


@shared_task(name="sagents_django.run_agent_turn", ignore_result=True)  # type: ignore[untyped-decorator]
def run_agent_turn(run_id: str) -> str | None:
    """Run the queued run ``run_id``; its final status (None: already taken)."""
    from sagents_django.runtime import loop
    from sagents_django.runtime.turn import run_turn

    return loop.submit(run_turn(str(run_id))).result()
