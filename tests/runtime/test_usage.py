"""Token usage and cost: priced from litellm's offline map, recorded on each run.

The fake provider streams a usage chunk (the request asks for it with
``stream_options.include_usage``); ``reply(usage=(prompt, completion))`` fixes the
counts so the cost can be checked to the cent's ten-millionth.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.dispatch import receiver

from sagents_django.core import TokenUsage
from sagents_django.models import AgentRun
from sagents_django.runtime import agent_server
from sagents_django.runtime.executors import wait_inline
from sagents_django.runtime.usage import cost_of
from sagents_django.signals import run_finished
from tests.fakes.openai_server import fault, reply, tool_call
from tests.runtime import follow as follow_module
from tests.runtime.follow import EMBEDDED, follow, new_conversation

site = follow_module.site


@pytest.fixture
async def priced_site(settings: Any, fake_llm: Any) -> Any:
    """The embedded stack on a model litellm prices (a model setting the production
    stack's worker process, started once per session, would not see)."""
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}
    }
    settings.SAGENTS = {
        **EMBEDDED,
        "MODEL": PRICED,
        "MODEL_PARAMS": dict(fake_llm.model_params),
    }
    yield fake_llm
    assert await asyncio.to_thread(wait_inline, 30)
    await sync_to_async(connections.close_all)()


PRICED = "openai/gpt-4o-mini"
"""In litellm's bundled map: $0.15 per million input tokens, $0.60 per million
output tokens, $0.075 per million cached input tokens."""


# Pricing (no database) ----------------------------------------------------------
def test_a_priced_model_costs_its_input_and_output_tokens() -> None:
    cost = cost_of(PRICED, TokenUsage(input=1000, output=500))
    assert cost == Decimal("0.00045")


def test_cached_input_tokens_are_priced_at_the_cache_read_rate() -> None:
    cost = cost_of(PRICED, TokenUsage(input=1000, output=0, cached_input=1000))
    assert cost == Decimal("0.000075")


@pytest.mark.parametrize(
    "model", ["openai/fake-model", "nonsense", "", "anthropic/x", "sagents/other"]
)
def test_a_model_without_a_price_costs_none_without_an_error(model: str) -> None:
    assert cost_of(model, TokenUsage(input=10, output=5)) is None


def test_the_offline_demo_model_is_priced_as_free() -> None:
    assert cost_of("sagents/demo", TokenUsage(input=10, output=5)) == 0


def test_a_turn_that_used_no_tokens_costs_zero_even_on_an_unknown_model() -> None:
    assert cost_of("openai/fake-model", TokenUsage()) == Decimal(0)


def test_a_tiny_turn_on_a_cheap_model_is_not_rounded_to_zero() -> None:
    assert cost_of(PRICED, TokenUsage(input=3, output=0)) == Decimal("0.00000045")


# Turns on the embedded default ---------------------------------------------------
@pytest.mark.django_db(transaction=True)
async def test_a_turn_records_its_tokens_and_cost_on_the_run_event_and_signal(
    priced_site: Any,
) -> None:
    site = priced_site
    site.script(
        reply(tool_calls=[tool_call("ls", {})], usage=(1000, 100)),
        reply("Nothing there.", usage=(1200, 400)),
    )
    received: list[dict[str, Any]] = []

    @receiver(run_finished, weak=False)
    def bill(sender: Any, **kwargs: Any) -> None:
        received.append(kwargs)

    try:
        scope, conversation = await new_conversation()
        follower = await follow(scope, conversation.pk)
        submission = await agent_server.aadd_message(scope, conversation.pk, "ls")
        finished = await follower.until("run_finished")
        # The signal is sent after the event, once the run's row has committed.
        assert await asyncio.to_thread(wait_inline, 30)
    finally:
        run_finished.disconnect(bill)

    assert site.last_request["model"] == "gpt-4o-mini"
    expected = Decimal("0.00015") * Decimal("2.2") + Decimal("0.0000006") * 500
    assert finished["data"]["status"] == "completed"
    assert finished["data"]["usage"]["input"] == 2200
    assert finished["data"]["usage"]["output"] == 500
    assert Decimal(finished["data"]["cost"]) == expected
    run = await AgentRun.objects.aget(pk=submission.run_id)
    assert (run.input_tokens, run.output_tokens) == (2200, 500)
    assert run.cost == expected
    [sent] = received
    assert sent["run_id"] == submission.run_id and sent["cost"] == expected


@pytest.mark.django_db(transaction=True)
async def test_a_turn_on_an_unpriced_model_records_tokens_and_no_cost(
    site: Any,
) -> None:
    site.script(reply("Hi.", usage=(40, 2)))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)

    submission = await agent_server.aadd_message(scope, conversation.pk, "hi")
    finished = await follower.until("run_finished")

    assert finished["data"]["status"] == "completed"
    assert finished["data"]["cost"] is None
    run = await AgentRun.objects.aget(pk=submission.run_id)
    assert (run.input_tokens, run.output_tokens, run.cost) == (40, 2, None)


@pytest.mark.django_db(transaction=True)
async def test_a_failed_provider_call_costs_nothing(site: Any) -> None:
    site.script(fault.http(500))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)

    submission = await agent_server.aadd_message(scope, conversation.pk, "hi")
    finished = await follower.until("run_finished")

    assert finished["data"]["status"] == "error"
    run = await AgentRun.objects.aget(pk=submission.run_id)
    assert (run.input_tokens, run.output_tokens, run.cost) == (0, 0, Decimal(0))
