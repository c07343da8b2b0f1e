"""A socket that joins a conversation while its reply streams: the ``in_flight`` frame
gives the text so far, the live deltas the rest, and together they are the reply,
once. On both stacks (on the production one, a Celery worker streams and the
buffer lives in Redis)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.openai_server import reply, tool_call
from tests.runtime import follow as follow_module
from tests.runtime.follow import new_conversation
from tests.runtime.ws_client import Socket, connect, streamed

pytestmark = pytest.mark.django_db(transaction=True)

site = follow_module.site

WORDS = [f"w{n:02d} " for n in range(60)]
TEXT = "".join(WORDS)


def view_after_joining(sock: Socket, conversation: str) -> tuple[dict[str, Any], str]:
    """The ``in_flight`` frame, and the streamed text a client of ``sock`` shows at
    the end of the message: the frame's text, then the deltas that follow it."""
    frames = [f for f in sock.frames if f.get("conversation") == conversation]
    start = next(i for i, f in enumerate(frames) if f.get("event") == "in_flight")
    joined = frames[start]
    after = frames[start + 1 :]
    end = next(i for i, f in enumerate(after) if f.get("event") == "llm_message")
    return joined, joined["data"]["text"] + streamed(after[:end])


async def test_sockets_joining_mid_stream_get_the_text_so_far_then_the_rest_once(
    site: Any,
) -> None:
    site.script(reply(TEXT, chunks=len(WORDS), delay=0.03))
    scope, conversation = await new_conversation()
    cid = str(conversation.pk)
    first = await connect(scope.user)
    await first.send("subscribe", conversation=cid)
    await first.send("send", conversation=cid, text="Count for me")

    late: list[Socket] = []
    for words in (8, 25, 45):  # three joiners, at different points of the stream
        await first.until(
            lambda f, n=words: len(streamed(first.frames)) >= len("".join(WORDS[:n]))
        )
        sock = await connect(scope.user)
        await sock.send("subscribe", conversation=cid)
        late.append(sock)
    await first.event("llm_message")
    for sock in late:
        await sock.event("llm_message")
        await sock.disconnect()
    await first.event("run_finished")
    await first.disconnect()

    assert streamed(first.events()) == TEXT
    for sock in late:
        joined, shown = view_after_joining(sock, cid)
        assert 0 < len(joined["data"]["text"]) < len(TEXT)  # it joined mid-stream
        assert TEXT.startswith(joined["data"]["text"])
        assert joined["data"]["run_id"] is not None
        assert shown == TEXT
        # It counts on from the frame, without a gap and without a repeat.
        seqs = [f["seq"] for f in sock.events(cid)]
        assert seqs == list(range(joined["seq"], joined["seq"] + len(seqs)))


async def test_a_socket_joining_between_turns_gets_nothing_in_flight(
    site: Any,
) -> None:
    site.script(reply("All done."))
    scope, conversation = await new_conversation()
    cid = str(conversation.pk)
    first = await connect(scope.user)
    await first.send("subscribe", conversation=cid)
    await first.send("send", conversation=cid, text="Hi")
    last = await first.event("status_changed")
    while last["data"]["status"] == "running":
        last = await first.event("status_changed")

    sock = await connect(scope.user)
    await sock.send("subscribe", conversation=cid)
    joined = await sock.event("in_flight")  # it follows the reply
    await sock.disconnect()
    await first.disconnect()

    assert sock.events(cid) == [joined]
    assert joined["seq"] == last["seq"]
    assert joined["data"] == {
        "run_id": None,
        "text": "",
        "thinking": "",
        "tool_calls": [],
        "todos": [],
    }


async def test_a_socket_joining_mid_turn_gets_the_todos_the_turn_wrote_so_far(
    site: Any,
) -> None:
    plan = {
        "todos": [
            {"content": "Read the brief", "status": "completed"},
            {"content": "Answer it", "status": "in_progress"},
        ]
    }
    site.script(
        reply(tool_calls=[tool_call("write_todos", plan)]),
        reply(TEXT, chunks=len(WORDS), delay=0.03),
    )
    scope, conversation = await new_conversation()
    cid = str(conversation.pk)
    first = await connect(scope.user)
    await first.send("subscribe", conversation=cid)
    await first.send("send", conversation=cid, text="Plan, then answer")
    await first.event("todos_updated")
    await first.event("llm_deltas")  # the answer streams: the turn is not over

    late = await connect(scope.user)
    joined = await late.send("subscribe", conversation=cid)
    in_flight = await late.event("in_flight")
    await late.disconnect()
    await first.event("run_finished")
    await first.disconnect()

    # The stored state gets the plan when the turn ends; the joiner is shown it now.
    wanted = [(t["content"], t["status"]) for t in plan["todos"]]
    assert [(t["content"], t["status"]) for t in joined["todos"]] == wanted
    assert [(t["content"], t["status"]) for t in in_flight["data"]["todos"]] == wanted
    assert joined["status"] == "running"
