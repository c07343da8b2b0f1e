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
import socket
import threading
import time
from pathlib import Path
from typing import Any

from tests.support import sites
from tests.support.processes import AsgiServer, Daphne, Uvicorn


def site_env(folder: Path, **extra: str) -> dict[str, str]:
    """A site whose servers drain for two seconds (``tests.web.drain_settings``)."""
    return sites.site_env(
        folder,
        "tests.web.drain_settings",
        **{"SAGENTS_DEMO_DELAY_MS": "30", "SAGENTS_DRAIN_SECONDS": "2", **extra},
    )


def prepare(env: dict[str, str]) -> dict[str, Any]:
    """Migrate the site's database; a user, a conversation and a session cookie."""
    sites.migrate(env)
    return sites.signed_in(env)


SERVERS: tuple[type[AsgiServer], ...] = (Daphne, Uvicorn)


def _status(port: int, path: str) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path)
        return connection.getresponse().status
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
                if _status(port, "/ready/") == 200:
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
