"""Approvals over AG-UI: a paused run ends with an interrupt outcome (one interrupt
per action request, a response schema from the tool's), and ``resume[]`` answers it
through the same checks as every other client."""

from __future__ import annotations

from typing import Any

import pytest

from sagents_django.models import AgentState
from tests.agui.client import parse_sse, run_input
from tests.agui.test_runs import post_run, signed_in
from tests.fakes.openai_server import reply, tool_call
from tests.runtime import follow as follow_module
from tests.runtime.follow import new_conversation

pytestmark = pytest.mark.django_db(transaction=True)

site = follow_module.site

WRITE = tool_call("write_file", {"file_path": "/a.txt", "content": "hi"}, id="w1")


async def paused(site: Any) -> tuple[Any, Any, Any, dict[str, Any]]:
    site.script(reply("Let me write it.", tool_calls=[WRITE]), reply("Written."))
    scope, conversation = await new_conversation()
    client = await signed_in(scope)
    status, text = await post_run(client, run_input(str(conversation.pk), "Write"))
    assert status == 200, text
    return scope, conversation, client, parse_sse(text)[-1].event


async def test_a_paused_run_ends_with_one_interrupt_per_action_request(
    site: Any,
) -> None:
    _, _, _, finished = await paused(site)

    assert finished["type"] == "RUN_FINISHED"
    outcome = finished["outcome"]
    assert outcome["type"] == "interrupt"
    [interrupt] = outcome["interrupts"]
    assert interrupt["id"] == interrupt["toolCallId"] == "w1"
    assert interrupt["reason"] == "tool_approval"
    schemas = interrupt["responseSchema"]["oneOf"]
    kinds = [s["properties"]["type"]["const"] for s in schemas]
    assert kinds == list(interrupt["metadata"]["sagents"]["allowedDecisions"])
    assert interrupt["metadata"]["sagents"]["argumentsHash"]
    edit = next(s for s in schemas if s["properties"]["type"]["const"] == "edit")
    # The edit's arguments are described by the tool's own JSON schema.
    assert "file_path" in edit["properties"]["arguments"]["properties"]


async def test_resume_entries_answer_the_interrupt_and_the_run_goes_on(
    site: Any,
) -> None:
    _, conversation, client, _ = await paused(site)
    body = run_input(
        str(conversation.pk),
        resume=[
            {"interruptId": "w1", "status": "resolved", "payload": {"approved": True}}
        ],
    )

    status, text = await post_run(client, body)

    assert status == 200, text
    events = parse_sse(text)
    assert events[-1].event["outcome"] == {"type": "success"}
    assert any(
        e.event["type"] == "TOOL_CALL_RESULT" and e.event["toolCallId"] == "w1"
        for e in events
    )
    assert not any(e.event.get("name") == "sagents.approval_decided" for e in events)
    state = await AgentState.objects.aget(conversation_id=conversation.pk)
    assert not state.state_data["state"].get("interrupt_data")


async def test_a_decision_the_request_does_not_allow_is_refused_and_changes_nothing(
    site: Any,
) -> None:
    _, conversation, client, _ = await paused(site)
    bad = [
        [{"interruptId": "nope", "status": "resolved", "payload": {"type": "approve"}}],
        [{"interruptId": "w1", "status": "resolved", "payload": {"type": "explode"}}],
        [  # approved on other arguments than the request's (a stale view)
            {
                "interruptId": "w1",
                "status": "resolved",
                "payload": {"approved": True},
                "metadata": {"argumentsHash": "0" * 64},
            }
        ],
        [
            {"interruptId": "w1", "status": "resolved", "payload": {"approved": True}},
            {"interruptId": "w1", "status": "resolved", "payload": {"approved": True}},
        ],
    ]
    for entries in bad:
        status, text = await post_run(
            client, run_input(str(conversation.pk), resume=entries)
        )
        assert status == 422, text

    state = await AgentState.objects.aget(conversation_id=conversation.pk)
    assert state.state_data["state"]["interrupt_data"]


async def test_resume_with_nothing_pending_is_a_conflict(site: Any) -> None:
    site.script(reply("Hello."))
    scope, conversation = await new_conversation()
    client = await signed_in(scope)
    await post_run(client, run_input(str(conversation.pk), "Hi"))
    body = run_input(
        str(conversation.pk),
        resume=[
            {"interruptId": "w1", "status": "resolved", "payload": {"approved": True}}
        ],
    )

    status, text = await post_run(client, body)

    assert status == 409, text


async def test_cancelling_every_interrupt_dismisses_the_approval(site: Any) -> None:
    _, conversation, client, _ = await paused(site)
    body = run_input(
        str(conversation.pk), resume=[{"interruptId": "w1", "status": "cancelled"}]
    )

    status, text = await post_run(client, body)

    assert status == 200, text
    assert parse_sse(text)[-1].event["outcome"] == {"type": "success"}
    state = await AgentState.objects.aget(conversation_id=conversation.pk)
    assert not state.state_data["state"].get("interrupt_data")
