"""Child processes the tests run the project in: ASGI servers (daphne, uvicorn),
Celery workers, and a Redis server of a test's own.

Each writes its output to a log file (read by ``output()`` when a test fails or
waits for a line). ``stop()`` is a polite SIGTERM with a bound, then SIGKILL;
``kill()`` is ``kill -9``, as a crashed machine would do it.
"""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

from tests.support.ports import free_port, wait_for_port

REPO = Path(__file__).resolve().parents[2]
APP = "project.asgi:application"


def log_file(name: str) -> Path:
    """A fresh log file for a process of ``name``."""
    handle, path = tempfile.mkstemp(prefix=f"sagents-{name}-", suffix=".log")
    os.close(handle)
    return Path(path)


class Process:
    """A child process of the test running ``python -m ...`` in the repository."""

    def __init__(self, env: dict[str, str], log: Path | None = None) -> None:
        self.env = env
        self.log = log or log_file(type(self).__name__.lower())
        self.process: subprocess.Popen[bytes] | None = None

    def spawn(self, arguments: list[str]) -> subprocess.Popen[bytes]:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", *arguments],
                cwd=REPO,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        return self.process

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def sigterm(self) -> None:
        """SIGTERM without waiting: a deploy stopping the process."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """``kill -9``: gone mid-whatever."""
        if self.alive():
            assert self.process is not None
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self, timeout: float = 10) -> None:
        """SIGTERM, then SIGKILL after ``timeout`` seconds (a test's process has
        nothing to keep: no drain, unless a test waits for one itself)."""
        if not self.alive():
            return
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        finally:
            # Also when the wait is cut short (a test's timeout raising in it): a
            # process left running outlives the test and warns in another one.
            self.kill()


class AsgiServer(Process):
    """The project served by an ASGI server on a free port, listening once
    constructed; a subclass names the command."""

    name: ClassVar[str]
    stopped: ClassVar[int]
    """The return code of a process that stopped on SIGTERM, drained or not."""

    def __init__(self, env: dict[str, str], log: Path | None = None) -> None:
        super().__init__(env, log)
        self.port = free_port()
        self.process: subprocess.Popen[bytes] = self.spawn(self.arguments(self.port))
        try:
            wait_for_port(self.port, self.process)
        except BaseException:
            self.kill()  # never leave a server behind that nobody will stop
            raise

    @staticmethod
    def arguments(port: int) -> list[str]:
        raise NotImplementedError

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def socket_url(self) -> str:
        """The agent socket's address (``docs/protocol.md``)."""
        return f"ws://127.0.0.1:{self.port}/ws/sagents/"

    def get(self, path: str, method: str = "GET") -> tuple[int, bytes, float]:
        """Status, body and seconds taken of one request."""
        started = time.monotonic()
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            connection.request(method, path)
            response = connection.getresponse()
            return response.status, response.read(), time.monotonic() - started
        finally:
            connection.close()


class Daphne(AsgiServer):
    name = "daphne"
    # Twisted's reactor stops and the command returns.
    stopped = 0

    @staticmethod
    def arguments(port: int) -> list[str]:
        return ["daphne", "-b", "127.0.0.1", "-p", str(port), APP]


class Uvicorn(AsgiServer):
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


class CeleryWorker(Process):
    """A Celery worker (threads pool) taking the turns of one queue."""

    def __init__(
        self,
        env: dict[str, str],
        *,
        queue: str,
        concurrency: int = 20,
        log: Path | None = None,
    ) -> None:
        super().__init__(env, log)
        self.queue = queue
        self.concurrency = concurrency

    def environment(self) -> dict[str, str]:
        """The process's environment when it starts (a subclass may compute it)."""
        return self.env

    def start(self, timeout: float = 60) -> Any:
        self.env = self.environment()
        started = len(self.output())
        self.spawn(
            [
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
                f"{self.queue}-{self.log.stem[-8:]}@%h",
                "--loglevel",
                "info",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ]
        )
        deadline = time.monotonic() + timeout
        while " ready." not in self.output()[started:]:
            if not self.alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"The Celery worker did not start:\n{self.output()}")
            time.sleep(0.05)
        return self

    def restart(self) -> Any:
        """Stop this worker and start a new process in its place."""
        self.stop()
        return self.start()


class PrivateRedis:
    """A Redis server of this test's own (restarting the shared one would break
    every other test process on the machine). With a ``data_dir`` it keeps its data
    across a restart (every write on disk before it is answered), as a Redis with
    persistence, or one cut off from the network for a while, would."""

    def __init__(self, data_dir: Path | None = None) -> None:
        self.port = free_port()
        self.data_dir = data_dir
        self.process: subprocess.Popen[bytes] | None = None

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
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with redis.Redis.from_url(self.url) as client:
                    client.ping()
                return self
            except redis.ConnectionError:
                assert self.process.poll() is None, "redis-server exited"
                time.sleep(0.02)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        """``kill -9``: gone at once, as a crashed server would be."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
