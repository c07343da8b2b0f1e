"""The AgentServer's other verbs: state in and out, events, listing, presence."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from sagents_django import services
from sagents_django.core import Message, State
from sagents_django.exceptions import InvalidInput, NotFound, RunConflict
from sagents_django.models import AgentRun, DisplayMessage
from sagents_django.persistence import DjangoDisplayMessagePersistence
from sagents_django.runtime import agent_server, viewers
from sagents_django.runtime.runner import run_turn
from tests.fakes.openai_server import reply
from tests.runtime import follow as follow_module
from tests.runtime.follow import follow, new_conversation

pytestmark = pytest.mark.django_db(transaction=True)

site = follow_module.site


async def test_a_late_or_duplicate_delivery_of_a_run_does_nothing(site: Any) -> None:
    site.script(reply("Once."))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    submission = await agent_server.aadd_message(scope, conversation.pk, "hi")
    await follower.until("run_finished")

    assert await run_turn(submission.run_id) is None

    assert len(site.requests) == 1
    run = await AgentRun.objects.aget(pk=submission.run_id)
    assert (run.status, run.attempts) == ("completed", 1)


async def test_export_restore_and_reset(site: Any) -> None:
    site.script(reply("Remembered."))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "remember me")
    await follower.until("run_finished")
    exported = await agent_server.aexport_state(scope, conversation.pk)
    assert exported is not None and exported["version"] == 1

    state = State(agent_id="x", metadata={"kept": True}).add_message(
        Message.user("other")
    )
    await agent_server.aupdate_agent_and_state(scope, conversation.pk, state)
    info = await agent_server.aget_info(scope, conversation.pk)
    assert [m.text for m in info["state"].messages] == ["other"]

    await agent_server.arestore_state(scope, conversation.pk, exported)
    info = await agent_server.aget_info(scope, conversation.pk)
    assert [m.text for m in info["state"].messages] == ["remember me", "Remembered."]

    await agent_server.areset(scope, conversation.pk)
    info = await agent_server.aget_info(scope, conversation.pk)
    assert info["state"].messages == []
    assert await agent_server.aget_status(scope, conversation.pk) == "idle"
    # The transcript stays, with a note that the agent starts afresh; the page
    # hears of it.
    note = await follower.until("display_message_saved")
    assert note["data"]["display_message"]["content"]["reason"] == "reset"
    rows = await sync_to_async(list)(
        DisplayMessage.objects.filter(conversation=conversation.pk).order_by("pk")
    )
    assert [r.content.get("text") for r in rows][:2] == ["remember me", "Remembered."]
    assert rows[-1].content_type == "notification"


async def test_the_chat_pages_reset_is_the_verbs(site: Any) -> None:
    from django.test import Client
    from django.urls import reverse

    site.script(reply("Remembered."))
    scope, conversation = await new_conversation()
    other, _ = await new_conversation("bob")
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "remember me")
    await follower.until("run_finished")
    url = reverse("sagents_django:reset", args=[conversation.pk])

    def post(user: Any, method: str = "post") -> Any:
        client = Client()
        client.force_login(user)
        return getattr(client, method)(url)

    assert (await sync_to_async(post)(other.user)).status_code == 404
    assert (await sync_to_async(post)(scope.user, "get")).status_code == 405
    response = await sync_to_async(post)(scope.user)

    assert response.status_code == 302
    info = await agent_server.aget_info(scope, conversation.pk)
    assert info["state"].messages == []
    page = await sync_to_async(Client)()
    await sync_to_async(page.force_login)(scope.user)
    html = (await sync_to_async(page.get)(response["Location"])).content.decode()
    assert "The agent was reset: it starts afresh from here." in html


@pytest.mark.parametrize(
    "envelope",
    [None, "state", {"version": 99, "state": {}}, {"state": {"messages": "x"}}],
)
async def test_a_state_that_cannot_be_read_is_refused(site: Any, envelope: Any) -> None:
    scope, conversation = await new_conversation()
    with pytest.raises(InvalidInput):
        await agent_server.arestore_state(scope, conversation.pk, envelope)
    assert await agent_server.aexport_state(scope, conversation.pk) is None


async def test_state_cannot_be_replaced_while_a_turn_runs(site: Any) -> None:
    site.script(reply("Slow.", chunks=10, delay=0.05))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "go")
    await follower.until("run_started")

    with pytest.raises(RunConflict):
        await agent_server.areset(scope, conversation.pk)
    await follower.until("run_finished")


async def test_published_events_reach_subscribers_and_bad_ones_are_refused(
    site: Any,
) -> None:
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)

    await agent_server.apublish_event_from(
        scope, conversation.pk, "custom_progress", {"percent": 40}
    )
    event = await follower.until("custom_progress")
    assert event["data"] == {"percent": 40}

    for name, data in [("", {}), ("x" * 65, {}), ("ok", []), ("ok", {"x": 1e400})]:
        with pytest.raises(InvalidInput):
            await agent_server.apublish_event_from(scope, conversation.pk, name, data)


async def test_a_synthetic_message_is_saved_and_announced(site: Any) -> None:
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)

    row = await agent_server.asave_synthetic_message(
        scope,
        conversation.pk,
        {"message_type": "system", "content_type": "text", "content": {"text": "Hi"}},
    )

    event = await follower.until("display_message_saved")
    assert event["data"]["display_message"]["id"] == str(row.pk)
    assert (
        await DisplayMessage.objects.filter(conversation=conversation.pk).acount() == 1
    )
    with pytest.raises(InvalidInput):
        await agent_server.asave_synthetic_message(
            scope, conversation.pk, {"message_type": "robot"}
        )


async def test_running_agents_are_listed_by_scope(site: Any) -> None:
    site.script(reply("Slow.", chunks=10, delay=0.05))
    scope, conversation = await new_conversation()
    other, _ = await new_conversation("bob")
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "go")
    await follower.until("run_started")

    agent_id = f"conversation-{conversation.pk}"
    assert await agent_server.alist_running_agents(scope) == [agent_id]
    assert await agent_server.alist_agents_matching(scope, "conversation-*") == [
        agent_id
    ]
    assert await agent_server.alist_agents_matching(scope, "user-*") == []
    assert await agent_server.aagent_count(scope) == 1
    info = await agent_server.aagent_info(scope, agent_id)
    assert info is not None and info["status"] == "running"
    assert await agent_server.alist_running_agents(other) == []
    assert await agent_server.aagent_info(other, agent_id) is None
    await follower.until("run_finished")
    assert await agent_server.aagent_info(scope, agent_id) is None


async def test_inactivity_follows_runs_viewers_and_touches(
    site: Any, settings: Any
) -> None:
    settings.SAGENTS = {**settings.SAGENTS, "INACTIVITY_TIMEOUT": 1}
    scope, conversation = await new_conversation()
    key = str(conversation.pk)
    await sync_to_async(viewers.add)(key, "specific.test!1")

    status = await agent_server.aget_inactivity_status(scope, conversation.pk)
    assert status["inactivity_timeout"] == 1000
    assert status["timer_active"] is False  # someone is watching

    await sync_to_async(viewers.remove)(key, "specific.test!1")
    status = await agent_server.aget_inactivity_status(scope, conversation.pk)
    assert status["timer_active"] is True
    await agent_server.atouch(scope, conversation.pk)
    assert await agent_server.aget_status(scope, conversation.pk) in ("idle",)
    meta = await agent_server.aget_metadata(scope, conversation.pk)
    assert meta["agent_id"] == f"conversation-{conversation.pk}"
    assert meta["last_activity_at"] is not None


class CountingDisplay(DjangoDisplayMessagePersistence):
    """A site's display persistence: counts what the turns save through it."""

    saved: list[str] = []

    def save_message(self, scope: Any, message: Any, context: Any) -> Any:
        CountingDisplay.saved.append(message.role)
        return super().save_message(scope, message, context)


