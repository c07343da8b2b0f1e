"""A tool's queued message (``ToolContext.queue_message``) is answered by the next
turn, as a message a person sends during a turn is, on both stacks."""

from __future__ import annotations

from typing import Any

import pytest

from sagents_django.runtime import agent_server
from tests.fakes.openai_server import reply, tool_call
from tests.runtime import follow as follow_module
from tests.runtime.follow import follow, new_conversation, rows_of

pytestmark = pytest.mark.django_db(transaction=True)

site = follow_module.site


def playbook(text: str, *, display: bool, call_id: str) -> Any:
    return tool_call("playbook", {"text": text, "display": display}, id=call_id)


async def test_queued_messages_are_answered_by_the_next_turn(site: Any) -> None:
    site.script(
        reply(
            tool_calls=[
                playbook("Follow the refunds playbook.", display=False, call_id="p1"),
                playbook("And thank them.", display=True, call_id="p2"),
            ]
        ),
        reply("Loaded the playbook."),
        reply("Following it now."),
    )
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)

    first = await agent_server.aadd_message(scope, conversation.pk, "A refund, please")
    queued = await follower.until("message_queued")
    done = await follower.until("run_finished")
    second = await follower.until("run_finished")

    assert done["data"]["run_id"] == first.run_id
    assert done["data"]["next_run_id"] == second["data"]["run_id"]
    assert (second["data"]["trigger"], second["data"]["status"]) == (
        "queued",
        "completed",
    )
    assert queued["data"]["policy"] == "tool"
    assert queued["data"]["display_message"]["content"]["text"] == "And thank them."
    # The first turn never read them; the next one reads both, in order.
    assert len(site.requests) == 3
    first_texts = [m.get("content") for m in site.requests[1].messages]
    assert "Follow the refunds playbook." not in first_texts
    users = [m["content"] for m in site.requests[2].messages if m["role"] == "user"]
    assert users[-2:] == ["Follow the refunds playbook.", "And thank them."]
    # The transcript shows only the one queued with display=True, as a user row
    # naming its tool and the run that answered it.
    shown = [r for r in await rows_of(conversation) if r.message_type == "user"]
    assert [r.content["text"] for r in shown] == ["A refund, please", "And thank them."]
    assert shown[1].metadata["queued_by_tool"] == "playbook"
    assert str(shown[1].run_id) == second["data"]["run_id"]


async def test_a_message_queued_before_an_approval_waits_for_the_decision(
    site: Any,
) -> None:
    site.script(
        reply(tool_calls=[playbook("Next: tidy up.", display=True, call_id="p1")]),
        reply(
            tool_calls=[tool_call("write_file", {"file_path": "/a", "content": "x"})]
        ),
        reply("Written."),
        reply("Tidied."),
    )
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)

    await agent_server.aadd_message(scope, conversation.pk, "Write it")
    paused = await follower.until("run_finished")
    assert paused["data"]["status"] == "interrupted"
    assert paused["data"]["next_run_id"] is None
    assert len(site.requests) == 2

    await agent_server.aresume(scope, conversation.pk, [{"type": "approve"}])
    await follower.until("run_finished")
    last = await follower.until("run_finished")

    assert last["data"]["status"] == "completed"
    users = [m["content"] for m in site.requests[3].messages if m["role"] == "user"]
    assert users[-1] == "Next: tidy up."
