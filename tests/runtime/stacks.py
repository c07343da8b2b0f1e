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
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from tests.fakes.openai_server import FakeOpenAIServer

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


class Daphne:
    """A daphne process serving the project on the production stack."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.log = Path(f"/tmp/sagents-daphne-{SESSION}-{uuid.uuid4().hex[:6]}.log")
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    def start(self) -> Daphne:
        from tests.test_readme_socket import free_port, wait_for_port

        self.port = free_port()
        command = [sys.executable, "-m", "daphne", "-b", "127.0.0.1"]
        command += ["-p", str(self.port), "project.asgi:application"]
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                command, cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT
            )
        wait_for_port(self.port, self.process)
        return self

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws/sagents/"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.log.unlink(missing_ok=True)


class Worker:
    """A Celery worker process running this session's turns."""

    def __init__(
        self,
        llm: FakeOpenAIServer,
        *,
        concurrency: int = 20,
        queue: str = QUEUE,
        overrides: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.llm = llm
        self.concurrency = concurrency
        self.queue = queue
        self.overrides = overrides or {}
        self.env = env or {}
        self.log = Path(f"/tmp/sagents-worker-{SESSION}-{uuid.uuid4().hex[:6]}.log")
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60) -> Worker:
        env = process_env(self.llm, self.queue, self.overrides, self.env)
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "project",
            "worker",
            "--pool",
            "threads",
            "--concurrency",
            str(self.concurrency),
            "--queues",
            self.queue,
            "--hostname",
            f"{self.queue}-{uuid.uuid4().hex[:6]}@%h",
            "--loglevel",
            "info",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ]
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + timeout
        start = len(self.output())
        while " ready." not in self.output()[start:]:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"The Celery worker did not start:\n{self.output()}")
            time.sleep(0.1)
        return self

    def restart(self) -> Worker:
        """Stop this worker and start a new process in its place."""
        self.stop()
        return self.start()

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def terminate(self) -> None:
        """SIGTERM without waiting: a deploy stopping the worker."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """``kill -9``: the worker dies mid-whatever, as a crashed machine would."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.kill()


class PrivateRedis:
    """A Redis server of this test's own (restarting the shared one would break
    every other test session on the machine). With a ``data_dir`` it keeps its data
    across a restart (every write on disk before it is answered), as a Redis with
    persistence, or one cut off from the network for a while, would."""

    def __init__(self, data_dir: Path | None = None) -> None:
        from tests.test_readme_socket import free_port

        self.port = free_port()
        self.data_dir = data_dir
        self.process: Any = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> PrivateRedis:
        import redis

        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        command += ["--save", ""]
        if self.data_dir is None:
            command += ["--appendonly", "no"]
        else:
            command += ["--appendonly", "yes", "--appendfsync", "always"]
            command += ["--dir", str(self.data_dir)]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        for _ in range(200):
            try:
                with redis.Redis.from_url(self.url) as client:
                    client.ping()
                return self
            except redis.ConnectionError:
                assert self.process.poll() is None, "redis-server exited"
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        """``kill -9``: gone at once, as a crashed server would be."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


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
