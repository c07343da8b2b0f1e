"""Forks (upstream Sagents v0.15 ``Sagents.Fork``): a new conversation from another's
history, cut at a turn; what it copies, that its next turn continues from the cut,
that the source is untouched, and what a busy source forks to."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sagents_django import services
from sagents_django.exceptions import InvalidInput, NotFound
from sagents_django.models import AgentState
from sagents_django.runtime import agent_server
from tests.fakes.openai_server import reply, tool_call
from tests.runtime import follow as follow_module
from tests.runtime.follow import follow, new_conversation, rows_of

pytestmark = pytest.mark.django_db(transaction=True)

site = follow_module.site

WRITE = tool_call("write_file", {"file_path": "/a.txt", "content": "hi"}, id="w1")
TODO = tool_call(
    "write_todos",
    {"todos": [{"content": "Book the hotel", "status": "pending"}]},
    id="t1",
)


def sent_texts(request: Any) -> list[Any]:
    return [m.get("content") for m in request.messages if m["role"] != "system"]


async def state_of(conversation_id: Any) -> dict[str, Any]:
    row = await AgentState.objects.aget(conversation_id=conversation_id)
    return dict(row.state_data["state"])


async def texts(conversation_id: Any) -> list[Any]:
    return [
        (r.message_type, r.content_type, r.content.get("text"))
        for r in await rows_of(type("C", (), {"pk": conversation_id}))
    ]


async def two_turns(site: Any) -> tuple[Any, Any, Any]:
    """Alice's conversation of two finished turns (the first wrote a todo)."""
    site.script(
        reply("Planning.", tool_calls=[TODO]),
        reply("Paris is nice in May."),
        reply("Lyon too."),
    )
    scope, conversation = await new_conversation()
    await sync_to_async(services.update_conversation)(
        scope, conversation.pk, title="Trip"
    )
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "Paris in May?")
    await follower.until("run_finished")
    await agent_server.aadd_message(scope, conversation.pk, "And Lyon?")
    await follower.until("run_finished")
    return scope, conversation, follower


