"""Branches: regenerate a reply, edit a person's message, switch between branches.
Real turns with the fake provider on both stacks; the model request of the turn
after a switch holds the shown branch's history, not the other's."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sagents_django import services
from sagents_django.core.limits import MAX_MESSAGE_BYTES
from sagents_django.exceptions import Conflict, InvalidInput, NotFound, RunConflict
from sagents_django.models import AgentState, ConversationBranch
from sagents_django.runtime import agent_server
from tests.fakes.openai_server import reply, tool_call
from tests.runtime import follow as follow_module
from tests.runtime.follow import follow, new_conversation

pytestmark = pytest.mark.django_db(transaction=True)

site = follow_module.site

TODO = tool_call(
    "write_todos",
    {"todos": [{"content": "Book the hotel", "status": "pending"}]},
    id="t1",
)
TODO_2 = tool_call(
    "write_todos",
    {"todos": [{"content": "Pack the bags", "status": "pending"}]},
    id="t2",
)


def sent_texts(request: Any) -> list[Any]:
    return [m.get("content") for m in request.messages if m["role"] != "system"]


async def shown(scope: Any, conversation: Any) -> list[tuple[str, str]]:
    rows = await sync_to_async(services.load_display_messages)(scope, conversation.pk)
    return [
        (r.message_type, r.content.get("text"))
        for r in rows
        if r.content_type == "text"
    ]


async def row_with(scope: Any, conversation: Any, text: str) -> Any:
    rows = await sync_to_async(services.load_display_messages)(scope, conversation.pk)
    return next(r for r in rows if r.content.get("text") == text)


async def todos_of(conversation: Any) -> list[str]:
    row = await AgentState.objects.aget(conversation_id=conversation.pk)
    return [t["content"] for t in row.state_data["state"].get("todos", [])]


async def two_turns(site: Any) -> tuple[Any, Any, Any]:
    site.script(
        reply("Planning.", tool_calls=[TODO]),
        reply("Paris is nice in May."),
        reply("Packing.", tool_calls=[TODO_2]),
        reply("Lyon too."),
    )
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "Paris in May?")
    await follower.until("run_finished")
    await agent_server.aadd_message(scope, conversation.pk, "And Lyon?")
    await follower.until("run_finished")
    return scope, conversation, follower


async def test_regenerate_makes_a_sibling_reply_and_switching_back_restores_the_agent(
    site: Any,
) -> None:
    scope, conversation, follower = await two_turns(site)
    first = await shown(scope, conversation)
    lyon = await row_with(scope, conversation, "Lyon too.")
    assert await todos_of(conversation) == ["Pack the bags"]

    site.script(reply("Lyon is lovely in June."))
    submission = await agent_server.aregenerate(scope, conversation.pk, lyon.pk)
    await follower.finished(submission.run_id)

    # The question is shared, the new reply replaces the old one in the branch.
    regenerated = await shown(scope, conversation)
    assert regenerated == [
        *first[: first.index(("user", "And Lyon?")) + 1],
        ("assistant", "Lyon is lovely in June."),
    ]
    # The model was asked again with the history up to the question only.
    sent = sent_texts(site.requests[-1])
    assert sent[-1] == "And Lyon?" and "Lyon too." not in sent
    # The todos are those of the branch point (the second turn's are gone).
    assert await todos_of(conversation) == ["Book the hotel"]
    assert "branch_switched" in follower.names()

    # Back to the first reply: its transcript and its agent state.
    new_reply = await row_with(scope, conversation, "Lyon is lovely in June.")
    number = await agent_server.aswitch_branch(scope, conversation.pk, new_reply.pk, 1)
    assert number == 0
    assert await shown(scope, conversation) == first
    assert await todos_of(conversation) == ["Pack the bags"]

    # The next turn continues from the branch shown, not the other.
    site.script(reply("Nice is by the sea."))
    await agent_server.aadd_message(scope, conversation.pk, "And Nice?")
    await follower.until("run_finished")
    sent = sent_texts(site.requests[-1])
    assert "Lyon too." in sent and "Lyon is lovely in June." not in sent
    assert sent[-1] == "And Nice?"

    # And to the second again: the regenerated reply, without Nice.
    # (the point shows on the first row after the question: "Packing.")
    packing = await row_with(scope, conversation, "Packing.")
    number = await agent_server.aswitch_branch(scope, conversation.pk, packing.pk, 2)
    assert number == 1
    texts = [t for _, t in await shown(scope, conversation)]
    assert "Lyon is lovely in June." in texts and "And Nice?" not in texts
    site.script(reply("Marseille is warm."))
    await agent_server.aadd_message(scope, conversation.pk, "And Marseille?")
    await follower.until("run_finished")
    sent = sent_texts(site.requests[-1])
    assert "Lyon is lovely in June." in sent
    assert "Lyon too." not in sent and "And Nice?" not in sent


async def test_editing_a_message_branches_and_both_versions_stay(site: Any) -> None:
    scope, conversation, follower = await two_turns(site)
    question = await row_with(scope, conversation, "And Lyon?")

    site.script(reply("Bordeaux has wine."))
    submission = await agent_server.aedit_and_resend(
        scope, conversation.pk, question.pk, "And Bordeaux?"
    )
    assert submission.message_ids and not submission.queued
    await follower.finished(submission.run_id)

    texts = [t for _, t in await shown(scope, conversation)]
    assert texts == [
        "Paris in May?",
        "Planning.",
        "Paris is nice in May.",
        "And Bordeaux?",
        "Bordeaux has wine.",
    ]
    sent = sent_texts(site.requests[-1])
    assert sent[-1] == "And Bordeaux?" and "And Lyon?" not in sent
    assert "Paris is nice in May." in sent

    # The edited message shows 2 / 2; the old one is 1 / 2.
    edited = await row_with(scope, conversation, "And Bordeaux?")
    assert await agent_server.aswitch_branch(scope, conversation.pk, edited.pk, 1) == 0
    texts = [t for _, t in await shown(scope, conversation)]
    assert texts[-3:] == ["And Lyon?", "Packing.", "Lyon too."]
    every = await sync_to_async(services.load_display_messages)(
        scope, conversation.pk, all_branches=True
    )
    assert {"And Lyon?", "And Bordeaux?"} <= {r.content.get("text") for r in every}


async def test_editing_the_first_message_starts_afresh(site: Any) -> None:
    scope, conversation, follower = await two_turns(site)
    first = await row_with(scope, conversation, "Paris in May?")

    site.script(reply("Rome is old."))
    submission = await agent_server.aedit_and_resend(
        scope, conversation.pk, first.pk, "Rome?"
    )
    await follower.finished(submission.run_id)

    assert [t for _, t in await shown(scope, conversation)] == ["Rome?", "Rome is old."]
    assert sent_texts(site.requests[-1]) == ["Rome?"]
    assert await todos_of(conversation) == []
    # Edit again from the branch: a third alternative at the same point.
    rome = await row_with(scope, conversation, "Rome?")
    site.script(reply("Oslo is cold."))
    submission = await agent_server.aedit_and_resend(
        scope, conversation.pk, rome.pk, "Oslo?"
    )
    await follower.finished(submission.run_id)
    oslo = await row_with(scope, conversation, "Oslo?")
    assert await agent_server.aswitch_branch(scope, conversation.pk, oslo.pk, 2) == 1
    assert next(t for _, t in await shown(scope, conversation)) == "Rome?"
    assert (
        await ConversationBranch.objects.filter(
            conversation_id=conversation.pk
        ).acount()
        == 3
    )


async def test_branching_is_refused_while_a_turn_runs_or_an_approval_waits(
    site: Any,
) -> None:
    scope, conversation, _follower = await two_turns(site)
    lyon = await row_with(scope, conversation, "Lyon too.")
    await sync_to_async(
        AgentState.objects.filter(conversation_id=conversation.pk).update
    )(
        state_data={
            "version": 1,
            "state": {"messages": [], "interrupt_data": {"action_requests": []}},
        }
    )
    with pytest.raises(Conflict, match="approval"):
        await agent_server.aregenerate(scope, conversation.pk, lyon.pk)


async def test_bad_ids_and_another_tenant_s_are_refused(site: Any) -> None:
    scope, conversation, _ = await two_turns(site)
    other_scope, other = await new_conversation("bob")
    lyon = await row_with(scope, conversation, "Lyon too.")
    question = await row_with(scope, conversation, "And Lyon?")

    # Another tenant's conversation and rows: not found, whatever the verb.
    with pytest.raises(NotFound):
        await agent_server.aregenerate(other_scope, conversation.pk, lyon.pk)
    with pytest.raises(NotFound):
        await agent_server.aedit_and_resend(
            other_scope, conversation.pk, question.pk, "x"
        )
    with pytest.raises(NotFound):
        await agent_server.aswitch_branch(other_scope, conversation.pk, lyon.pk, 1)
    # A row of another conversation is not found in this one.
    with pytest.raises(NotFound):
        await agent_server.aregenerate(other_scope, other.pk, lyon.pk)
    for bad in ("abc", -1, 0, 2**70, True, None, "9" * 40, 1.5):
        with pytest.raises(InvalidInput):
            await agent_server.aregenerate(scope, conversation.pk, bad)
    with pytest.raises(InvalidInput):
        await agent_server.aedit_and_resend(
            scope, conversation.pk, question.pk, "x" * (MAX_MESSAGE_BYTES + 1)
        )
    with pytest.raises(InvalidInput):
        await agent_server.aedit_and_resend(scope, conversation.pk, question.pk, "  ")
    # Regenerating a person's message, editing a reply: wrong kind of row.
    with pytest.raises(InvalidInput):
        await agent_server.aregenerate(scope, conversation.pk, question.pk)
    with pytest.raises(InvalidInput):
        await agent_server.aedit_and_resend(scope, conversation.pk, lyon.pk, "x")
    # No branch point there yet; an index out of range.
    with pytest.raises(InvalidInput):
        await agent_server.aswitch_branch(scope, conversation.pk, lyon.pk, 1)
    for index in (0, 3, "x", None):
        with pytest.raises(InvalidInput):
            await agent_server.aswitch_branch(scope, conversation.pk, lyon.pk, index)
    # Nothing changed.
    assert not await ConversationBranch.objects.filter(
        conversation_id=conversation.pk
    ).aexists()


async def test_a_row_of_a_branch_not_shown_is_refused_as_out_of_date(
    site: Any,
) -> None:
    scope, conversation, follower = await two_turns(site)
    lyon = await row_with(scope, conversation, "Lyon too.")
    site.script(reply("Lyon again."))
    submission = await agent_server.aregenerate(scope, conversation.pk, lyon.pk)
    await follower.finished(submission.run_id)
    with pytest.raises(InvalidInput, match="not in the branch shown"):
        await agent_server.aregenerate(scope, conversation.pk, lyon.pk)


async def test_a_running_turn_refuses_every_branch_verb(site: Any) -> None:
    scope, conversation, _ = await two_turns(site)
    lyon = await row_with(scope, conversation, "Lyon too.")
    question = await row_with(scope, conversation, "And Lyon?")
    # A run holding the conversation (as a turn that has not ended does).
    run = await sync_to_async(services.begin_run)(scope, conversation.pk)
    try:
        with pytest.raises(RunConflict):
            await agent_server.aregenerate(scope, conversation.pk, lyon.pk)
        with pytest.raises(RunConflict):
            await agent_server.aedit_and_resend(
                scope, conversation.pk, question.pk, "x"
            )
        with pytest.raises(RunConflict):
            await agent_server.aswitch_branch(scope, conversation.pk, lyon.pk, 1)
    finally:
        await sync_to_async(services.discard_run)(scope, run.pk)
    assert await shown(scope, conversation) == [
        ("user", "Paris in May?"),
        ("assistant", "Planning."),
        ("assistant", "Paris is nice in May."),
        ("user", "And Lyon?"),
        ("assistant", "Packing."),
        ("assistant", "Lyon too."),
    ]


async def test_the_socket_regenerates_switches_and_announces_the_branch_shown(
    site: Any,
) -> None:
    from tests.runtime.ws_client import connect

    scope, conversation, _ = await two_turns(site)
    lyon = await row_with(scope, conversation, "Lyon too.")
    packing = await row_with(scope, conversation, "Packing.")
    cid = str(conversation.pk)
    sock = await connect(scope.user)
    await sock.send("subscribe", conversation=cid)

    site.script(reply("Lyon again."))
    regenerated = await sock.send("regenerate", conversation=cid, message_id=lyon.pk)
    switched = await sock.event("branch_switched", cid)
    await sock.event("run_finished", cid)
    bad = await sock.send(
        "switch_branch", conversation=cid, message_id=packing.pk, index=1
    )
    again = await sock.send("regenerate", conversation=cid, message_id="x")
    history = await sock.send("history", conversation=cid)
    await sock.disconnect()

    assert regenerated["ok"] is True and regenerated["run_id"]
    assert switched["data"] == {"reason": "regenerate", "message_id": lyon.pk}
    # The old reply's first row is in the branch not shown: out of date.
    assert bad["ok"] is False and bad["error"]["code"] == "invalid_input"
    assert again["ok"] is False and again["error"]["code"] == "invalid_input"
    texts = [m["content"].get("text") for m in history["messages"]]
    assert "Lyon again." in texts and "Lyon too." not in texts
