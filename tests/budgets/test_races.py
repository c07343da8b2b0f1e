"""Concurrent turns of one user against one budget (the PostgreSQL pass).

50 conversations of one user each start a turn at once; the embedded executor runs
them as concurrent tasks whose reservations go through several database threads
(``DATABASE_THREADS``: 8 on PostgreSQL), so they really race for the counter's row
lock. No turn may slip past the limit: what was spent and is still held stays
within the limit plus one call's estimate.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.db.models import Sum

from sagents_django import services
from sagents_django.models import AgentRun, Budget, BudgetCounter, UsageEntry
from sagents_django.runtime import agent_server
from tests.fakes.openai_server import reply
from tests.runtime.follow import make_scope, no_active_runs

pytestmark = pytest.mark.django_db(transaction=True)

TURNS = 50
ESTIMATE = Decimal("0.0012")
"""About one call's estimate here: ~3,500 prompt tokens and 1,000 output tokens on
gpt-4o-mini."""


async def test_fifty_concurrent_turns_of_one_user_cannot_overspend_their_budget(
    budget_site: Any,
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("row locks between database threads: the PostgreSQL pass")
    budget_site.budgets({"MAX_OUTPUT_TOKENS": 1000})
    # Each reply really costs what its estimate held: 3,500 + 1,000 tokens.
    budget_site.script(default=reply("Done.", usage=(3500, 1000)))
    scope = await sync_to_async(make_scope)("racer")
    limit = Decimal("0.012")  # room for about ten calls, not fifty
    await Budget.objects.acreate(
        scope="user", user=scope.user, period="day", limit=limit, soft_percent=100
    )
    conversations = [
        await sync_to_async(services.create_conversation)(scope) for _ in range(TURNS)
    ]
    await asyncio.gather(
        *(agent_server.aadd_message(scope, c.pk, "go") for c in conversations)
    )
    assert await no_active_runs(120)

    runs = await sync_to_async(list)(AgentRun.objects.values_list("status", flat=True))
    completed, stopped = runs.count("completed"), runs.count("error")
    assert completed + stopped == TURNS
    assert completed >= 1 and stopped >= 1  # the budget ran out mid-race
    spent = (await UsageEntry.objects.aaggregate(total=Sum("charged")))["total"]
    assert spent <= limit + ESTIMATE
    assert len(budget_site.requests) == completed  # a stopped turn sent nothing
    counter = await BudgetCounter.objects.aget(key=f"user:{scope.user.pk}")
    assert counter.reserved == 0
    assert counter.spent == spent