@pytest.mark.parametrize("site", ["embedded"], indirect=True)
async def test_turns_save_through_the_sites_persistence_classes(
    site: Any, settings: Any
) -> None:
    settings.SAGENTS = {
        **settings.SAGENTS,
        "DISPLAY_PERSISTENCE": f"{__name__}.CountingDisplay",
    }
    CountingDisplay.saved.clear()
    site.script(reply("Counted."))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "hi")
    await follower.until("run_finished")

    assert CountingDisplay.saved == ["assistant"]


async def dead_run(scope: Any, conversation: Any, *, running: bool) -> AgentRun:
    """A run no process holds: never handed to an executor (the broker was down),
    or claimed by a worker that died a minute ago."""
    run = await sync_to_async(services.begin_run)(
        scope,
        conversation.pk,
        trigger="message",
        queued=True,
        metadata={"scope": scope.to_dict(), "messages": [{"text": "lost"}]},
    )
    if running:
        gone = timezone.now() - timedelta(minutes=1)
        await AgentRun.objects.filter(pk=run.pk).aupdate(
            status="running", started_at=gone, heartbeat_at=gone
        )
    return run


@pytest.mark.parametrize("running", [False, True], ids=["never-started", "worker-died"])
async def test_cancel_ends_a_run_no_process_holds_and_the_conversation_goes_on(
    site: Any, running: bool
) -> None:
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    run = await dead_run(scope, conversation, running=running)

    assert await agent_server.acancel(scope, conversation.pk)
    finished = await follower.until("run_finished")

    assert finished["data"]["status"] == "cancelled"
    await run.arefresh_from_db()
    assert run.status == "cancelled"
    [note] = [r async for r in DisplayMessage.objects.filter(conversation=conversation)]
    assert note.content["text"] == "Agent execution cancelled."
    # The conversation is free again.
    site.script(reply("Back."))
    await agent_server.aadd_message(scope, conversation.pk, "hello?")
    assert (await follower.until("run_finished"))["data"]["status"] == "completed"


