"""The two stacks the runtime tests run on, and the Celery workers of the second.

- ``embedded``: the run's database, the in-memory channel layer, the inline executor
  (turns on this process's runtime loop).
- ``production``: PostgreSQL, the Redis channel layer, and turns run by a real Celery
  worker process (threads pool) that the test session starts. It is part of the
  PostgreSQL pass (a worker is another process: it needs a database server both
  can reach), where every runtime test runs on both stacks; an unreachable Redis
  fails the test, never skips it.

Each test session has its own Celery queue and channel-layer prefix, so sessions
running at once on one machine never take each other's turns or events. The fake
provider of the production stack lives for the whole session (the worker is told
its address when it starts) and is reset before each test.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.processes import CeleryWorker

REDIS_URL = os.environ.get("SAGENTS_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
SESSION = uuid.uuid4().hex[:8]
QUEUE = f"sagents-test-{SESSION}"
PREFIX = f"sagents-test-{SESSION}"
ROOT = Path(__file__).resolve().parents[2]

FACTORY = "tests.runtime.agents.build_agent"


def names() -> list[str]:
    """The stacks of this run: production too when the database is PostgreSQL."""
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith(("postgres", "pgsql")):
        return ["embedded", "production"]
    return ["embedded"]


def redis_layer() -> dict[str, Any]:
    return {
        "BACKEND": os.environ.get(
            "CHANNEL_LAYER_BACKEND", "channels_redis.pubsub.RedisPubSubChannelLayer"
        ),
        "CONFIG": {"hosts": [REDIS_URL], "prefix": PREFIX},
    }


def sagents_overrides(llm: FakeOpenAIServer) -> dict[str, Any]:
    return {
        "FACTORY": FACTORY,
        "EXECUTOR": "celery",
        "MODEL": llm.model,
        "MODEL_PARAMS": dict(llm.model_params),
    }


def use_redis_broker() -> None:
    """This process sends turns to the session's queue on Redis (its Celery app
    was configured from settings with the in-memory broker)."""
    from project.celery import app

    app.conf.broker_url = REDIS_URL
    app.conf.task_default_queue = QUEUE


@contextlib.contextmanager
def own_worker(
    llm: FakeOpenAIServer,
    *,
    queue: str,
    overrides: dict[str, Any],
    start: bool = True,
    **options: Any,
) -> Iterator[Worker]:
    """A worker process of a test module's own (its queue, its settings), stopped
    and its log removed at the end. It leaves this process's Celery settings
    alone: ``turns_to`` sends turns to it."""
    worker = Worker(llm, queue=queue, overrides=overrides, **options)
    if start:
        worker.start()
    try:
        yield worker
    finally:
        worker.stop()
        worker.log.unlink(missing_ok=True)


@contextlib.contextmanager
def turns_to(queue: str) -> Iterator[None]:
    """This process sends turns to ``queue`` (a module's own worker), then to the
    session's again."""
    from project.celery import app

    use_redis_broker()
    app.conf.task_default_queue = queue
    try:
        yield
    finally:
        app.conf.task_default_queue = QUEUE


def worker_database_url() -> str:
    """The URL of the test database pytest-django created (the worker's)."""
    s = connection.settings_dict
    auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "")
    return (
        f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"
    )


def process_env(
    llm: FakeOpenAIServer,
    queue: str = QUEUE,
    overrides: dict[str, Any] | None = None,
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a process of the production stack (a worker, daphne)
    serving this session's test database, layer prefix and queue."""
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "tests.runtime.worker_settings",
        "DATABASE_URL": worker_database_url(),
        "REDIS_URL": REDIS_URL,
        "CELERY_BROKER_URL": REDIS_URL,
        "SAGENTS_TEST_OVERRIDES": json.dumps(
            {**sagents_overrides(llm), **(overrides or {})}
        ),
        "SAGENTS_TEST_PREFIX": PREFIX,
        "SAGENTS_TEST_QUEUE": queue,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "HF_HUB_OFFLINE": "1",
        "SAGENTS_DRAIN_SECONDS": "0",  # a test's daphne stops without a drain
        **(extra or {}),
    }


class Worker(CeleryWorker):
    """A Celery worker process running this session's turns (or a module's own
    queue), told the session's fake provider and test database when it starts."""

    def __init__(
        self,
        llm: FakeOpenAIServer,
        *,
        concurrency: int = 20,
        queue: str = QUEUE,
        overrides: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        super().__init__(env or {}, queue=queue, concurrency=concurrency)
        self.llm = llm
        self.overrides = overrides or {}
        self.extra = env or {}

    def environment(self) -> dict[str, str]:
        # Computed at start: the test database exists only once pytest-django made it.
        return process_env(self.llm, self.queue, self.overrides, self.extra)


async def layer_works_again(timeout: float = 30) -> float:
    """Seconds until this process's channel layer delivers a group message again
    (it reconnects to the restarted server on its own)."""
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    loop = asyncio.get_running_loop()
    started = loop.time()
    while loop.time() - started < timeout:
        try:
            async with asyncio.timeout(1):
                channel = await layer.new_channel()
                await layer.group_add("probe", channel)
                await layer.group_send("probe", {"type": "probe"})
                await layer.receive(channel)
                return loop.time() - started
        except Exception:
            await asyncio.sleep(0.2)
    raise AssertionError("the channel layer did not come back")


@pytest.fixture(scope="session")
def production_llm() -> Iterator[FakeOpenAIServer]:
    server = FakeOpenAIServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def production_worker(
    django_db_setup: Any, django_db_blocker: Any, production_llm: FakeOpenAIServer
) -> Iterator[Worker]:
    """One worker for the session (stopped before the test database is dropped)."""
    use_redis_broker()
    worker = Worker(production_llm).start()
    try:
        yield worker
    finally:
        worker.stop()
        worker.log.unlink(missing_ok=True)
