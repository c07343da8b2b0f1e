"""Every state of an approval has a way out: messages sent around a pending
approval are kept and answered after it, ``dismiss`` abandons it, and a resumed
sub-agent's approval settles its task card."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sagents_django.exceptions import Conflict, InvalidInput, NotFound
from sagents_django.models import AgentState, DisplayMessage
from sagents_django.runtime import agent_server
from sagents_django.ui import approvals
from tests.fakes.openai_server import reply, tool_call
from tests.runtime import follow as follow_module
from tests.runtime.follow import follow, new_conversation, rows_of, runs_of

pytestmark = pytest.mark.django_db(transaction=True)

site = follow_module.site

SLOW = {"chunks": 20, "delay": 0.03}
WRITE = tool_call("write_file", {"file_path": "/a.txt", "content": "hi"}, id="w1")


def with_settings(settings: Any, **values: Any) -> None:
    settings.SAGENTS = {**settings.SAGENTS, **values}


async def interrupt_of(conversation: Any) -> Any:
    state = await AgentState.objects.aget(conversation_id=conversation.pk)
    return state.state_data["state"].get("interrupt_data")


def sent_texts(request: Any) -> list[Any]:
    return [m.get("content") for m in request.messages if m["role"] != "system"]


# Messages around a pending approval ---------------------------------------------
async def test_a_message_queued_on_a_turn_that_pauses_waits_for_the_decision(
    site: Any,
) -> None:
    """The jam: a message sent during a turn that then paused for approval used to
    start a run at once, which failed and made the approval unanswerable."""
    site.script(
        reply("Let me write it.", tool_calls=[WRITE], **SLOW),
        reply("Written."),
        reply("Second answer."),
    )
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "write it")
    await follower.until("llm_deltas")
    second = await agent_server.aadd_message(scope, conversation.pk, "two")
    paused = await follower.until("run_finished")

    assert second.queued and not second.held
    assert paused["data"]["status"] == "interrupted"
    assert paused["data"]["next_run_id"] is None
    assert await agent_server.aget_status(scope, conversation.pk) == "interrupted"
    assert await interrupt_of(conversation)

    resumed = await agent_server.aresume(scope, conversation.pk, [{"type": "approve"}])
    done = await follower.until("run_finished")
    answered = await follower.until("run_finished")

    assert done["data"]["run_id"] == resumed and done["data"]["status"] == "completed"
    assert answered["data"]["run_id"] == done["data"]["next_run_id"]
    assert answered["data"]["status"] == "completed"
    assert [r.status for r in await runs_of(conversation)] == [
        "interrupted",
        "completed",
        "completed",
    ]
    assert sent_texts(site.requests[2])[-2:] == ["Written.", "two"]
    texts = [r.content.get("text") for r in await rows_of(conversation)]
    assert texts[-1] == "Second answer."


async def test_a_message_sent_while_an_approval_waits_is_held_until_it_is_rejected(
    site: Any,
) -> None:
    site.script(reply(tool_calls=[WRITE]), reply("Not written."), reply("Hi!"))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "write it")
    paused = await follower.until("run_finished")

    held = await agent_server.aadd_message(scope, conversation.pk, "hello?")
    queued = await follower.until("message_queued")

    assert held.held and held.queued and held.run_id == paused["data"]["run_id"]
    assert queued["data"]["waits_for"] == "approval"
    assert len(site.requests) == 1  # nothing ran: the approval still waits
    assert await interrupt_of(conversation)

    await agent_server.aresume(scope, conversation.pk, [{"type": "reject"}])
    await follower.until("run_finished")
    answered = await follower.until("run_finished")

    assert answered["data"]["status"] == "completed"
    assert sent_texts(site.requests[2])[-1] == "hello?"


async def test_a_held_message_survives_a_verb_that_holds_the_conversation_meanwhile(
    site: Any,
) -> None:
    """A notification while the approval waits runs a short run of its own after
    the paused one: the held message is still answered after the decision."""
    site.script(reply(tool_calls=[WRITE]), reply("Written."), reply("Noted."))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "write it")
    await follower.until("run_finished")
    held = await agent_server.aadd_message(scope, conversation.pk, "and then?")
    await agent_server.anotify_middleware(scope, conversation.pk, "notes", {"n": 1})

    resumed = await agent_server.aresume(scope, conversation.pk, [{"type": "approve"}])
    done = await follower.finished(resumed)
    answered = await follower.finished(done["data"]["next_run_id"])

    assert held.held
    assert answered["data"]["status"] == "completed"
    assert sent_texts(site.requests[2])[-1] == "and then?"


async def test_the_dismiss_policy_dismisses_the_approval_and_answers_at_once(
    site: Any, settings: Any
) -> None:
    with_settings(settings, WHILE_APPROVAL_PENDING="dismiss")
    site.script(reply(tool_calls=[WRITE]), reply("Answering the new one."))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "write it")
    await follower.until("run_finished")

    submission = await agent_server.aadd_message(scope, conversation.pk, "never mind")
    answered = await follower.finished(submission.run_id)

    assert not submission.queued and submission.run_id
    assert answered["data"]["status"] == "completed"
    assert not await interrupt_of(conversation)
    rows = await rows_of(conversation)
    notes = [r for r in rows if r.metadata.get("kind") == "approval_dismissed"]
    assert [n.content["text"] for n in notes] == [
        "Approval dismissed: write_file did not run."
    ]
    # The transcript says so before the new message.
    texts = [r.content.get("text") for r in rows if r.content_type == "text"]
    assert texts[-3:] == [
        "Approval dismissed: write_file did not run.",
        "never mind",
        "Answering the new one.",
    ]
    # The model is told the call did not run, then sees the new message.
    tool_messages = [m for m in site.requests[1].messages if m["role"] == "tool"]
    assert tool_messages and tool_messages[0]["tool_call_id"] == "w1"
    assert sent_texts(site.requests[1])[-1] == "never mind"


# Dismiss ----------------------------------------------------------------------------
async def test_dismiss_abandons_the_approval_and_the_conversation_goes_on(
    site: Any,
) -> None:
    site.script(reply(tool_calls=[WRITE]), reply("Fine, no file."))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "write it")
    await follower.until("run_finished")

    assert (await follower.until("status_changed"))["data"]["status"] == "interrupted"
    assert await agent_server.adismiss(scope, conversation.pk) is None
    status = await follower.until("status_changed")

    assert status["data"]["status"] == "idle"
    assert await agent_server.aget_status(scope, conversation.pk) == "idle"
    assert not await interrupt_of(conversation)
    card = await DisplayMessage.objects.aget(
        conversation=conversation.pk, content_type="tool_call", tool_call_id="w1"
    )
    assert card.status == "cancelled"
    assert await sync_to_async(approvals.inbox_count)(scope) == 0

    sent = await agent_server.aadd_message(scope, conversation.pk, "ok then?")
    finished = await follower.finished(sent.run_id)
    assert finished["data"]["status"] == "completed"
    # Every call of the history is answered for the provider.
    tool_messages = [m for m in site.requests[1].messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["w1"]


async def test_dismissing_held_messages_answers_them(site: Any) -> None:
    site.script(reply(tool_calls=[WRITE]), reply("About that message..."))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "write it")
    await follower.until("run_finished")
    await agent_server.aadd_message(scope, conversation.pk, "what now?")

    run_id = await agent_server.adismiss(scope, conversation.pk)
    assert run_id is not None
    finished = await follower.finished(run_id)

    assert finished["data"]["status"] == "completed"
    assert sent_texts(site.requests[1])[-1] == "what now?"


async def test_dismiss_refuses_what_it_cannot_dismiss(site: Any) -> None:
    site.script(reply("Nothing to approve."), reply(tool_calls=[WRITE]))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)

    with pytest.raises(Conflict, match="no approval is pending"):
        await agent_server.adismiss(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "hi")
    await follower.until("run_finished")
    with pytest.raises(Conflict, match="no approval is pending"):
        await agent_server.adismiss(scope, conversation.pk)

    # Another tenant's pending approval is not found, and stays pending.
    await agent_server.aadd_message(scope, conversation.pk, "write it")
    await follower.until("run_finished")
    mallory, _ = await new_conversation("mallory")
    with pytest.raises(NotFound):
        await agent_server.adismiss(mallory, conversation.pk)
    with pytest.raises((InvalidInput, NotFound)):
        await agent_server.adismiss(scope, "not-an-id")
    with pytest.raises(InvalidInput):
        await agent_server.adismiss("alice", conversation.pk)
    assert await interrupt_of(conversation)


# Sub-agents -------------------------------------------------------------------------
async def test_a_resumed_sub_agents_approval_settles_its_task_card(site: Any) -> None:
    site.script(
        reply(
            tool_calls=[
                tool_call(
                    "task",
                    {
                        "instructions": "Write /b.txt.",
                        "subagent_type": "general-purpose",
                    },
                    id="task_1",
                )
            ]
        ),
        reply(
            tool_calls=[
                tool_call("write_file", {"file_path": "/b.txt", "content": "b"})
            ]
        ),
        reply("Sub-agent wrote it."),
        reply("All done."),
    )
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "delegate")
    paused = await follower.until("run_finished")
    assert paused["data"]["status"] == "interrupted"

    await agent_server.aresume(scope, conversation.pk, [{"type": "approve"}])
    finished = await follower.until("run_finished")

    assert finished["data"]["status"] == "completed"
    card = await DisplayMessage.objects.aget(
        conversation=conversation.pk, content_type="tool_call", tool_call_id="task_1"
    )
    result = await DisplayMessage.objects.aget(
        conversation=conversation.pk,
        content_type="tool_result",
        tool_call_id="task_1",
    )
    assert card.status == "completed"
    assert result.status == "completed"
    assert "Sub-agent wrote it." in str(result.content)
