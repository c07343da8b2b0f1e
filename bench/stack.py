"""The production stack, as the end-to-end benchmarks start it.

Why a module: ``stream_latency.py``, ``asgi_servers.py`` and ``load.py`` run the
same processes the same way (a PostgreSQL database of their own, the Redis channel
layer under a key prefix of their own, Celery worker processes on a queue of their
own, an ASGI server, signed-in WebSocket clients), and copies of that would drift
apart. The stamping provider and the client that reads its stamps are here for the
same reason. Everything here is loopback (127.0.0.1), like the test suite.

The ASGI server is daphne (the documented one) or uvicorn (``SERVERS``): both run
``project.asgi:application`` unchanged, so a bench can compare them in one run.

The worker and daphne load ``tests.runtime.worker_settings``: the project's settings
with ``SAGENTS_TEST_OVERRIDES`` (JSON) merged into ``SAGENTS``, the layer prefix
``SAGENTS_TEST_PREFIX`` and the Celery queue ``SAGENTS_TEST_QUEUE``, so that a run
never takes another session's turns or events on a shared Redis.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REDIS_URL = "redis://127.0.0.1:6379/0"
TOKEN = re.compile(r"\[(\d+):(\d+)\] ")
"""The text of the provider's chunk ``i`` of request ``r``: ``[r:i] ``."""
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


def free_port() -> int:
    """A TCP port free on 127.0.0.1 (for a server this script starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
    env: dict[str, str], *, queue: str, concurrency: int, log: Path, index: int = 0
) -> Any:
    """A Celery worker process (threads pool) taking turns from ``queue`` only;
    ``index`` tells apart the processes of one queue (their Celery hostnames)."""
    return start(
        [sys.executable, "-m", "celery", "-A", "project", "worker", "--pool",
         "threads", "--concurrency", str(concurrency), "--queues", queue,
         "--hostname", f"{queue}.{index}@%h", "--loglevel", "info", "--without-gossip",
         "--without-mingle", "--without-heartbeat"],
        env, " ready.", log,
    )  # fmt: skip


def start_workers(
    env: dict[str, str], *, queue: str, concurrency: int, processes: int, logs: Path
) -> list[Any]:
    """``processes`` worker processes on one queue, as a site runs one per core;
    their logs are ``logs/worker<i>.log``."""
    return [
        start_worker(env, queue=queue, concurrency=concurrency,
                     log=logs / f"worker{i}.log", index=i)
        for i in range(processes)
    ]  # fmt: skip


APP = "project.asgi:application"


def uvicorn(*options: str) -> tuple[list[str], str]:
    """uvicorn serving the project with ``options``, and its ready line."""
    return (
        ["-m", "uvicorn", "--host", "127.0.0.1", "--port", "{port}", *options, APP],
        "Uvicorn running on",
    )


SERVERS: dict[str, tuple[list[str], str]] = {
    "daphne": (
        ["-m", "daphne", "-b", "127.0.0.1", "-p", "{port}", APP],
        "Listening on",
    ),
    # uvicorn as ``pip install uvicorn[standard]`` runs it (what its "auto" picks
    # with uvloop, httptools and websockets installed), spelled out so that the
    # figures do not depend on what else happens to be installed. It offers
    # permessage-deflate, which browsers and the ``websockets`` client accept;
    # daphne does not.
    "uvicorn": uvicorn("--loop", "uvloop", "--http", "httptools",
                       "--ws", "websockets-sansio"),
    # The same without compression: frames on the wire as daphne sends them.
    "uvicorn-nodeflate": uvicorn("--loop", "uvloop", "--http", "httptools",
                                 "--ws", "websockets-sansio",
                                 "--ws-per-message-deflate", "false"),
    # The same on plain asyncio and h11 (``pip install uvicorn``).
    "uvicorn-asyncio": uvicorn("--loop", "asyncio", "--http", "h11",
                               "--ws", "websockets-sansio"),
}  # fmt: skip
"""ASGI servers by name: the command's arguments and the line that says it is up."""


def start_server(
    env: dict[str, str], *, port: int, log: Path, server: str = "daphne"
) -> Any:
    """An ASGI server (``SERVERS``) serving the project on ``port``."""
    arguments, ready = SERVERS[server]
    command = [a.format(port=port) for a in arguments]
    return start([sys.executable, *command], env, ready, log)


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
    """A signed-in ``websockets`` client of the server's ``ws/sagents/``."""
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


