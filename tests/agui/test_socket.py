"""The AG-UI events over our WebSocket (``ws/sagents/agui/``): a run, a rejoin with
``lastEventId``, another user's thread, bad frames."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.agui.client import EVENT, View, run_input
from tests.fakes.openai_server import reply
from tests.runtime import follow as follow_module
from tests.runtime.follow import new_conversation
from tests.runtime.ws_client import Socket, connect

pytestmark = pytest.mark.django_db(transaction=True)

site = follow_module.site

PATH = "/ws/sagents/agui/"
WORDS = [f"w{n:02d} " for n in range(40)]
TEXT = "".join(WORDS)


async def send(sock: Socket, frame: dict[str, Any]) -> None:
    await sock.communicator.send_to(text_data=json.dumps(frame))


def finished(frame: dict[str, Any]) -> bool:
    return frame.get("event", {}).get("type") in ("RUN_FINISHED", "RUN_ERROR")


def events_of(sock: Socket) -> list[dict[str, Any]]:
    out = [f["event"] for f in sock.frames if "event" in f]
    for event in out:
        EVENT.validate_python(event)
    return out


async def test_a_run_over_the_socket_gets_the_events_with_their_seq(
    site: Any,
) -> None:
    site.script(reply("Hello there.", chunks=3))
    scope, conversation = await new_conversation()
    sock = await connect(scope.user, PATH)
    body = run_input(str(conversation.pk), "Hi")

    await send(sock, {"action": "run", "input": body})
    await sock.until(finished)
    await sock.disconnect()

    events = events_of(sock)
    assert events[0] == {
        "type": "RUN_STARTED",
        "threadId": str(conversation.pk),
        "runId": body["runId"],
    }
    assert events[-1]["outcome"] == {"type": "success"}
    view = View()
    for event in events:
        view.apply(event)
    assert view.texts() == ["Hello there."]
    seqs = [f["seq"] for f in sock.frames if f.get("seq") is not None]
    assert seqs == sorted(seqs)
    assert all(f["threadId"] == str(conversation.pk) for f in sock.frames)


async def test_a_socket_that_rejoins_mid_stream_sees_the_reply_once(
    site: Any,
) -> None:
    site.script(reply(TEXT, chunks=len(WORDS), delay=0.03))
    scope, conversation = await new_conversation()
    first = await connect(scope.user, PATH)
    await send(first, {"action": "run", "input": run_input(str(conversation.pk), "Go")})

    def enough(frame: dict[str, Any]) -> bool:
        shown = View()
        for event in events_of(first):
            shown.apply(event)
        return len("".join(shown.texts())) > 40

    await first.until(enough)
    await first.disconnect()
    last = max(f["seq"] for f in first.frames if f.get("seq") is not None)

    second = await connect(scope.user, PATH)
    await send(
        second,
        {"action": "connect", "threadId": str(conversation.pk), "lastEventId": last},
    )
    await second.until(finished)
    await second.disconnect()

    view = View()
    for event in [*events_of(first), *events_of(second)]:
        view.apply(event)
    assert view.texts() == [TEXT]


async def test_another_users_thread_and_bad_frames_get_errors(site: Any) -> None:
    _, theirs = await new_conversation("bob")
    scope, _ = await new_conversation("alice")
    sock = await connect(scope.user, PATH)
    frames = [
        {"action": "connect", "threadId": str(theirs.pk)},
        {"action": "run", "input": run_input(str(theirs.pk), "Let me in")},
        {"action": "run", "input": {"threadId": str(theirs.pk)}},
        {"action": "connect", "threadId": "nope"},
        {"action": "connect", "threadId": str(theirs.pk), "lastEventId": "x"},
        {"action": "explode"},
    ]
    codes = []
    for frame in frames:
        await send(sock, frame)
        codes.append((await sock.until(lambda f: "error" in f))["error"]["code"])
    await sock.communicator.send_to(text_data="{not json")
    codes.append((await sock.until(lambda f: "error" in f))["error"]["code"])
    await sock.disconnect()

    assert codes == [
        "not_found",
        "not_found",
        "invalid_input",
        "invalid_input",
        "invalid_input",
        "unknown_action",
        "bad_frame",
    ]
    assert not any("event" in f for f in sock.frames)
