"""Two ASGI server processes behind a load balancer that follows their readiness:
what a deploy replaces one process of.

``Balancer`` is a TCP relay that polls each backend's readiness endpoint (as a
load balancer's health check does) and sends each new connection to the first
backend that answered 200; connections already open stay where they are. The
servers (``Daphne``, ``Uvicorn``: docs/deploy.md documents both) serve the hosting
project on one SQLite file (so a session and a conversation are the same on
both), with ``tests.web.drain_settings``.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

from tests.test_readme_socket import free_port, wait_for_port
from tests.web.browser import PASSWORD

REPO = Path(__file__).resolve().parents[2]
APP = "project.asgi:application"

SETUP = """
import json
import django
django.setup()
from django.contrib.auth import get_user_model
from django.test import Client
from sagents_django import services
from sagents_django.scope import Scope

user = get_user_model().objects.create_user(username="alice", password={password!r})
conversation = services.create_conversation(Scope.for_user(user))
client = Client()
client.force_login(user)
print(json.dumps({
    "session": client.cookies["sessionid"].value,
    "conversation": str(conversation.pk),
}))
"""


def site_env(folder: Path, **extra: str) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(folder),
        "PYTHONPATH": str(REPO),
        "DJANGO_SETTINGS_MODULE": "tests.web.drain_settings",
        "DATABASE_URL": f"sqlite:///{folder / 'db.sqlite3'}",
        "SAGENTS_DEMO_DELAY_MS": "30",
        "SAGENTS_EXECUTOR": "inline",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "HF_HUB_OFFLINE": "1",
        "SAGENTS_DRAIN_SECONDS": "2",
        **extra,
    }


def prepare(env: dict[str, str]) -> dict[str, Any]:
    """Migrate the site's database; a user, a conversation and a session cookie."""

    def run(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, *args],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    run("manage.py", "migrate", "--noinput", "-v", "0")
    setup = SETUP.replace("{password!r}", repr(PASSWORD))
    made: dict[str, Any] = json.loads(run("-c", setup).strip().splitlines()[-1])
    return made


class Server:
    """An ASGI server serving the project in a child process, its output in a log
    file; a subclass names the command."""

    name: ClassVar[str]
    stopped: ClassVar[int]
    """The return code of a process that stopped on SIGTERM, drained or not."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.port = free_port()
        self.log = log
        self._out = log.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", *self.arguments(self.port)],
            cwd=REPO,
            env=env,
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )
        wait_for_port(self.port, self.process)

    @staticmethod
    def arguments(port: int) -> list[str]:
        raise NotImplementedError

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def get(self, path: str, method: str = "GET") -> tuple[int, bytes, float]:
        """Status, body and seconds taken of one request."""
        return request(self.port, path, method)

    def sigterm(self) -> None:
        self.process.send_signal(signal.SIGTERM)

    def output(self) -> str:
        self._out.flush()
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._out.close()


class Daphne(Server):
    name = "daphne"
    # Twisted's reactor stops and the command returns.
    stopped = 0

    @staticmethod
    def arguments(port: int) -> list[str]:
        return ["daphne", "-b", "127.0.0.1", "-p", str(port), APP]


class Uvicorn(Server):
    """uvicorn as docs/deploy.md has a site run it (``uvicorn[standard]``: uvloop,
    httptools, websockets), without per-message compression."""

    name = "uvicorn"
    # After its graceful shutdown uvicorn restores the default SIGTERM handler and
    # raises the signal again: the process ends through it (143 in a shell).
    stopped = -signal.SIGTERM

    @staticmethod
    def arguments(port: int) -> list[str]:
        return [
            "uvicorn",
            APP,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--ws-per-message-deflate",
            "false",
        ]


SERVERS: tuple[type[Server], ...] = (Daphne, Uvicorn)


def request(port: int, path: str, method: str = "GET") -> tuple[int, bytes, float]:
    started = time.monotonic()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path)
        response = connection.getresponse()
        return response.status, response.read(), time.monotonic() - started
    finally:
        connection.close()


class Balancer:
    """A TCP relay sending each new connection to the first ready backend."""

    def __init__(self, backends: list[int], *, every: float = 0.2) -> None:
        self.backends = backends
        self.ready: list[int] = []
        self.every = every
        self.routed: list[int] = []
        """The backend each connection went to, in order."""
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.closed = False
        self._poll()
        threading.Thread(target=self._health, daemon=True).start()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _poll(self) -> None:
        ready = []
        for port in self.backends:
            with contextlib.suppress(OSError):
                if request(port, "/ready/")[0] == 200:
                    ready.append(port)
        self.ready = ready

    def _health(self) -> None:
        while not self.closed:
            self._poll()
            time.sleep(self.every)

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            ready = list(self.ready)
            if not ready:
                client.close()
                continue
            self.routed.append(ready[0])
            try:
                upstream = socket.create_connection(("127.0.0.1", ready[0]))
            except OSError:
                client.close()
                continue
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()

    def close(self) -> None:
        self.closed = True
        self.listener.close()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()
