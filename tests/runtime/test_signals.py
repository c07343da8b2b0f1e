"""The lifecycle signals (Sagents' Persistence.Hooks): each once, after commit.

Signals are sent in the process that runs the turn (a Celery worker in production,
where a site's receivers are registered too by its AppConfig), so these tests run
turns in this process: the embedded stack.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction

from sagents_django import signals
from sagents_django.models import DisplayMessage
from sagents_django.runtime import agent_server
from sagents_django.runtime.executors import wait_inline
from tests.fakes.openai_server import fault, reply, tool_call
from tests.runtime import follow as follow_module
from tests.runtime.follow import new_conversation

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.parametrize("site", ["embedded"], indirect=True),
]

site = follow_module.site

NAMES = (
    "message_received",
    "agent_response",
    "status_changed",
    "run_finished",
    "interrupt_raised",
    "title_generated",
)


class Received:
    """Every signal sent, with whether a transaction was open at the time."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def receiver(self, name: str) -> Any:
        def receive(sender: Any, **kwargs: Any) -> None:
            kwargs.pop("signal", None)
            in_transaction = transaction.get_connection().in_atomic_block
            self.calls.append((name, {**kwargs, "in_transaction": in_transaction}))

        return receive

    def named(self, name: str) -> list[dict[str, Any]]:
        return [kwargs for n, kwargs in self.calls if n == name]


async def turns_end() -> None:
    """Wait for the turn (and its last signals) to end."""
    assert await asyncio.to_thread(wait_inline, 30)


@pytest.fixture
def received() -> Iterator[Received]:
    record = Received()
    receivers = [(getattr(signals, n), record.receiver(n)) for n in NAMES]
    for signal, receiver in receivers:
        signal.connect(receiver, weak=False)
    try:
        yield record
    finally:
        for signal, receiver in receivers:
            signal.disconnect(receiver)


async def test_a_turn_sends_each_signal_once_after_commit(
    site: Any, received: Received
) -> None:
    site.script(reply("Hello.", usage=(12, 3), include_usage=True))
    scope, conversation = await new_conversation()

    submission = await agent_server.aadd_message(scope, conversation.pk, "Hi")
    await turns_end()

    assert [name for name, _ in received.calls] == [
        "message_received",
        "status_changed",
        "agent_response",
        "status_changed",
        "run_finished",
    ]
    assert not any(kwargs["in_transaction"] for _, kwargs in received.calls)
    [message] = received.named("message_received")
    [row_id] = message["display_message_ids"]
    assert await DisplayMessage.objects.filter(pk=row_id).aexists()
    assert [s["status"] for s in received.named("status_changed")] == [
        "running",
        "idle",
    ]
    [response] = received.named("agent_response")
    assert response["message"]["content"][0]["content"] == "Hello."
    [finished] = received.named("run_finished")
    assert finished["run_id"] == submission.run_id
    assert finished["status"] == "completed"
    assert finished["usage"]["input"] == 12


async def test_an_approval_sends_interrupt_raised_and_its_resume_a_response(
    site: Any, received: Received
) -> None:
    site.script(
        reply(
            tool_calls=[tool_call("write_file", {"file_path": "/a", "content": "x"})]
        ),
        reply("Written."),
    )
    scope, conversation = await new_conversation()
    await agent_server.aadd_message(scope, conversation.pk, "write")
    await turns_end()

    [interrupt] = received.named("interrupt_raised")
    requests = interrupt["interrupt_data"]["action_requests"]
    assert [r["tool_name"] for r in requests] == ["write_file"]
    assert received.named("agent_response") == []

    await agent_server.aresume(scope, conversation.pk, [{"type": "approve"}])
    await turns_end()

    assert len(received.named("interrupt_raised")) == 1
    assert len(received.named("agent_response")) == 1
    assert [f["status"] for f in received.named("run_finished")] == [
        "interrupted",
        "completed",
    ]


async def test_a_failed_turn_finishes_with_its_error_and_no_response(
    site: Any, received: Received
) -> None:
    site.script(fault.http(500, message="upstream broke"))
    scope, conversation = await new_conversation()
    await agent_server.aadd_message(scope, conversation.pk, "hi")
    await turns_end()

    [finished] = received.named("run_finished")
    assert finished["status"] == "error" and "upstream broke" in finished["error"]
    assert received.named("agent_response") == []
    assert [s["status"] for s in received.named("status_changed")][-1] == "error"
