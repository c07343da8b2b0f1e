"""Usage and cost summed per conversation and per owner, within a scope."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from sagents_django import services
from sagents_django.core.messages import TokenUsage
from sagents_django.exceptions import NotFound
from sagents_django.scope import Scope

pytestmark = pytest.mark.django_db


def ran(
    scope: Scope,
    conversation: Any,
    *,
    tokens: tuple[int, int],
    cost: Decimal | None,
    status: str = "completed",
) -> None:
    run = services.begin_run(scope, conversation.pk)
    usage = TokenUsage(input=tokens[0], output=tokens[1])
    services.finish_run(scope, run.pk, status=status, usage=usage, cost=cost)


def test_a_conversations_totals_sum_every_run_whatever_its_status(
    scope: Scope, conversation: Any
) -> None:
    ran(scope, conversation, tokens=(100, 20), cost=Decimal("0.0001"))
    ran(scope, conversation, tokens=(50, 5), cost=Decimal("0.00002"), status="error")
    ran(scope, conversation, tokens=(7, 0), cost=Decimal(0), status="cancelled")

    totals = services.usage_totals(scope, conversation_id=conversation.pk)

    assert totals == services.UsageTotals(
        runs=3,
        input_tokens=157,
        output_tokens=25,
        cost=Decimal("0.00012"),
        unpriced_runs=0,
        turns=3,  # each run answered a message (begin_run's default trigger)
    )
    assert totals.total_tokens == 182
    assert totals.to_dict()["cost"] == "0.0001200000"


def test_a_run_without_a_price_counts_its_tokens_and_is_named_unpriced(
    scope: Scope, conversation: Any
) -> None:
    ran(scope, conversation, tokens=(10, 10), cost=Decimal("0.5"))
    ran(scope, conversation, tokens=(30, 3), cost=None)

    totals = services.usage_totals(scope, conversation_id=str(conversation.pk))

    assert (totals.runs, totals.input_tokens, totals.output_tokens) == (2, 40, 13)
    assert totals.cost == Decimal("0.5")
    assert totals.unpriced_runs == 1


def test_an_owners_totals_cover_all_their_conversations_and_no_one_elses(
    scope: Scope,
    conversation: Any,
    other_scope: Scope,
    other_conversation: Any,
) -> None:
    second = services.create_conversation(scope, title="Second")
    ran(scope, conversation, tokens=(100, 10), cost=Decimal("0.01"))
    ran(scope, second, tokens=(200, 20), cost=Decimal("0.02"))
    ran(other_scope, other_conversation, tokens=(9999, 999), cost=Decimal("9"))

    mine = services.usage_totals(scope)
    per_conversation = services.usage_by_conversation(scope)

    assert (mine.runs, mine.input_tokens, mine.output_tokens) == (2, 300, 30)
    assert mine.cost == Decimal("0.03")
    assert set(per_conversation) == {conversation.pk, second.pk}
    assert per_conversation[second.pk].input_tokens == 200
    assert services.usage_totals(other_scope).cost == Decimal(9)


def test_another_tenant_gets_nothing(
    scope: Scope,
    conversation: Any,
    other_scope: Scope,
    anonymous_scope: Scope,
) -> None:
    ran(scope, conversation, tokens=(100, 10), cost=Decimal("0.01"))

    with pytest.raises(NotFound):
        services.usage_totals(other_scope, conversation_id=conversation.pk)
    assert services.usage_totals(other_scope) == services.UsageTotals()
    assert services.usage_by_conversation(other_scope) == {}
    assert services.usage_totals(anonymous_scope) == services.UsageTotals()


def test_a_conversation_that_never_ran_totals_zero(
    scope: Scope, conversation: Any
) -> None:
    totals = services.usage_totals(scope, conversation_id=conversation.pk)
    assert totals == services.UsageTotals()
    assert services.usage_by_conversation(scope) == {}


def test_finishing_with_a_cost_that_is_not_a_price_stores_it_as_unknown(
    scope: Scope, conversation: Any
) -> None:
    for bad in (Decimal("-1"), Decimal("NaN"), 0.5):
        ran(scope, conversation, tokens=(1, 1), cost=bad)  # type: ignore[arg-type]
    ran(scope, conversation, tokens=(1, 1), cost=Decimal("0.25"))

    totals = services.usage_totals(scope, conversation_id=conversation.pk)

    assert (totals.unpriced_runs, totals.cost) == (3, Decimal("0.25"))
