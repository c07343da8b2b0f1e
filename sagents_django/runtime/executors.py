"""Where a run's turn executes, chosen by ``SAGENTS["EXECUTOR"]``.

- ``inline`` (the embedded default): on this process's runtime loop, started at once;
  the web process runs the turn beside its requests.
- ``celery``: the ``run_agent_turn`` task, enqueued when the transaction that created
  the run commits; a worker's thread waits while the turn runs on that worker's
  runtime loop.

Both run the same ``runner.run_turn``; neither imports it (the runner is above every
module that submits runs): Celery's task is sent by its name, and the inline
executor names the runner. A run is handed over only after the transaction that
created it commits, so the executor always finds the run and its message.
"""

from __future__ import annotations

import concurrent.futures
import importlib
import logging
import threading
import time
from typing import Any, Protocol

from asgiref.sync import sync_to_async
from django.db import transaction

from sagents_django.conf import sagents_settings

logger = logging.getLogger(__name__)


TASK_NAME = "sagents_django.run_agent_turn"


class Executor(Protocol):
    def submit(self, run_id: str) -> None:
        """Hand ``run_id`` over once the current transaction commits."""

    async def asubmit(self, run_id: str) -> None: ...


class InlineExecutor:
    """Turns run on this process's runtime loop."""

    def submit(self, run_id: str) -> None:
        transaction.on_commit(lambda: _runner().start_inline(run_id))

    async def asubmit(self, run_id: str) -> None:
        await sync_to_async(self.submit)(run_id)


_running: set[concurrent.futures.Future[Any]] = set()
_lock = threading.Lock()


def _runner() -> Any:
    return importlib.import_module("sagents_django.runtime.runner")


def track(future: concurrent.futures.Future[Any]) -> None:
    """Count an inline turn until it ends (``wait_inline``)."""
    with _lock:
        _running.add(future)
    future.add_done_callback(_done)


def _done(future: concurrent.futures.Future[Any]) -> None:
    with _lock:
        _running.discard(future)
    if not future.cancelled() and future.exception() is not None:
        logger.error("A turn failed", exc_info=future.exception())


def wait_inline(timeout: float | None = None) -> bool:
    """Wait for the inline turns of this process (and the turns they start) to
    end; False if some still run after ``timeout`` seconds. For a graceful
    shutdown, and for tests that must not end mid-turn."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        with _lock:
            pending = list(_running)
        if not pending:
            return True
        left = None if deadline is None else max(deadline - time.monotonic(), 0)
        _, waiting = concurrent.futures.wait(pending, timeout=left)
        if waiting and deadline is not None and time.monotonic() >= deadline:
            return False


class CeleryExecutor:
    """Turns run by Celery workers (the ``sagents_django.run_agent_turn`` task of
    ``sagents_django.tasks``, sent by its name to the site's Celery app)."""

    def submit(self, run_id: str) -> None:
        try:
            from celery import current_app
        except ImportError as exc:
            raise ImportError(
                "Running turns on Celery needs it: pip install 'sagents-django[celery]'"
            ) from exc

        transaction.on_commit(lambda: current_app.send_task(TASK_NAME, args=(run_id,)))

    async def asubmit(self, run_id: str) -> None:
        await sync_to_async(self.submit)(run_id)


def turns_run_here() -> bool:
    """Whether this process runs turns (inline), not a Celery worker."""
    return sagents_settings.EXECUTOR != "celery"


def get_executor() -> Executor:
    if sagents_settings.EXECUTOR == "celery":
        return CeleryExecutor()
    return InlineExecutor()
