"""The resume extension: a client that leaves mid-stream does not stop the run, and
one that comes back with ``Last-Event-ID`` gets the transcript, the message in
flight so far and the live rest: the reply once, nothing lost, nothing twice."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from sagents_django.models import AgentRun
from tests.agui.client import Received, View, last_id, parse_sse, run_input, types
from tests.agui.test_runs import post_run, signed_in
from tests.fakes.openai_server import reply
from tests.runtime import follow as follow_module
from tests.runtime import test_dropped_events as dropped_events
from tests.runtime.follow import new_conversation, no_active_runs

pytestmark = pytest.mark.django_db(transaction=True)

site = follow_module.site
lossy = dropped_events.lossy

WORDS = [f"w{n:02d} " for n in range(40)]
TEXT = "".join(WORDS)


async def read_until(response: Any, done: Any) -> tuple[list[Received], Any, str]:
    """Events of a streaming response until ``done(events)``; the open iterator."""
    stream = response.streaming_content.__aiter__()
    text = ""
    while True:
        text += (await stream.__anext__()).decode()
        complete = text[: text.rfind("\n\n") + 2]
        events = parse_sse(complete)
        if done(events):
            return events, stream, complete


def streamed(events: list[Received]) -> str:
    return "".join(
        r.event["delta"] for r in events if r.event["type"] == "TEXT_MESSAGE_CONTENT"
    )


async def test_a_client_that_comes_back_mid_stream_sees_the_reply_once(
    site: Any,
) -> None:
    site.script(reply(TEXT, chunks=len(WORDS), delay=0.03))
    scope, conversation = await new_conversation()
    client = await signed_in(scope)
    body = run_input(str(conversation.pk), "Count for me")
    response = await client.post("/agui/", body, content_type="application/json")

    first, stream, seen = await read_until(response, lambda e: len(streamed(e)) > 40)
    await stream.aclose()  # the client goes; the run does not
    last = last_id(seen)
    assert last is not None
    run = await AgentRun.objects.filter(conversation=conversation).afirst()
    assert run is not None and run.status == "running"

    again = await client.get(
        f"/agui/{conversation.pk}/",
        {"runId": body["runId"]},
        headers={"Last-Event-ID": last},
    )
    assert again.status_code == 200
    text = b"".join([c async for c in again.streaming_content]).decode()
    second = parse_sse(text)

    kinds = types(second)
    assert kinds[:3] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT"]
    assert second[0].event["runId"] == body["runId"]
    assert kinds[-1] == "RUN_FINISHED"
    assert second[-1].event["outcome"] == {"type": "success"}
    view = View()
    for received in [*first, *second]:
        view.apply(received.event)
    assert view.texts() == [TEXT]
    assert view.texts("user") == ["Count for me"]
    # Numbering goes on from the rejoin's snapshot, never back.
    ids = [int(r.id) for r in second if r.id is not None]
    assert ids == sorted(ids) and ids[0] >= int(last)


async def test_a_client_that_missed_nothing_rejoins_without_a_snapshot(
    site: Any,
) -> None:
    site.script(reply("Done."))
    scope, conversation = await new_conversation()
    client = await signed_in(scope)
    _, first = await post_run(client, run_input(str(conversation.pk), "Hi"))
    assert await no_active_runs(30)
    last = last_id(first)
    assert last is not None

    again = await client.get(
        f"/agui/{conversation.pk}/", headers={"Last-Event-ID": last}
    )
    text = b"".join([c async for c in again.streaming_content]).decode()

    assert types(parse_sse(text)) == ["RUN_STARTED", "RUN_FINISHED"]


async def test_a_last_event_id_that_is_not_ours_is_refused(site: Any) -> None:
    scope, conversation = await new_conversation()
    client = await signed_in(scope)
    response = await client.get(
        f"/agui/{conversation.pk}/", headers={"Last-Event-ID": "12; DROP"}
    )
    assert response.status_code == 422


async def test_a_stream_that_loses_events_resyncs_and_shows_the_reply_once(
    lossy: Any,
) -> None:
    lossy.script(reply(TEXT, chunks=len(WORDS), delay=0.01))
    scope, conversation = await new_conversation()
    client = await signed_in(scope)
    _, text = await post_run(client, run_input(str(conversation.pk), "Count for me"))

    events = parse_sse(text)
    assert get_channel_layer().dropped  # events were lost on the way
    assert types(events).count("MESSAGES_SNAPSHOT") > 1  # and the stream resynced
    view = View()
    for received in events:
        view.apply(received.event)
    assert view.texts() == [TEXT]
    assert events[-1].event["type"] == "RUN_FINISHED"


async def test_a_revoked_share_ends_the_stream_it_followed(site: Any) -> None:
    from sagents_django.sharing.services import revoke, share

    site.script(reply(TEXT, chunks=len(WORDS), delay=0.03))
    owner, conversation = await new_conversation("bob")
    reader, _ = await new_conversation("alice")
    await sync_to_async(share)(owner, conversation.pk, reader.user, "read")
    owners = await signed_in(owner)
    running = asyncio.ensure_future(
        owners.post(
            "/agui/",
            run_input(str(conversation.pk), "Count"),
            content_type="application/json",
        )
    )
    while not await AgentRun.objects.filter(conversation=conversation).aexists():
        await asyncio.sleep(0.02)  # the follower joins a running turn
    follower = await (await signed_in(reader)).get(f"/agui/{conversation.pk}/")
    _, stream, _ = await read_until(follower, lambda e: len(streamed(e)) > 20)

    await sync_to_async(revoke)(owner, conversation.pk, reader.user)
    rest = "".join([chunk.decode() async for chunk in stream])

    assert parse_sse(rest)[-1].event == {
        "type": "RUN_ERROR",
        "message": "No such thread",
    }
    response = await running
    b"".join([c async for c in response.streaming_content])  # the owner's: to the end
