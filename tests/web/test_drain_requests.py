"""HTTP requests at the end of a drain (``sagents_django.asgi``), in process: a
request already inside Django is waited for before the server's own SIGTERM
handler stops the process (daphne kills what is still running, and Django's
disconnect listener then fails with a traceback in the log), and a request that
arrives after the sockets were closed is answered 503 without entering Django.
The drain of real servers: test_draining.py."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from typing import Any

import pytest

from sagents_django import asgi


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # The handler is never installed in the test process: SIGTERM stays pytest's.
    monkeypatch.setattr(asgi, "_installed_in", os.getpid())
    monkeypatch.setattr(asgi, "_drain_seconds", lambda: 0.0)
    asgi.reset_for_tests()
    yield
    asgi.reset_for_tests()


async def _receive() -> dict[str, Any]:
    return {"type": "http.request", "body": b"", "more_body": False}


async def test_a_request_after_the_sockets_closed_is_answered_without_the_site() -> (
    None
):
    entered: list[str] = []

    async def site(scope: Any, receive: Any, send: Any) -> None:
        entered.append(scope["path"])

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    application = asgi.DrainOnSigterm(site)
    await application({"type": "http", "path": "/ready/"}, _receive, send)
    assert entered == ["/ready/"]

    asgi._closing = True
    await application({"type": "http", "path": "/ready/"}, _receive, send)
    assert entered == ["/ready/"]
    assert sent[0]["status"] == 503
    assert (b"connection", b"close") in sent[0]["headers"]
    assert sent[1]["body"] == b"Draining\n"


async def test_the_drain_waits_for_a_request_inside_the_site_before_stopping() -> None:
    release = asyncio.Event()
    inside = asyncio.Event()

    async def site(scope: Any, receive: Any, send: Any) -> None:
        inside.set()
        await release.wait()

    async def send(message: dict[str, Any]) -> None:
        pass

    stopped: list[int] = []
    request = asyncio.ensure_future(
        asgi.DrainOnSigterm(site)({"type": "http", "path": "/slow/"}, _receive, send)
    )
    await inside.wait()
    drain = asyncio.ensure_future(
        asgi._drain(lambda signum, frame: stopped.append(signum), 15)
    )
    await asyncio.sleep(0.3)
    assert asgi._closing and not stopped  # the request is still inside

    release.set()
    await asyncio.wait_for(drain, asgi.CLOSE_GRACE + 5)
    await request
    assert stopped == [15]
    assert asgi._requests == 0


async def test_a_request_that_fails_is_not_waited_for() -> None:
    async def site(scope: Any, receive: Any, send: Any) -> None:
        raise RuntimeError("broken view")

    async def send(message: dict[str, Any]) -> None:
        pass

    with pytest.raises(RuntimeError):
        await asgi.DrainOnSigterm(site)({"type": "http", "path": "/"}, _receive, send)
    assert asgi._requests == 0
