"""The AG-UI socket signed in with a bearer token in the subprotocol list
(``["agui", "bearer.<base64url token>"]``): a turn and a join with a valid token,
4401 for a forged, expired or revoked one, another user's thread not found, and
the token never echoed."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.core import signing

from sagents_django.agui import tokens
from sagents_django.routing import websocket_urlpatterns
from tests.agui.client import EVENT, run_input
from tests.fakes.openai_server import reply
from tests.runtime import follow as follow_module
from tests.runtime.follow import new_conversation
from tests.runtime.ws_client import Socket

pytestmark = pytest.mark.django_db(transaction=True)

site = follow_module.site

PATH = "/ws/sagents/agui/"


async def open_socket(
    subprotocols: list[str], user: Any = None
) -> tuple[Socket, str | None]:
    communicator = WebsocketCommunicator(
        URLRouter(websocket_urlpatterns), PATH, subprotocols=subprotocols
    )
    communicator.scope["user"] = user if user is not None else AnonymousUser()
    connected, answered = await communicator.connect()
    assert connected
    return Socket(communicator), answered


def expired_token(user: Any) -> str:
    class Yesterday(signing.TimestampSigner):
        def timestamp(self) -> str:
            return signing.b62_encode(int(time.time()) - tokens.MAX_AGE - 60)

    data = {"u": str(user.pk), "p": tokens._password_mark(user)}
    return Yesterday(salt=tokens.SALT).sign_object(data)


def finished(frame: dict[str, Any]) -> bool:
    return frame.get("event", {}).get("type") in ("RUN_FINISHED", "RUN_ERROR")


async def test_a_valid_token_runs_a_turn_and_only_agui_is_answered(site: Any) -> None:
    site.script(reply("Hello there.", chunks=2))
    scope, conversation = await new_conversation()
    token = await sync_to_async(tokens.issue)(scope.user)
    offered = ["agui", tokens.subprotocol(token)]

    sock, answered = await open_socket(offered)
    await sock.communicator.send_to(
        text_data=json.dumps(
            {"action": "run", "input": run_input(str(conversation.pk), "Hi")}
        )
    )
    last = await sock.until(finished)
    await sock.disconnect()

    assert answered == "agui"
    assert last["event"]["type"] == "RUN_FINISHED"
    for frame in sock.frames:
        if "event" in frame:
            EVENT.validate_python(frame["event"])


@pytest.mark.parametrize("kind", ["forged", "garbled", "expired", "revoked"])
async def test_a_token_that_is_not_valid_closes_with_4401(site: Any, kind: str) -> None:
    scope, _ = await new_conversation()
    user = scope.user
    if kind == "forged":
        entry = tokens.subprotocol(signing.dumps({"u": str(user.pk)}, salt="other"))
    elif kind == "garbled":
        entry = "bearer.%%%"
    elif kind == "expired":
        entry = tokens.subprotocol(await sync_to_async(expired_token)(user))
    else:
        token = await sync_to_async(tokens.issue)(user)
        user.set_password("a new one")
        await sync_to_async(user.save)()
        entry = tokens.subprotocol(token)

    # A signed-in session alongside does not rescue a bad token.
    sock, answered = await open_socket(["agui", entry], user=user)

    assert answered == "agui"
    assert await sock.closed() == 4401


async def test_a_token_for_one_user_cannot_read_anothers_thread(site: Any) -> None:
    _, theirs = await new_conversation("bob")
    scope, _ = await new_conversation("alice")
    token = await sync_to_async(tokens.issue)(scope.user)
    sock, _ = await open_socket(["agui", tokens.subprotocol(token)])

    codes = []
    for frame in (
        {"action": "connect", "threadId": str(theirs.pk)},
        {"action": "run", "input": run_input(str(theirs.pk), "Let me in")},
    ):
        await sock.communicator.send_to(text_data=json.dumps(frame))
        codes.append((await sock.until(lambda f: "error" in f))["error"]["code"])
    await sock.disconnect()

    assert codes == ["not_found", "not_found"]
    assert not any("event" in f for f in sock.frames)


async def test_a_socket_closes_with_4401_when_its_token_expires(
    site: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    scope, _ = await new_conversation()
    token = await sync_to_async(tokens.issue)(scope.user)
    monkeypatch.setattr(tokens, "seconds_left", lambda _token: 0.05)

    sock, _ = await open_socket(["agui", tokens.subprotocol(token)])

    assert await sock.closed() == 4401


def test_the_subprotocol_entry_is_a_valid_token_and_decodes_back() -> None:
    token = "eyJ1IjoiMSJ9:1vLh2c:abc-_DEF"
    entry = tokens.subprotocol(token)

    assert all(c.isalnum() or c in "!#$%&'*+-.^_`|~" for c in entry)
    assert tokens.from_subprotocols(["agui", entry]) == token
    assert tokens.from_subprotocols(["agui"]) is None
