"""A runtime turn as OpenTelemetry spans: the turn (its run, conversation, agent,
trigger, attempt and outcome), its model and tool calls, and a sub-agent's spans
under the task call that ran it, all in one trace and all carrying the run id.

The embedded stack only: a Celery worker's spans are recorded in the worker's
process, not this one (the same code path otherwise)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from sagents_django.core.tracing import RUN_ID
from sagents_django.runtime import agent_server
from sagents_django.runtime.executors import wait_inline
from tests.fakes.openai_server import FakeOpenAIServer, reply, tool_call
from tests.otel import Recorded
from tests.runtime.follow import EMBEDDED, follow, new_conversation

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
async def llm(settings: Any, fake_llm: FakeOpenAIServer) -> AsyncIterator[Any]:
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}
    }
    settings.SAGENTS = {
        **EMBEDDED,
        "MODEL": fake_llm.model,
        "MODEL_PARAMS": dict(fake_llm.model_params),
    }
    yield fake_llm
    assert await asyncio.to_thread(wait_inline, 30)


async def test_a_turn_and_its_subagent_are_one_trace_with_the_run_id_on_every_span(
    llm: FakeOpenAIServer, spans: Recorded
) -> None:
    llm.script(
        reply(
            tool_calls=[
                tool_call(
                    "task",
                    {
                        "instructions": "Add 2 and 3.",
                        "subagent_type": "general-purpose",
                    },
                    id="task_1",
                )
            ]
        ),
        reply("Five."),
        reply("My sub-agent says five."),
    )
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    submission = await agent_server.aadd_message(scope, conversation.pk, "2+3?")
    finished = await follower.until("run_finished")
    assert finished["data"]["status"] == "completed"
    async with asyncio.timeout(10):  # the span ends just after the run does
        while not spans.named("sagents.turn"):
            await asyncio.sleep(0.02)

    [turn] = spans.named("sagents.turn")
    assert turn.parent is None
    assert dict(turn.attributes or {}) == {
        RUN_ID: submission.run_id,
        "sagents.conversation_id": str(conversation.pk),
        "sagents.agent_id": conversation.agent_id,
        "sagents.trigger": "message",
        "sagents.attempt": 1,
        "sagents.status": "completed",
    }
    assert spans.tree(turn) == [
        "sagents.turn",
        [
            ["sagents.model_call", []],
            [
                "sagents.tool_call",
                [["sagents.subagent", [["sagents.model_call", []]]]],
            ],
            ["sagents.model_call", []],
        ],
    ]
    everything = spans.all()
    assert len(everything) == 6
    assert {s.context.trace_id for s in everything} == {turn.context.trace_id}
    assert {(s.attributes or {}).get(RUN_ID) for s in everything} == {submission.run_id}