# The stamping provider and its clients -------------------------------------------
class Provider:
    """An OpenAI-compatible streaming endpoint that stamps every chunk it writes."""

    def __init__(self, *, chunks: int, interval: float, first_byte: float) -> None:
        self.chunks = chunks
        self.interval = interval
        self.first_byte = first_byte
        self.sent: dict[tuple[int, int], float] = {}
        self.received: dict[int, float] = {}
        self.first: dict[int, float] = {}
        self.count = 0
        self.port = 0
        self._ready = threading.Event()

    @property
    def params(self) -> dict[str, Any]:
        return {"api_base": f"http://127.0.0.1:{self.port}/v1", "api_key": "bench"}

    def start(self) -> Provider:
        threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True).start()
        self._ready.wait(10)
        return self

    async def _serve(self) -> None:
        server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await server.serve_forever()

    async def _connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode("latin-1").split("\r\n"):
                    name, _, value = line.partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                await reader.readexactly(length)
                await self._stream(writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _stream(self, writer: asyncio.StreamWriter) -> None:
        r = self.count = self.count + 1
        self.received[r] = time.perf_counter()
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n"
        )
        await asyncio.sleep(self.first_byte)
        await self._event(writer, {"role": "assistant", "content": ""})
        for i in range(self.chunks):
            if i:
                await asyncio.sleep(self.interval)
            await self._event(writer, {"content": f"[{r}:{i}] "})
            now = time.perf_counter()
            self.sent[(r, i)] = now
            self.first.setdefault(r, now)
        await self._event(writer, {}, finish="stop")
        await self._write(writer, b"data: [DONE]\n\n")
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def _event(
        self, writer: asyncio.StreamWriter, delta: dict[str, Any], finish: Any = None
    ) -> None:
        chunk = {
            "id": "bench",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "bench",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        await self._write(writer, f"data: {json.dumps(chunk)}\n\n".encode())

    async def _write(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(b"%x\r\n%s\r\n" % (len(data), data))
        await writer.drain()


@dataclass
class Follow:
    """One socket following one conversation's turn, as ``reader`` saw it."""

    conversation: str
    socket: Any
    submitted: float = 0.0
    first_delta: float = 0.0
    frames: int = 0
    delta_frames: int = 0
    latencies: list[float] = field(default_factory=list)
    request: int = 0
    finished: float = 0.0
    done: asyncio.Event = field(default_factory=asyncio.Event)


async def reader(follow: Follow, provider: Provider) -> None:
    """Read ``follow``'s socket: count event frames from its ``submitted`` on, and
    take each stamped chunk's latency (the provider wrote it → this frame read)."""
    async for raw in follow.socket:
        now = time.perf_counter()
        frame = json.loads(raw)
        if "event" not in frame or not follow.submitted:
            continue
        follow.frames += 1
        if frame["event"] == "llm_deltas":
            follow.delta_frames += 1
            follow.first_delta = follow.first_delta or now
            for delta in frame["data"]["deltas"]:
                for r, i in TOKEN.findall(delta.get("content") or ""):
                    follow.request = int(r)
                    follow.latencies.append(now - provider.sent[(int(r), int(i))])
        elif frame["event"] == "run_finished":
            follow.finished = now
            follow.done.set()


async def subscribe(port: int, cookie: str, conversation: str) -> Follow:
    """A new socket subscribed to ``conversation``."""
    socket = await connect(port, cookie)
    await socket.send(json.dumps({"action": "subscribe", "conversation": conversation}))
    reply = json.loads(await socket.recv())
    assert reply.get("ok"), reply
    return Follow(conversation, socket)


def stamped_stack(
    *, database: str, prefix: str, queue: str, chunks: int, interval: float
) -> tuple[Provider, dict[str, str]]:
    """The stamping provider (``chunks`` per reply, one every ``interval`` seconds,
    the first after 50 ms), and the stack's environment for the test factory's
    agent on it (Celery executor); ``database`` is made anew and migrated, and
    Django is set up in this process."""
    provider = Provider(chunks=chunks, interval=interval, first_byte=0.05).start()
    overrides = {
        "FACTORY": "tests.runtime.agents.build_agent",
        "EXECUTOR": "celery",
        "MODEL": "openai/bench",
        "MODEL_PARAMS": provider.params,
    }
    env = stack_env(database=database, prefix=prefix, queue=queue, overrides=overrides)
    prepare_database(database)
    setup_django(env)
    return provider, env
