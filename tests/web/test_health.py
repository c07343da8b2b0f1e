"""The readiness and liveness views through Django's test client: each check's
answers, its bounds (a database that hangs costs one thread and the check's
timeout, however often it is asked), the cache, and what a stranger may learn
(nothing but fixed words). Real daphne processes: tests/web/test_draining.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import OperationalError
from django.test import AsyncClient, Client
from django.urls import reverse

from sagents_django.runtime import draining, readiness

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "host=db.internal password=hunter2"
REDIS = "redis://127.0.0.1:6379/0"


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    readiness.forget()
    yield
    readiness.forget()
    draining.reset_for_tests()


@pytest.fixture
def pings(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every database probe (the real one runs too)."""
    calls: list[float] = []
    real = readiness._ping_database

    def counted() -> None:
        calls.append(time.monotonic())
        real()

    monkeypatch.setattr(readiness, "_ping_database", counted)
    return calls


def ready(client: Client | None = None) -> Any:
    return (client or Client()).get(reverse("sagents_django:ready"))


def test_a_healthy_process_is_ready_to_anyone_and_nothing_is_cached_downstream(
    pings: list[float],
) -> None:
    response = ready()
    assert response.status_code == 200
    assert response.json() == {
        "ready": True,
        "checks": {"database": "ok", "channel_layer": "ok", "draining": "ok"},
    }
    assert "no-cache" in response["Cache-Control"]
    assert not response.cookies  # no session, no CSRF cookie
    assert len(pings) == 1


def test_liveness_answers_while_draining_and_readiness_does_not() -> None:
    draining.start()
    response = ready()
    assert response.status_code == 503
    assert response.json() == {
        "ready": False,
        "checks": {"database": "ok", "channel_layer": "ok", "draining": "draining"},
    }
    live = Client().get(reverse("sagents_django:live"))
    assert (live.status_code, live.json()) == (200, {"alive": True})


@pytest.mark.parametrize("name", ["ready", "live"])
@pytest.mark.parametrize("method", ["post", "put", "patch", "delete", "options"])
def test_the_probes_answer_only_get_and_head(name: str, method: str) -> None:
    client = Client(enforce_csrf_checks=True)
    url = reverse(f"sagents_django:{name}")
    assert getattr(client, method)(url).status_code == 405
    assert client.head(url).status_code == 200


def test_a_site_without_a_channel_layer_skips_that_check(settings: Any) -> None:
    settings.CHANNEL_LAYERS = {}
    response = ready()
    assert response.status_code == 200
    assert response.json()["checks"]["channel_layer"] == "skipped"


def test_a_database_error_names_its_class_and_nothing_of_its_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refused() -> None:
        raise OperationalError(f"could not connect: {SECRET}")

    monkeypatch.setattr(readiness, "_ping_database", refused)
    response = ready()
    assert response.status_code == 503
    assert response.json()["checks"] == {
        "database": "error: OperationalError",
        "channel_layer": "ok",
        "draining": "ok",
    }
    assert b"hunter2" not in response.content and b"internal" not in response.content


def test_a_hanging_database_costs_the_timeout_and_one_thread_however_often_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    release = threading.Event()
    started: list[str] = []

    def hangs() -> None:
        started.append(threading.current_thread().name)
        release.wait(30)

    monkeypatch.setattr(readiness, "_ping_database", hangs)
    monkeypatch.setattr(readiness, "CHECK_TIMEOUT", 0.3)
    monkeypatch.setattr(readiness, "CACHE_SECONDS", 0.0)
    try:
        for _ in range(3):
            # Had it waited for the hung ping (30 s, released below), the check
            # would say the database is fine.
            response = ready()
            assert response.status_code == 503
            assert response.json()["checks"]["database"] == "timeout"
        assert started == ["sagents-ready"]  # one probe, still hanging
        release.set()
        probe = readiness._database_probe
        assert probe is not None
        probe.result(5)
        assert ready().status_code == 200  # a new probe, now the last one is done
        assert len(started) == 2
    finally:
        release.set()


def test_answers_are_reused_for_a_second(
    pings: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    for _ in range(5):
        assert ready().status_code == 200
    assert len(pings) == 1
    monkeypatch.setattr(readiness, "CACHE_SECONDS", 0.0)
    assert ready().status_code == 200
    assert len(pings) == 2


def test_draining_is_read_on_every_call_not_cached() -> None:
    assert ready().status_code == 200
    draining.start()
    assert ready().status_code == 503


@pytest.mark.parametrize(
    "backend",
    [
        "channels_redis.pubsub.RedisPubSubChannelLayer",
        "channels_redis.core.RedisChannelLayer",
    ],
)
async def test_a_redis_channel_layer_is_probed_by_a_round_trip(
    settings: Any, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": backend,
            "CONFIG": {"hosts": [REDIS], "prefix": "sagents-ready-test"},
        }
    }
    monkeypatch.setattr(readiness, "CACHE_SECONDS", 0.0)
    client = AsyncClient()
    for _ in range(3):  # the probe channel is made once, then reused
        response = await client.get(reverse("sagents_django:ready"))
        assert response.status_code == 200, response.content
        assert response.json()["checks"]["channel_layer"] == "ok"
    assert len(readiness._layer_probes) == 1


def test_a_channel_layer_that_cannot_be_built_is_a_failed_check(settings: Any) -> None:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "no.such.Layer"}}
    response = ready()
    assert response.status_code == 503
    assert response.json()["checks"]["channel_layer"].startswith("error: ")
    assert b"no.such" not in response.content