async def test_cancel_of_a_living_turn_only_asks_it_to_stop(site: Any) -> None:
    site.script(reply("word " * 100, chunks=100, delay=0.02))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    submission = await agent_server.aadd_message(scope, conversation.pk, "talk")
    await follower.until("llm_deltas")

    assert await agent_server.acancel(scope, conversation.pk)
    finished = await follower.until("run_finished")

    assert finished["data"]["run_id"] == submission.run_id
    assert finished["data"]["status"] == "cancelled"
    notes = [
        r
        async for r in DisplayMessage.objects.filter(
            conversation=conversation, message_type="system"
        )
    ]
    assert len(notes) == 1  # the turn's own note, not a second one


async def test_get_agent_and_is_running_answer_for_the_scope_only(site: Any) -> None:
    site.script(reply("Slowly.", chunks=20, delay=0.03))
    scope, conversation = await new_conversation()
    other, _ = await new_conversation("bob")
    follower = await follow(scope, conversation.pk)

    agent = await agent_server.aget_agent(scope, conversation.pk)
    assert agent.agent_id == conversation.agent_id
    assert [t.name for t in agent.tools if t.name == "write_file"] == ["write_file"]
    assert not await agent_server.ais_running(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "hi")
    assert await agent_server.ais_running(scope, conversation.pk)
    await follower.until("run_finished")
    assert not await agent_server.ais_running(scope, conversation.pk)

    for verb in (agent_server.aget_agent, agent_server.ais_running):
        with pytest.raises(NotFound):
            await verb(other, conversation.pk)
        with pytest.raises(InvalidInput):
            await verb(scope, "not-a-uuid")