async def test_a_fork_from_the_first_turn_copies_it_and_continues_from_there(
    site: Any,
) -> None:
    scope, conversation, _ = await two_turns(site)
    rows = await rows_of(conversation)
    first_reply = next(
        r for r in rows if r.content.get("text") == "Paris is nice in May."
    )
    before_state = await state_of(conversation.pk)
    before_rows = await texts(conversation.pk)

    new = await agent_server.afork(scope, conversation.pk, at_message=first_reply.pk)

    assert new.pk != conversation.pk and new.title == "Fork of Trip"
    assert new.metadata["forked_from"] == {
        "conversation_id": str(conversation.pk),
        "message_id": first_reply.pk,
    }
    forked = await state_of(new.pk)
    # The messages of the first turn, whole (its tool call answered); no todos,
    # no metadata, no interrupt (upstream's defaults).
    roles = [m["role"] for m in forked["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert forked["todos"] == [] and forked["metadata"] == {}
    assert not forked.get("interrupt_data")
    assert before_state["todos"]  # the source had one
    # The transcript up to the end of the first turn, with the note.
    copied = await texts(new.pk)
    assert copied[: len(copied) - 1] == [
        t for t in before_rows[: before_rows.index(("user", "text", "And Lyon?"))]
    ]
    assert copied[-1][1] == "notification" and "Trip" in copied[-1][2]
    # Its files are the source's, not copied: the note says so.
    assert "Its files stay with “Trip”" in copied[-1][2]
    # The copies keep their times: the order is the source's.
    copies = await rows_of(new)
    originals = await rows_of(conversation)
    assert [c.inserted_at for c in copies[:-1]] == [
        o.inserted_at for o in originals[: len(copies) - 1]
    ]
    # The source is untouched.
    assert await state_of(conversation.pk) == before_state
    assert await texts(conversation.pk) == before_rows

    # The fork's next turn continues from the cut: the second turn is not sent.
    follower = await follow(scope, new.pk)
    await agent_server.aadd_message(scope, new.pk, "What about Nice?")
    await follower.until("run_finished")
    sent = sent_texts(site.requests[-1])
    assert "Paris in May?" in sent and "Paris is nice in May." in sent
    assert "And Lyon?" not in sent and "Lyon too." not in sent
    assert sent[-1] == "What about Nice?"
    assert await state_of(conversation.pk) == before_state


async def test_a_fork_from_a_person_s_message_keeps_the_answer_of_its_turn(
    site: Any,
) -> None:
    scope, conversation, _ = await two_turns(site)
    rows = await rows_of(conversation)
    question = next(r for r in rows if r.content.get("text") == "Paris in May?")

    new = await agent_server.afork(scope, conversation.pk, at_message=question.pk)

    copied = [t for _, _, t in await texts(new.pk)]
    assert "Paris is nice in May." in copied and "And Lyon?" not in copied


async def test_a_fork_with_no_point_takes_every_finished_turn(site: Any) -> None:
    scope, conversation, _ = await two_turns(site)

    new = await agent_server.afork(scope, conversation.pk, title="Mine")

    assert new.title == "Mine"
    forked = await state_of(new.pk)
    assert [m["role"] for m in forked["messages"]][-2:] == ["user", "assistant"]
    assert (await texts(new.pk))[-2][2] == "Lyon too."


async def test_forking_while_an_approval_waits_cuts_before_the_paused_turn(
    site: Any,
) -> None:
    site.script(reply("Hello."), reply("Let me write it.", tool_calls=[WRITE]))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "hi")
    await follower.until("run_finished")
    await agent_server.aadd_message(scope, conversation.pk, "write it")
    paused = await follower.until("run_finished")
    assert paused["data"]["status"] == "interrupted"
    last = (await rows_of(conversation))[-1]

    new = await agent_server.afork(scope, conversation.pk, at_message=last.pk)

    forked = await state_of(new.pk)
    assert [m["role"] for m in forked["messages"]] == ["user", "assistant"]
    assert not forked.get("interrupt_data")
    copied = [t for _, _, t in await texts(new.pk)]
    assert "Hello." in copied and "write it" not in copied
    assert await agent_server.aget_status(scope, new.pk) == "idle"
    # The source still waits for its decision.
    assert await agent_server.aget_status(scope, conversation.pk) == "interrupted"
    assert (await state_of(conversation.pk))["interrupt_data"]


async def test_forking_while_a_turn_runs_cuts_before_it(site: Any) -> None:
    site.script(reply("Hello."), reply("Slow " * 20, chunks=20, delay=0.05))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "hi")
    await follower.until("run_finished")
    await agent_server.aadd_message(scope, conversation.pk, "go on")
    await follower.until("llm_deltas")

    new = await agent_server.afork(scope, conversation.pk)

    forked = await state_of(new.pk)
    assert [m["role"] for m in forked["messages"]] == ["user", "assistant"]
    copied = [t for _, _, t in await texts(new.pk)]
    assert "Hello." in copied and "go on" not in copied
    finished = await follower.until("run_finished")
    assert finished["data"]["status"] == "completed"


async def test_a_point_the_agent_no_longer_remembers_is_refused(site: Any) -> None:
    scope, conversation, _ = await two_turns(site)
    first = (await rows_of(conversation))[0]
    await agent_server.areset(scope, conversation.pk)
    site.script(reply("Fresh."))
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "again")
    await follower.until("run_finished")

    with pytest.raises(InvalidInput, match="no longer remembers"):
        await agent_server.afork(scope, conversation.pk, at_message=first.pk)
    # A point after the reset forks.
    new = await agent_server.afork(scope, conversation.pk)
    forked = await state_of(new.pk)
    assert [m["role"] for m in forked["messages"]] == ["user", "assistant"]


async def test_another_tenant_s_conversation_or_row_is_not_found(site: Any) -> None:
    scope, conversation, _ = await two_turns(site)
    bob, bobs = await new_conversation("bob")
    row = (await rows_of(conversation))[0]
    count = await services.conversation_model().objects.acount()

    with pytest.raises(NotFound):
        await agent_server.afork(bob, conversation.pk)
    with pytest.raises(NotFound):
        await agent_server.afork(bob, bobs.pk, at_message=row.pk)
    with pytest.raises(InvalidInput):
        await agent_server.afork(scope, conversation.pk, at_message="1")
    with pytest.raises(InvalidInput):
        await agent_server.afork(scope, conversation.pk, title=["x"])
    assert await services.conversation_model().objects.acount() == count
