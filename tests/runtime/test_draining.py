"""The draining flag in a Celery worker: ``sagents_django.tasks`` connects
Celery's ``worker_shutting_down`` (sent on SIGTERM) to it. Readiness and daphne's
drain: tests/web/test_health.py and tests/web/test_draining.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from celery.signals import worker_shutting_down

import sagents_django.tasks  # noqa: F401  (a worker imports it: its receivers)
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
