"""The docs' WebSocket client (docs/sockets.md) runs as written against a real daphne.

daphne serves the hosting project (embedded default: a file SQLite database of this
test, the in-memory channel layer, inline turns, the offline demo model) in a child
process; a second child creates a user, a conversation and a signed-in session in
that database; the docs' client code runs in a third, as a reader would run it.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websockets

from tests.docs import marked

REPO = Path(__file__).resolve().parents[1]
APP = "project.asgi:application"

SETUP = """
import json
import django
django.setup()
from django.contrib.auth import get_user_model
from django.test import Client
from sagents_django import services
from sagents_django.scope import Scope

user = get_user_model().objects.create_user(username="reader", password="x")
conversation = services.create_conversation(Scope.for_user(user))
client = Client()
client.force_login(user)
print(json.dumps({
    "session": client.cookies["sessionid"].value,
    "conversation": str(conversation.pk),
}))
"""


def socket_client_code() -> str:
    return marked("socket-client").code


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, "daphne exited at start-up"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"daphne did not listen on {port}")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("socket-site")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(folder),
        "PYTHONPATH": str(REPO),
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DATABASE_URL": f"sqlite:///{folder / 'db.sqlite3'}",
        "SAGENTS_DEMO_DELAY_MS": "0",
        "SAGENTS_DRAIN_SECONDS": "0",  # daphne stops without a drain
    }

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
    made = json.loads(run("-c", SETUP).strip().splitlines()[-1])
    port = free_port()
    log = (folder / "daphne.log").open("wb")
    daphne = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), APP],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_port(port, daphne)
        yield {**made, "port": port, "env": env}
    finally:
        daphne.terminate()
        daphne.wait(timeout=30)
        log.close()


def test_the_docs_socket_client_prints_the_streamed_reply_until_the_run_ends(
    served: dict[str, Any],
) -> None:
    result = subprocess.run(
        [sys.executable, "-c", socket_client_code()],
        cwd=REPO,
        env={
            **served["env"],
            "SAGENTS_WS": f"ws://127.0.0.1:{served['port']}/ws/sagents/",
            "SESSIONID": served["session"],
            "CONVERSATION": served["conversation"],
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    text, _, last = result.stdout.rstrip("\n").rpartition("\n")
    assert last == "[completed]"
    # One line per assistant message, the last one answering the message sent.
    lines = [line for line in text.splitlines() if line]
    assert lines[0].startswith("The offline demo model starts by planning")
    assert any("You asked: “Plan a picnic”" in line for line in lines)


async def closed_with(url: str, **options: Any) -> int | None:
    async with websockets.connect(url, **options) as ws:
        try:
            await asyncio.wait_for(ws.recv(), 30)
        except websockets.ConnectionClosed as exc:
            return exc.rcvd.code if exc.rcvd is not None else None
    raise AssertionError("the socket stayed open")


def test_a_socket_without_a_session_is_closed_with_4401(
    served: dict[str, Any],
) -> None:
    origin = f"http://127.0.0.1:{served['port']}"
    url = f"ws://127.0.0.1:{served['port']}/ws/sagents/"

    assert asyncio.run(closed_with(url, origin=origin)) == 4401


def test_a_socket_from_a_foreign_origin_is_refused(served: dict[str, Any]) -> None:
    url = f"ws://127.0.0.1:{served['port']}/ws/sagents/"

    with pytest.raises(websockets.InvalidStatus) as refused:
        asyncio.run(closed_with(url, origin="http://evil.example"))

    assert refused.value.response.status_code == 403
