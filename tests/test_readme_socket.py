"""The docs' WebSocket client (docs/sockets.md) runs as written against a real daphne.

daphne serves the hosting project (embedded default: a file SQLite database of this
test, the in-memory channel layer, inline turns, the offline demo model) in a child
process; a second child creates a user, a conversation and a signed-in session in
that database; the docs' client code runs in a third, as a reader would run it.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websockets

from tests.docs import marked
from tests.support import sites
from tests.support.processes import Daphne

REPO = Path(__file__).resolve().parents[1]
APP = "project.asgi:application"


def socket_client_code() -> str:
    return marked("socket-client").code


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("socket-site")
    env = sites.site_env(folder, SAGENTS_DEMO_DELAY_MS="0")
    sites.migrate(env)
    made = sites.signed_in(env, "reader")
    daphne = Daphne(env)
    try:
        yield {**made, "port": daphne.port, "env": env}
    finally:
        daphne.stop()


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


TOKEN = """
import django
django.setup()
from django.contrib.auth import get_user_model
from sagents_django.agui import tokens
print(tokens.issue(get_user_model().objects.get(username="reader")))
"""


def test_the_docs_agui_bearer_client_runs_a_turn_over_the_socket(
    served: dict[str, Any],
) -> None:
    token = sites.run_python(served["env"], "-c", TOKEN).strip().splitlines()[-1]
    result = subprocess.run(
        [sys.executable, "-c", marked("agui-socket-bearer").code],
        cwd=REPO,
        env={
            **served["env"],
            "SAGENTS_WS": f"ws://127.0.0.1:{served['port']}/ws/sagents/agui/",
            "AGUI_TOKEN": token,
            "THREAD": served["conversation"],
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.rstrip("\n").endswith("[RUN_FINISHED]")
    assert "Plan a picnic" in result.stdout


def test_a_bad_bearer_token_over_the_agui_socket_is_closed_with_4401(
    served: dict[str, Any],
) -> None:
    url = f"ws://127.0.0.1:{served['port']}/ws/sagents/agui/"
    entry = "bearer." + "bm90LWEtdG9rZW4"  # "not-a-token"

    origin = f"http://127.0.0.1:{served['port']}"

    assert (
        asyncio.run(closed_with(url, origin=origin, subprotocols=["agui", entry]))
        == 4401
    )
