"""Budgets in real turns: the fake OpenAI server answers, the database keeps score.

Every model call leaves one ledger row, written with the step that records its
reply; a call that does not fit a budget is never sent (the fake server's request
log stays empty) and ends the turn with a typed row and event.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission
from django.dispatch import receiver

from sagents_django.approvals.models import ApprovalRequest
from sagents_django.exceptions import InvalidInput
from sagents_django.models import (
    AgentRun,
    AgentState,
    Budget,
    BudgetCounter,
    BudgetReservation,
    DisplayMessage,
    UsageEntry,
)
from sagents_django.runtime import agent_server
from sagents_django.signals import budget_threshold_reached
from tests.fakes.openai_server import fault, reply, tool_call
from tests.runtime.follow import follow, new_conversation, rows_of

pytestmark = pytest.mark.django_db(transaction=True)

ON: dict[str, Any] = {"MAX_OUTPUT_TOKENS": 1000}


async def run_turn(scope: Any, conversation: Any, text: str = "hi") -> Any:
    follower = await follow(scope, conversation.pk)
    submission = await agent_server.aadd_message(scope, conversation.pk, text)
    finished = await follower.finished(submission.run_id)
    return follower, finished, await AgentRun.objects.aget(pk=submission.run_id)


async def entries(**filters: Any) -> list[UsageEntry]:
    return await sync_to_async(list)(
        UsageEntry.objects.filter(**filters).order_by("pk")
    )


async def test_every_model_call_leaves_one_ledger_row_priced_like_its_run(
    budget_site: Any,
) -> None:
    budget_site.script(
        reply(tool_calls=[tool_call("ls", {})], usage=(1000, 100)),
        reply("Nothing there.", usage=(1200, 400)),
    )
    scope, conversation = await new_conversation()
    _, finished, run = await run_turn(scope, conversation, "ls")

    assert finished["data"]["status"] == "completed"
    first, second = await entries(run_id=run.pk)
    assert (first.input_tokens, first.output_tokens) == (1000, 100)
    assert (second.input_tokens, second.output_tokens) == (1200, 400)
    assert first.cost + second.cost == run.cost
    assert first.charged == first.cost  # budgets off: what was spent, still kept
    assert first.user_id == scope.user.pk
    assert first.owner_key == str(scope.user.pk)
    assert first.conversation_id == conversation.pk
    assert first.model == "openai/gpt-4o-mini"


async def test_a_call_over_the_hard_limit_is_never_sent_and_ends_the_turn_typed(
    budget_site: Any,
) -> None:
    budget_site.budgets(ON)
    budget_site.script(reply("never asked"))
    scope, conversation = await new_conversation()
    await Budget.objects.acreate(
        scope="user", user=scope.user, period="month", limit=Decimal("0.0001")
    )
    follower, finished, run = await run_turn(scope, conversation)

    assert budget_site.requests == []  # no provider request at all
    assert finished["data"]["status"] == "error"
    assert run.status == "error"
    names = follower.names()
    assert "budget_exhausted" in names
    error = next(e for e in follower.events if e["event"] == "error")
    assert error["data"]["error_type"] == "budget_exhausted"
    [row] = [r for r in await rows_of(conversation) if r.content_type == "error"]
    assert row.content["error_type"] == "budget_exhausted"
    details = row.content["details"]
    assert (details["scope"], details["period"], details["limit"]) == (
        "user",
        "month",
        "0.0001",
    )
    assert await entries() == []
    assert not await BudgetReservation.objects.aexists()


async def test_a_call_past_the_soft_threshold_goes_on_with_a_line_and_a_signal(
    budget_site: Any,
) -> None:
    budget_site.budgets({**ON, "SOFT_ACTION": "notify"})
    budget_site.script(
        reply("Fine.", usage=(100, 10)), reply("Again.", usage=(100, 10))
    )
    scope, conversation = await new_conversation()
    # The estimate (the prompt and tools, about 3,500 tokens, and 1,000 output
    # tokens) is about $0.0011: past 10% of a $0.01 limit, within the limit.
    await Budget.objects.acreate(
        scope="user",
        user=scope.user,
        period="day",
        limit=Decimal("0.01"),
        soft_percent=10,
    )
    heard: list[dict[str, Any]] = []

    @receiver(budget_threshold_reached, weak=False)
    def listen(sender: Any, **kwargs: Any) -> None:
        heard.append(kwargs)

    try:
        follower, finished, run = await run_turn(scope, conversation)
        _, second, _ = await run_turn(scope, conversation, "again")
    finally:
        budget_threshold_reached.disconnect(listen)

    assert finished["data"]["status"] == "completed"
    assert second["data"]["status"] == "completed"
    assert len(budget_site.requests) == 2
    notes = [r for r in await rows_of(conversation) if r.content_type == "notification"]
    assert len(notes) == 1  # once per period, not on every call
    assert notes[0].content["budget"]["scope"] == "user"
    assert "budget_warning" in follower.names()
    [signal] = heard
    assert signal["user_id"] == scope.user.pk and signal["run_id"] == str(run.pk)
    counter = await BudgetCounter.objects.aget(
        key=f"user:{scope.user.pk}", period="day"
    )
    assert counter.reserved == 0
    assert counter.spent == sum(e.charged for e in await entries())
    assert counter.soft_state == "notified"


async def test_an_unpriced_model_is_blocked_while_a_budget_applies(
    budget_site: Any,
) -> None:
    budget_site.budgets(
        {**ON, "DEFAULTS": [{"scope": "site", "limit": "100"}]},
        model="openai/fake-model",
    )
    budget_site.script(reply("never asked"))
    scope, conversation = await new_conversation()
    _, finished, _ = await run_turn(scope, conversation)

    assert budget_site.requests == []
    assert finished["data"]["status"] == "error"
    [row] = [r for r in await rows_of(conversation) if r.content_type == "error"]
    assert row.content["details"] == {
        "reason": "unpriced",
        "model": "openai/fake-model",
    }


async def test_an_unpriced_model_is_charged_the_sites_rate_and_its_cost_stays_null(
    budget_site: Any,
) -> None:
    rate = {"input": "10", "output": "20"}
    budget_site.budgets(
        {**ON, "UNPRICED": rate, "DEFAULTS": [{"scope": "site", "limit": "100"}]},
        model="openai/fake-model",
    )
    budget_site.script(reply("Priced by the site.", usage=(1000, 500)))
    scope, conversation = await new_conversation()
    _, finished, _ = await run_turn(scope, conversation)

    assert finished["data"]["status"] == "completed"
    [entry] = await entries()
    assert entry.cost is None  # unknown is not free, and not made up either
    assert entry.charged == Decimal("0.02")  # 1000 * 10e-6 + 500 * 20e-6
    counter = await BudgetCounter.objects.aget(key="site", period="month")
    assert counter.spent == Decimal("0.02") and counter.reserved == 0


async def test_a_budget_lowered_during_a_turn_stops_its_next_call(
    budget_site: Any,
) -> None:
    budget_site.budgets(ON)
    budget_site.script(
        fault.slow_first_byte(
            0.5, then=reply(tool_calls=[tool_call("ls", {})], usage=(100, 10))
        ),
        reply("never asked"),
    )
    scope, conversation = await new_conversation()
    budget = await Budget.objects.acreate(
        scope="conversation",
        conversation_id=conversation.pk,
        period="total",
        limit=Decimal("10"),
        soft_percent=100,
    )
    follower = await follow(scope, conversation.pk)
    submission = await agent_server.aadd_message(scope, conversation.pk, "ls")
    while not budget_site.requests:  # the first call is reserved and on its way
        await asyncio.sleep(0.01)
    budget.limit = Decimal("0.0001")  # the admin lowers it while the call streams
    await budget.asave()
    finished = await follower.finished(submission.run_id)

    assert len(budget_site.requests) == 1
    assert finished["data"]["status"] == "error"
    [entry] = await entries()
    assert entry.input_tokens == 100  # the first call was recorded and settled
    counter = await BudgetCounter.objects.aget(key=f"conversation:{conversation.pk}")
    assert counter.reserved == 0 and counter.spent == entry.charged


async def test_past_the_soft_threshold_the_call_waits_for_someone_allowed(
    budget_site: Any,
) -> None:
    budget_site.budgets({**ON, "SOFT_ACTION": "approve"})
    budget_site.script(reply("Approved, so I answer.", usage=(100, 10)))
    scope, conversation = await new_conversation()
    await Budget.objects.acreate(
        scope="user",
        user=scope.user,
        period="month",
        limit=Decimal("0.01"),
        soft_percent=10,
    )
    follower, finished, _ = await run_turn(scope, conversation)
    assert finished["data"]["status"] == "interrupted"
    assert budget_site.requests == []

    # Not allowed to raise budgets: refused at the door, nothing changes.
    with pytest.raises(InvalidInput, match="may not decide"):
        await agent_server.aresume(scope, conversation.pk, [{"type": "approve"}])
    assert budget_site.requests == []
    assert await AgentRun.objects.acount() == 1
    row = await ApprovalRequest.objects.aget(conversation_id=conversation.pk)
    assert (row.status, row.permission, row.owner_decides) == (
        "pending",
        "sagents_django.raise_budget",
        False,
    )

    permission = await Permission.objects.aget(codename="raise_budget")
    await sync_to_async(scope.user.user_permissions.add)(permission)
    again = await sync_to_async(type(scope).for_user)(
        await type(scope.user).objects.aget(pk=scope.user.pk)
    )
    resumed = await agent_server.aresume(again, conversation.pk, [{"type": "approve"}])
    done = await follower.finished(resumed)
    assert done["data"]["status"] == "completed"
    assert len(budget_site.requests) == 1
    counter = await BudgetCounter.objects.aget(key=f"user:{scope.user.pk}")
    assert counter.soft_state == "approved" and counter.decided_by_id == scope.user.pk


async def test_an_expired_reservation_of_a_crashed_worker_is_given_back(
    budget_site: Any,
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    budget_site.budgets(ON)
    budget_site.script(reply("Room again.", usage=(10, 10)))
    scope, conversation = await new_conversation()
    await Budget.objects.acreate(
        scope="user",
        user=scope.user,
        period="month",
        limit=Decimal("0.01"),
        soft_percent=100,
    )
    key = f"user:{scope.user.pk}"
    counter = await sync_to_async(_counter_with_stale_reservation)(
        key, Decimal("0.0099")
    )
    await BudgetReservation.objects.filter(counters=[counter.pk]).aupdate(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    _, finished, _ = await run_turn(scope, conversation)

    assert finished["data"]["status"] == "completed"
    await counter.arefresh_from_db()
    assert counter.reserved == 0
    assert not await BudgetReservation.objects.aexists()


def _counter_with_stale_reservation(key: str, amount: Decimal) -> BudgetCounter:
    from datetime import timedelta

    from django.utils import timezone

    from sagents_django.budgets.limits import period_start

    counter = BudgetCounter.objects.create(
        key=key, period="month", starts=period_start("month"), reserved=amount
    )
    BudgetReservation.objects.create(
        amount=amount,
        counters=[counter.pk],
        expires_at=timezone.now() + timedelta(hours=1),
    )
    return counter


async def test_display_rows_of_a_budget_say_it_in_the_readers_words(
    budget_site: Any,
) -> None:
    budget_site.budgets(ON)
    scope, conversation = await new_conversation()
    await Budget.objects.acreate(scope="site", period="day", limit=Decimal("0"))
    await run_turn(scope, conversation)
    row = await DisplayMessage.objects.aget(
        conversation=conversation.pk, content_type="error"
    )
    from sagents_django.budgets.texts import describe

    assert describe(row.content["details"], exhausted=True).startswith(
        "Budget exhausted: today's budget for the site is $0"
    )


async def test_a_sub_agents_calls_are_checked_written_and_settled(
    budget_site: Any,
) -> None:
    budget_site.budgets(ON)
    task = {"instructions": "Count to two.", "subagent_type": "general-purpose"}
    budget_site.script(
        reply(tool_calls=[tool_call("task", task, id="task_1")], usage=(100, 10)),
        reply("One, two.", usage=(200, 20)),  # the sub-agent's call
        reply("It counted.", usage=(300, 30)),
    )
    scope, conversation = await new_conversation()
    await Budget.objects.acreate(
        scope="user", user=scope.user, period="month", limit=Decimal("1")
    )
    _, finished, run = await run_turn(scope, conversation, "delegate")

    assert finished["data"]["status"] == "completed"
    assert len(budget_site.requests) == 3
    rows = await entries(run_id=run.pk)
    assert sorted(e.input_tokens for e in rows) == [100, 200, 300]
    counter = await BudgetCounter.objects.aget(key=f"user:{scope.user.pk}")
    assert counter.reserved == 0
    assert counter.spent == sum(e.charged for e in rows)
    assert not await BudgetReservation.objects.aexists()


async def test_a_budget_pause_is_shown_on_the_chat_page_and_dismiss_gets_out(
    budget_site: Any,
) -> None:
    """No approval form can answer a budget's pause: the page says what it waits
    for, with Dismiss, and after it the conversation takes messages again."""
    from django.test import AsyncClient
    from django.urls import reverse

    budget_site.budgets({**ON, "SOFT_ACTION": "approve"})
    budget_site.script(reply("After the dismissal.", usage=(1, 1)))
    scope, conversation = await new_conversation()
    await Budget.objects.acreate(
        scope="user",
        user=scope.user,
        period="month",
        limit=Decimal("0.01"),
        soft_percent=10,
    )
    _, finished, _ = await run_turn(scope, conversation)
    assert finished["data"]["status"] == "interrupted"
    client = AsyncClient()
    await sync_to_async(client.force_login)(scope.user)
    page_url = reverse("sagents_django:conversation", args=[conversation.pk])

    page = (await client.get(page_url)).content.decode()
    assert 'aria-label="The agent is paused"' in page
    assert "budget" in page.split('aria-label="The agent is paused"')[1][:2000]

    answer = await client.post(
        reverse("sagents_django:decide", args=[conversation.pk]),
        {"action": "dismiss"},
        headers={"HX-Request": "true"},
    )
    assert (answer.status_code, answer.content) == (200, b"")  # no error: done
    page = (await client.get(page_url)).content.decode()
    assert "The agent is paused" not in page
    state = await AgentState.objects.aget(conversation_id=conversation.pk)
    assert not state.state_data["state"].get("interrupt_data")


async def test_a_stranger_cannot_dismiss_a_budget_pause(budget_site: Any) -> None:
    from django.contrib.auth import get_user_model
    from django.test import AsyncClient
    from django.urls import reverse

    budget_site.budgets({**ON, "SOFT_ACTION": "approve"})
    scope, conversation = await new_conversation()
    await Budget.objects.acreate(
        scope="user",
        user=scope.user,
        period="month",
        limit=Decimal("0.01"),
        soft_percent=10,
    )
    await run_turn(scope, conversation)
    mallory = await get_user_model().objects.acreate(username="mallory")
    client = AsyncClient()
    await sync_to_async(client.force_login)(mallory)

    answer = await client.post(
        reverse("sagents_django:decide", args=[conversation.pk]),
        {"action": "dismiss"},
    )

    assert answer.status_code == 404
    state = await AgentState.objects.aget(conversation_id=conversation.pk)
    assert state.state_data["state"].get("interrupt_data")
