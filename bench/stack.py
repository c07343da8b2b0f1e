"""The production stack, as the end-to-end benchmarks start it.

Why a module: ``stream_latency.py`` and ``load.py`` run the same processes the same
way (a PostgreSQL database of their own, the Redis channel layer under a key prefix
of their own, a Celery worker on a queue of its own, daphne, signed-in WebSocket
clients), and two copies of that would drift apart. Everything here is loopback
(127.0.0.1), like the test suite.

The worker and daphne load ``tests.runtime.worker_settings``: the project's settings
with ``SAGENTS_TEST_OVERRIDES`` (JSON) merged into ``SAGENTS``, the layer prefix
``SAGENTS_TEST_PREFIX`` and the Celery queue ``SAGENTS_TEST_QUEUE``, so that a run
never takes another session's turns or events on a shared Redis.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REDIS_URL = "redis://127.0.0.1:6379/0"
LAYERS = {
    "pubsub": "channels_redis.pubsub.RedisPubSubChannelLayer",
    "core": "channels_redis.core.RedisChannelLayer",
}


def database_url(name: str) -> str:
    return f"postgres://postgres@127.0.0.1:5432/{name}"


def prepare_database(name: str) -> None:
    """An empty database ``name`` (dropped first if it exists)."""
    import psycopg

    with psycopg.connect("host=127.0.0.1 user=postgres dbname=postgres") as c:
        c.autocommit = True
        exists = c.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [name]
        ).fetchone()
        if exists:
            c.execute(f"DROP DATABASE {name} WITH (FORCE)")
        c.execute(f"CREATE DATABASE {name}")


def stack_env(
    *,
    database: str,
    prefix: str,
    queue: str,
    overrides: dict[str, Any],
    layer: str = "pubsub",
) -> dict[str, str]:
    """The environment of the worker, daphne and this process's Django."""
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "tests.runtime.worker_settings",
        "DATABASE_URL": database_url(database),
        "REDIS_URL": REDIS_URL,
        "CELERY_BROKER_URL": REDIS_URL,
        "CHANNEL_LAYER_BACKEND": LAYERS[layer],
        "SAGENTS_TEST_OVERRIDES": json.dumps(overrides),
        "SAGENTS_TEST_PREFIX": prefix,
        "SAGENTS_TEST_QUEUE": queue,
        "DEBUG": "false",
    }


def setup_django(env: dict[str, str]) -> None:
    """Migrate the database, then set Django up in this process on the same
    settings as the stack (for users, conversations and the final checks)."""
    import django

    for key in (
        "DJANGO_SETTINGS_MODULE",
        "DATABASE_URL",
        "REDIS_URL",
        "CHANNEL_LAYER_BACKEND",
        "SAGENTS_TEST_OVERRIDES",
        "SAGENTS_TEST_PREFIX",
        "SAGENTS_TEST_QUEUE",
    ):
        os.environ[key] = env[key]
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
    )
    django.setup()


def start(command: list[str], env: dict[str, str], ready: str, log: Path) -> Any:
    """A process whose output goes to ``log``, once ``ready`` appears there."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + 90
    while ready not in log.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"{command[2]} did not start:\n{log.read_text()}")
        time.sleep(0.1)
    return process


def start_worker(
    env: dict[str, str], *, queue: str, concurrency: int, log: Path
) -> Any:
    """A Celery worker (threads pool) taking turns from ``queue`` only."""
    return start(
        [sys.executable, "-m", "celery", "-A", "project", "worker", "--pool",
         "threads", "--concurrency", str(concurrency), "--queues", queue,
         "--hostname", f"{queue}@%h", "--loglevel", "info", "--without-gossip",
         "--without-mingle", "--without-heartbeat"],
        env, " ready.", log,
    )  # fmt: skip


def start_daphne(env: dict[str, str], *, port: int, log: Path) -> Any:
    return start(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
         "project.asgi:application"],
        env, "Listening on", log,
    )  # fmt: skip


def stop(*processes: Any) -> None:
    """Terminate (then kill, after 30 s) the processes this script started."""
    for process in processes:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    """Resident memory (VmRSS) of a process, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def percentile(values: list[float], p: float) -> float:
    """The ``p``-th percentile of sorted ``values`` (nearest rank); NaN if empty."""
    if not values:
        return float("nan")
    k = min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))
    return values[k]


def make_user(name: str) -> tuple[Any, str]:
    """A user and the cookie value of a signed-in session of theirs."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    user = get_user_model().objects.create_user(name)
    client = Client()
    client.force_login(user)
    return user, client.cookies["sessionid"].value


def make_conversations(user: Any, n: int) -> list[str]:
    """``n`` new conversations of ``user``, as id strings."""
    from sagents_django import services
    from sagents_django.scope import Scope

    scope = Scope.for_user(user)
    return [str(services.create_conversation(scope).pk) for _ in range(n)]


async def connect(port: int, cookie: str, **options: Any) -> Any:
    """A signed-in ``websockets`` client of daphne's ``ws/sagents/``."""
    import websockets

    return await websockets.connect(
        f"ws://127.0.0.1:{port}/ws/sagents/",
        additional_headers={
            "Cookie": f"sessionid={cookie}",
            "Origin": f"http://127.0.0.1:{port}",
        },
        max_queue=None,
        **options,
    )
