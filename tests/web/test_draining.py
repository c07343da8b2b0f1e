"""Readiness and draining, on real server processes: each test on daphne and on
uvicorn (docs/deploy.md documents both).

A load balancer (``tests.web.balancer``) follows two servers' readiness; a deploy
sends one of them SIGTERM. Its readiness must say "draining" at once, its sockets
keep working for ``DRAIN_SECONDS`` and are then closed with 4503, on which a
client reconnects through the balancer to the other server and resyncs from the
database; the drained process exits on its own (with its server's own status). A
server whose channel layer is unreachable or silent answers 503 naming that check,
within the check's timeout, and says nothing of the layer's address or password.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websockets

from sagents_django.protocol import CLOSE_DRAINING
from sagents_django.runtime.readiness import CHECK_TIMEOUT
from tests.support.ports import free_port
from tests.support.processes import AsgiServer, Daphne, Uvicorn
from tests.web.balancer import SERVERS, Balancer, prepare, site_env

DRAIN_SECONDS = 2.0


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("drain")


@pytest.fixture(params=SERVERS, ids=lambda server: server.name)
def server(request: pytest.FixtureRequest) -> type[AsgiServer]:
    """The server class a test runs on (each test runs on both)."""
    cls: type[AsgiServer] = request.param
    return cls


@pytest.fixture(scope="module")
def made(folder: Path) -> dict[str, Any]:
    return prepare(site_env(folder))


class SilentServer:
    """Accepts connections and never answers: a Redis that hangs."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.held.append(client)

    def close(self) -> None:
        self.listener.close()
        for held in self.held:
            held.close()


def checks(body: bytes) -> dict[str, Any]:
    answer = json.loads(body)
    assert set(answer) == {"ready", "checks"}
    assert set(answer["checks"]) == {"database", "channel_layer", "draining"}
    return answer


def test_a_serving_server_is_ready_and_alive_and_its_probes_take_only_get_and_head(
    server: type[AsgiServer], folder: Path, made: dict[str, Any]
) -> None:
    process = server(site_env(folder), folder / f"ready-{server.name}.log")
    try:
        status, body, _ = process.get("/ready/")
        assert status == 200
        assert checks(body) == {
            "ready": True,
            "checks": {"database": "ok", "channel_layer": "ok", "draining": "ok"},
        }
        assert process.get("/live/")[:2] == (200, b'{"alive": true}')
        for path in ("/ready/", "/live/"):
            assert process.get(path, "HEAD")[:2] == (200, b"")
            for method in ("POST", "PUT", "PATCH", "DELETE", "OPTIONS"):
                assert process.get(path, method)[0] == 405, (path, method)
    finally:
        process.stop()


def test_a_server_whose_channel_layer_is_down_or_silent_is_not_ready_and_says_which(
    server: type[AsgiServer], folder: Path, made: dict[str, Any]
) -> None:
    closed = free_port()  # nothing listens there: connections are refused
    silent = SilentServer()
    refused = server(
        site_env(folder, REDIS_URL=f"redis://:hunter2@127.0.0.1:{closed}/0"),
        folder / f"refused-{server.name}.log",
    )
    hung = server(
        site_env(folder, REDIS_URL=f"redis://:hunter2@127.0.0.1:{silent.port}/0"),
        folder / f"hung-{server.name}.log",
    )
    try:
        status, body, _ = refused.get("/ready/")
        assert status == 503
        assert checks(body) == {
            "ready": False,
            "checks": {
                "database": "ok",
                "channel_layer": "error: ConnectionError",
                "draining": "ok",
            },
        }
        for secret in (b"hunter2", b"redis", b"127.0.0.1", str(closed).encode()):
            assert secret not in body

        for _ in range(2):  # and again, when the first probe may still hang
            status, body, took = hung.get("/ready/")
            assert status == 503
            assert checks(body)["checks"]["channel_layer"] == "timeout"
            assert checks(body)["checks"]["database"] == "ok"
            assert took < CHECK_TIMEOUT + 1.5
            time.sleep(1.1)  # past the cached answer
        assert str(silent.port).encode() not in body
        # Liveness does not depend on the layer.
        assert hung.get("/live/")[0] == 200
    finally:
        refused.stop()
        hung.stop()
        silent.close()


async def _send(socket: Any, action: str, **fields: Any) -> dict[str, Any]:
    """Send an action; its reply (events before it are skipped)."""
    await socket.send(json.dumps({"action": action, "id": action, **fields}))
    while True:
        frame = json.loads(await asyncio.wait_for(socket.recv(), 30))
        if frame.get("id") == action:
            assert frame["ok"], frame
            return frame


def _connect(
    to: Balancer | AsgiServer, session: str, path: str = "/ws/sagents/"
) -> Any:
    return websockets.connect(
        f"ws://127.0.0.1:{to.port}{path}",
        origin=f"http://127.0.0.1:{to.port}",  # type: ignore[arg-type]
        additional_headers={"Cookie": f"sessionid={session}"},
        open_timeout=10,
    )


