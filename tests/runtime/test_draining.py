"""The draining flag in a Celery worker: ``sagents_django.tasks`` connects
Celery's ``worker_shutting_down`` (sent on SIGTERM) to it, and its
``worker_shutdown`` / ``worker_process_shutdown`` (the worker stops) to storing the
file writes still waiting on a debounce. Readiness and daphne's drain:
tests/web/test_health.py and tests/web/test_draining.py; a real worker stopped
mid-turn: test_file_flush.py."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from celery.signals import (
    worker_process_shutdown,
    worker_shutdown,
    worker_shutting_down,
)

import sagents_django.tasks  # noqa: F401  (a worker imports it: its receivers)
from sagents_django.core.filesystem import (
    FileSystemConfig,
    FileSystemState,
    MemoryPersistence,
)
from sagents_django.runtime import draining


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    draining.reset_for_tests()
    yield
    draining.reset_for_tests()


def test_a_worker_told_to_shut_down_starts_draining_and_tells_the_listeners() -> None:
    heard: list[str] = []
    remove = draining.on_drain(lambda: heard.append("drain"))
    try:
        assert not draining.is_draining()
        worker_shutting_down.send(
            sender="worker@host", sig="SIGTERM", how="Warm", exitcode=0
        )
        assert draining.is_draining()
        assert heard == ["drain"]
    finally:
        remove()


@pytest.mark.parametrize("signal", [worker_shutdown, worker_process_shutdown])
def test_a_stopping_worker_stores_the_file_writes_waiting_on_a_debounce(
    signal: Any,
) -> None:
    storage = MemoryPersistence()
    config = FileSystemConfig(default=True, persistence=storage, debounce_ms=600_000)
    fs = FileSystemState(("test", uuid.uuid4().hex), configs=[config])
    fs.write_file("/notes.md", "draft")
    fs.write_file("/notes.md", "final")  # an edit: it waits ten minutes
    assert fs.pending_paths == ["/notes.md"]

    signal.send(sender="worker@host")

    assert fs.pending_paths == []
    fresh = FileSystemState(
        fs.scope_key, configs=[FileSystemConfig(default=True, persistence=storage)]
    )
    assert fresh.read_file("/notes.md").content == "final"
