"""DrainOnSigterm as ASGI middleware, in-process: what it does to one socket's
messages, and what it hands SIGTERM back to. The whole drain on real daphne
processes is tests/web/test_draining.py."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from sagents_django import asgi
from sagents_django.protocol import CLOSE_DRAINING


@pytest.fixture(autouse=True)
def fresh() -> Any:
    asgi.reset_for_tests()
    yield
    asgi.reset_for_tests()


class Server:
    """What the server received from the application."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def send(self, message: Any) -> None:
        self.sent.append(dict(message))

    async def receive(self) -> Any:
        raise AssertionError("not read in these tests")


async def test_a_socket_the_drain_closes_before_its_accept_is_closed_right_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = Server()
    socket = asgi._Socket(server.send)
    await socket.close()
    assert server.sent == []  # a handshake in progress is not refused
    await socket.send({"type": "websocket.accept"})
    await socket.send({"type": "websocket.send", "text": "late"})
    await socket.send({"type": "websocket.close", "code": 1000})
    assert server.sent == [
        {"type": "websocket.accept"},
        {"type": "websocket.close", "code": CLOSE_DRAINING},
    ]


async def test_an_open_socket_is_closed_once_and_what_the_app_sends_after_is_dropped() -> (
    None
):
    server = Server()
    socket = asgi._Socket(server.send)
    await socket.send({"type": "websocket.accept"})
    await socket.send({"type": "websocket.send", "text": "hello"})
    await socket.close()
    await socket.close()
    await socket.send({"type": "websocket.send", "text": "late"})
    assert [m.get("code") or m.get("text") for m in server.sent[1:]] == [
        "hello",
        CLOSE_DRAINING,
    ]


async def test_a_socket_the_app_closed_itself_is_left_alone() -> None:
    server = Server()
    socket = asgi._Socket(server.send)
    await socket.send({"type": "websocket.accept"})
    await socket.send({"type": "websocket.close", "code": 4404})
    await socket.close()
    assert server.sent[-1] == {"type": "websocket.close", "code": 4404}
    assert len(server.sent) == 2


async def test_http_passes_through_and_only_sockets_are_tracked() -> None:
    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["type"])
        assert asgi._sockets if scope["type"] == "websocket" else not asgi._sockets
        await send({"type": "x"})

    server = Server()
    wrapped = asgi.DrainOnSigterm(app)
    await wrapped({"type": "http"}, server.receive, server.send)
    await wrapped({"type": "websocket"}, server.receive, server.send)
    assert seen == ["http", "websocket"]
    assert server.sent == [{"type": "x"}, {"type": "x"}]
    assert not asgi._sockets


def test_sigterm_goes_back_to_the_servers_handler_and_an_ignored_one_stays_ignored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handled: list[int] = []
    asgi._hand_over(lambda number, frame: handled.append(number), signal.SIGTERM, None)
    assert handled == [signal.SIGTERM]
    killed: list[Any] = []
    monkeypatch.setattr(asgi.os, "kill", lambda *a: killed.append(a))
    asgi._hand_over(signal.SIG_IGN, signal.SIGTERM, None)
    assert killed == []