async def _new_conversation(server: AsgiServer, session: str) -> str:
    """A conversation of the test's own (the servers' tests share one site)."""
    async with _connect(server, session) as socket:
        created = await _send(socket, "create_conversation", title=server.name)
    return str(created["conversation"]["id"])


@pytest.fixture
def pair(
    server: type[AsgiServer], folder: Path, made: dict[str, Any]
) -> Iterator[tuple[AsgiServer, AsgiServer]]:
    env = site_env(folder, SAGENTS_DRAIN_SECONDS=str(DRAIN_SECONDS))
    first = server(env, folder / f"first-{server.name}.log")
    second = server(env, folder / f"second-{server.name}.log")
    try:
        yield first, second
    finally:
        first.stop()
        second.stop()


async def test_sigterm_drains_a_server_and_its_sockets_reconnect_to_the_other(
    pair: tuple[AsgiServer, AsgiServer], made: dict[str, Any]
) -> None:
    first, second = pair
    cid = await _new_conversation(first, made["session"])
    balancer = Balancer([first.port, second.port])
    try:
        async with (
            _connect(balancer, made["session"]) as socket,
            _connect(balancer, made["session"], f"/ws/sagents/html/{cid}/") as page,
        ):
            assert balancer.routed == [first.port, first.port]
            await _send(socket, "subscribe", conversation=cid)
            await _send(socket, "send", conversation=cid, text="Plan a picnic")
            while json.loads(await socket.recv()).get("event") != "run_finished":
                pass
            rows = (await _send(socket, "history", conversation=cid))["messages"]
            assert rows

            first.sigterm()
            signalled = time.monotonic()
            status, body, _ = await asyncio.to_thread(first.get, "/ready/")
            assert status == 503
            assert checks(body)["checks"] == {
                "database": "ok",
                "channel_layer": "ok",
                "draining": "draining",
            }
            # Still serving while the load balancer takes note.
            assert await _send(socket, "history", conversation=cid)
            assert (await asyncio.to_thread(first.get, "/live/"))[0] == 200

            for open_socket in (socket, page):
                with pytest.raises(websockets.ConnectionClosed) as closed:
                    while True:
                        await asyncio.wait_for(open_socket.recv(), 30)
                assert closed.value.rcvd is not None
                assert closed.value.rcvd.code == CLOSE_DRAINING
            assert time.monotonic() - signalled >= DRAIN_SECONDS - 0.2

        assert await asyncio.to_thread(first.process.wait, 15) == first.stopped
        assert balancer.ready == [second.port]
        # The client reconnects (through the balancer: to the other server) and
        # resyncs from the database.
        async with _connect(balancer, made["session"]) as socket:
            assert balancer.routed[-1] == second.port
            await _send(socket, "subscribe", conversation=cid)
            again = (await _send(socket, "history", conversation=cid))["messages"]
            assert [r["id"] for r in again] == [r["id"] for r in rows]
        log = first.output()
        assert "Traceback" not in log and "took too long" not in log, log
        assert "Draining: closing 2 sockets" in log
    finally:
        balancer.close()


def test_a_second_sigterm_stops_a_draining_server_at_once(
    server: type[AsgiServer], folder: Path, made: dict[str, Any]
) -> None:
    process = server(
        site_env(folder, SAGENTS_DRAIN_SECONDS="60"),
        folder / f"twice-{server.name}.log",
    )
    try:
        # Under daphne a request installs the handler (uvicorn's lifespan call did).
        assert process.get("/ready/")[0] == 200
        process.sigterm()
        deadline = time.monotonic() + 10
        while process.get("/ready/")[0] != 503:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        process.sigterm()
        assert process.process.wait(15) == process.stopped
        log = process.output()
        assert "Traceback" not in log and "destroyed" not in log, log
        assert "Draining: closing" not in log  # it stopped before the sockets' turn
    finally:
        process.stop()


def test_a_daphne_that_never_served_a_request_stops_on_sigterm_as_before(
    folder: Path, made: dict[str, Any]
) -> None:
    daphne = Daphne(site_env(folder), folder / "untouched.log")
    try:
        daphne.sigterm()
        assert daphne.process.wait(15) == Daphne.stopped
        # No drain ran: its first step would have logged the sockets it closes.
        assert "Draining" not in daphne.output()
    finally:
        daphne.stop()


def test_a_uvicorn_drains_on_sigterm_before_serving_any_request(
    folder: Path, made: dict[str, Any]
) -> None:
    # uvicorn calls the application for the ASGI lifespan at startup (the Channels
    # router refuses it, and uvicorn goes on): DrainOnSigterm's handler is in
    # front of uvicorn's from then on.
    uvicorn = Uvicorn(site_env(folder), folder / "lifespan.log")
    try:
        uvicorn.sigterm()
        status, body, _ = uvicorn.get("/ready/")
        assert status == 503
        assert checks(body)["checks"]["draining"] == "draining"
        assert uvicorn.process.wait(15) == Uvicorn.stopped
        log = uvicorn.output()
        assert "ASGI 'lifespan' protocol appears unsupported." in log
        assert "Draining: closing 0 sockets" in log
        assert "Traceback" not in log, log
    finally:
        uvicorn.stop()
