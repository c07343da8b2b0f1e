"""The sweeper gets runs nobody runs going again (on the embedded stack here; the
two-worker takeovers are in ``test_durability``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from sagents_django import services
from sagents_django.core import Message
from sagents_django.models import AgentRun, AgentState, DisplayMessage
from sagents_django.runtime.sweeper import sweep_once
from tests.fakes.openai_server import reply
from tests.runtime import follow as follow_module
from tests.runtime.follow import follow, new_conversation

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.parametrize("site", ["embedded"], indirect=True),
]

site = follow_module.site
LONG_AGO = timedelta(minutes=5)


async def orphan(scope: Any, conversation: Any, **fields: Any) -> AgentRun:
    """A run its executor never got, or whose worker died: no process holds it."""
    run = await sync_to_async(services.begin_run)(
        scope,
        conversation.pk,
        trigger="message",
        queued=True,
        metadata={"scope": scope.to_dict(), "messages": [{"text": "lost?"}]},
    )
    gone = timezone.now() - LONG_AGO
    await AgentRun.objects.filter(pk=run.pk).aupdate(
        created_at=gone, submitted_at=gone, **fields
    )
    return run


async def test_a_queued_run_whose_task_was_lost_is_handed_over_again(site: Any) -> None:
    site.script(reply("Found you."))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    run = await orphan(scope, conversation)

    swept = await sweep_once()
    finished = await follower.until("run_finished")

    assert swept.resubmitted == 1
    assert finished["data"]["status"] == "completed"
    await run.arefresh_from_db()
    assert (run.status, run.attempts) == ("completed", 1)


async def test_a_run_whose_worker_died_is_taken_over(site: Any) -> None:
    site.script(reply("Back."))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    gone = timezone.now() - LONG_AGO
    run = await orphan(
        scope, conversation, status="running", heartbeat_at=gone, attempts=1
    )

    swept = await sweep_once()
    finished = await follower.until("run_finished")

    assert swept.requeued == 1
    assert finished["data"]["status"] == "completed"
    await run.arefresh_from_db()
    assert (run.status, run.attempts) == ("completed", 2)
    state = await AgentState.objects.aget(conversation=conversation)
    texts = [Message.from_dict(m).text for m in state.state_data["state"]["messages"]]
    assert texts == ["lost?", "Back."]  # the message, once


async def test_a_run_out_of_attempts_ends_as_an_error_that_says_why(site: Any) -> None:
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    gone = timezone.now() - LONG_AGO
    run = await orphan(
        scope,
        conversation,
        status="running",
        heartbeat_at=gone,
        attempts=3,
        lease_owner="web-1:4242:abc",
    )

    swept = await sweep_once()
    finished = await follower.until("run_finished")

    assert swept.ended == 1
    assert finished["data"]["status"] == "error"
    await run.arefresh_from_db()
    assert run.status == "error" and "stopped 3 times" in run.error
    assert "web-1:4242:abc" in run.error
    note = await DisplayMessage.objects.filter(conversation=conversation).alast()
    assert note is not None and note.content["error_type"] == "worker_lost"
    # Nothing left to sweep: a second sweeper finds nothing.
    again = await sweep_once()
    assert (again.requeued, again.ended, again.resubmitted) == (0, 0, 0)
