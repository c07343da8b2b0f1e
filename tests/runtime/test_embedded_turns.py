"""The AgentServer on the embedded default: SQLite, in-memory layer, inline executor.

Each test commits (the executor takes a run only after its transaction commits) and
follows the turn as a subscriber would: a channel in the conversation's group.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sagents_django.exceptions import Conflict, InvalidInput, NotFound
from sagents_django.models import AgentRun, DisplayMessage
from sagents_django.runtime import agent_server
from tests.fakes.openai_server import reply, tool_call
from tests.runtime import follow as follow_module
from tests.runtime.follow import client_page, follow, make_scope, new_conversation

pytestmark = pytest.mark.django_db(transaction=True)

site = follow_module.site


async def test_a_message_runs_a_turn_whose_events_arrive_in_order(site: Any) -> None:
    site.script(reply("Hello there, friend.", chunks=5))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)

    submission = await agent_server.aadd_message(scope, conversation.pk, "Hi")
    finished = await follower.until("run_finished")

    assert not submission.queued
    assert finished["data"]["status"] == "completed"
    seqs = [e["seq"] for e in follower.events]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # no gaps
    names = follower.names()
    assert names[0] == "display_message_saved"  # the user's message, at once
    assert names.index("run_started") < names.index("llm_deltas")
    assert names.index("llm_deltas") < names.index("llm_message")
    streamed = "".join(
        d.get("content", "")
        for e in follower.events
        if e["event"] == "llm_deltas"
        for d in e["data"]["deltas"]
    )
    assert streamed == "Hello there, friend."
    # Deltas are batched: fewer frames than chunks.
    assert names.count("llm_deltas") < 5
    rows = await sync_to_async(list)(
        DisplayMessage.objects.filter(conversation=conversation.pk).order_by("pk")
    )
    assert [(r.message_type, r.content.get("text")) for r in rows] == [
        ("user", "Hi"),
        ("assistant", "Hello there, friend."),
    ]
    run = await AgentRun.objects.aget(pk=submission.run_id)
    assert run.status == "completed"
    assert run.attempts == 1
    state = await sync_to_async(agent_server.get_info)(scope, conversation.pk)
    assert [m.role for m in state["state"].messages] == ["user", "assistant"]
    assert await agent_server.aget_status(scope, conversation.pk) == "idle"


async def test_a_second_turn_remembers_the_first(site: Any) -> None:
    site.script(reply("One."), reply("Two."))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)

    await agent_server.aadd_message(scope, conversation.pk, "first")
    await follower.until("run_finished")
    await agent_server.aadd_message(scope, conversation.pk, "second")
    await follower.until("run_finished")

    sent = [m["content"] for m in site.requests[1].messages if m["role"] != "system"]
    assert sent == ["first", "One.", "second"]


async def test_cancel_mid_stream_keeps_the_partial_text(site: Any) -> None:
    site.script(reply("word " * 200, chunks=200, delay=0.02))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)

    await agent_server.aadd_message(scope, conversation.pk, "Talk")
    await follower.until("llm_deltas")
    assert await agent_server.acancel(scope, conversation.pk)
    finished = await follower.until("run_finished")

    assert finished["data"]["status"] == "cancelled"
    rows = await sync_to_async(list)(
        DisplayMessage.objects.filter(conversation=conversation.pk).order_by("pk")
    )
    note = rows[-1]
    assert note.content == {
        "text": "Agent execution cancelled.",
        "stop_reason": "cancelled",
    }
    assert (note.message_type, note.content_type) == ("system", "notification")
    partial = [r for r in rows if r.message_type == "assistant"]
    assert partial and 0 < len(partial[0].content["text"]) < len("word " * 200)
    assert partial[0].status == "cancelled"
    assert partial[-1].content["stop_reason"] == "cancelled"
    assert "stop_reason" not in rows[0].content  # a finished message has none
    page = await sync_to_async(client_page)(scope, conversation)
    assert '<p class="sg-note" role="status">Agent execution cancelled.</p>' in page
    assert '<p class="sg-stopped">Stopped.</p>' in page
    assert await agent_server.aget_status(scope, conversation.pk) == "cancelled"
    assert not await agent_server.acancel(scope, conversation.pk)


async def test_an_approval_pauses_and_a_resume_finishes_it(site: Any) -> None:
    site.script(
        reply(
            tool_calls=[
                tool_call("write_file", {"file_path": "/a.txt", "content": "hi"})
            ]
        ),
        reply("Written."),
        reply("Hello!"),
    )
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "Write it")
    first = await follower.until("run_finished")
    assert first["data"]["status"] == "interrupted"
    assert await agent_server.aget_status(scope, conversation.pk) == "interrupted"
    held = await agent_server.aadd_message(scope, conversation.pk, "hello?")
    assert held.held and held.run_id == first["data"]["run_id"]

    await agent_server.aresume(scope, conversation.pk, [{"type": "approve"}])
    second = await follower.until("run_finished")
    third = await follower.until("run_finished")

    assert second["data"]["status"] == "completed"
    assert third["data"]["run_id"] == second["data"]["next_run_id"]
    assert third["data"]["status"] == "completed"
    with pytest.raises(Conflict):
        await agent_server.aresume(scope, conversation.pk, [{"type": "approve"}])


async def test_another_users_conversation_is_not_found_on_every_verb(site: Any) -> None:
    _, conversation = await new_conversation("alice")
    mallory = await sync_to_async(make_scope)("mallory")
    pk = conversation.pk
    calls = [
        lambda: agent_server.add_message(mallory, pk, "hi"),
        lambda: agent_server.execute(mallory, pk),
        lambda: agent_server.cancel(mallory, pk),
        lambda: agent_server.resume(mallory, pk, [{"type": "approve"}]),
        lambda: agent_server.get_status(mallory, pk),
        lambda: agent_server.get_info(mallory, pk),
        lambda: agent_server.get_metadata(mallory, pk),
        lambda: agent_server.export_state(mallory, pk),
        lambda: agent_server.reset(mallory, pk),
        lambda: agent_server.notify_middleware(mallory, pk, "x", {}),
        lambda: agent_server.publish_event_from(mallory, pk, "x", {}),
        lambda: agent_server.touch(mallory, pk),
        lambda: agent_server.get_inactivity_status(mallory, pk),
        lambda: agent_server.subscribe(mallory, pk, "specific.x!y"),
    ]
    for call in calls:
        with pytest.raises(NotFound):
            await sync_to_async(call)()
    assert await agent_server.alist_running_agents(mallory) == []
    assert await AgentRun.objects.filter(conversation=pk).acount() == 0


@pytest.mark.parametrize("text", ["", None, 42, "x" * (9 * 1024 * 1024)])
async def test_a_bad_message_is_refused_before_anything_is_written(
    site: Any, text: Any
) -> None:
    scope, conversation = await new_conversation()
    with pytest.raises(InvalidInput):
        await agent_server.aadd_message(scope, conversation.pk, text)
    assert (
        await DisplayMessage.objects.filter(conversation=conversation.pk).acount() == 0
    )
    assert await AgentRun.objects.filter(conversation=conversation.pk).acount() == 0
