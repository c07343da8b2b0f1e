"""``BudgetBook`` across the calls of one turn: limits kept between calls, yet an
edit of a budget row (even one that skips ``updated_at``) applies at the next
call; on PostgreSQL a later call that fits is checked in one statement."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sagents_django.budgets.config import parse
from sagents_django.budgets.store import BudgetBook, estimate_price, price
from sagents_django.core import TokenUsage
from sagents_django.core.middleware.spend_budget import CallEstimate
from sagents_django.models import Budget, BudgetCounter, BudgetReservation
from sagents_django.scope import Scope

# Autocommit, as on a runtime's database thread (the one-statement check needs it).
pytestmark = pytest.mark.django_db(transaction=True)

CALL = CallEstimate(
    model="openai/gpt-4o-mini", prompt_tokens=3500, max_output_tokens=1000
)
"""$0.001125 on litellm's map."""


def book_of(user: Any, **budgets: Any) -> BudgetBook:
    config = parse({"MAX_OUTPUT_TOKENS": 1000, **budgets})
    assert config is not None
    return BudgetBook(
        scope=Scope.for_user(user), conversation_id=None, run_id=None, config=config
    )


def counter_of(user: Any, period: str = "month") -> BudgetCounter:
    return BudgetCounter.objects.get(key=f"user:{user.pk}", period=period)


def test_later_calls_that_fit_are_checked_in_one_statement_on_postgresql(
    user: Any,
) -> None:
    Budget.objects.create(scope="user", user=user, period="month", limit=1)
    Budget.objects.create(scope="site", period="day", limit=100)
    book = book_of(user)
    first = book.reserve(CALL)
    with CaptureQueriesContext(connection) as later:
        second = book.reserve(CALL)

    assert (first.outcome, second.outcome) == ("allow", "allow")
    if connection.vendor == "postgresql":
        assert len(later.captured_queries) == 1
    assert counter_of(user).reserved == 2 * Decimal("0.001125")
    assert BudgetReservation.objects.count() == 2
    book.release(first.hold)
    book.release(second.hold)
    assert counter_of(user).reserved == 0
    assert not BudgetReservation.objects.exists()


def test_a_limit_changed_by_a_bare_update_applies_at_the_next_call(
    user: Any,
) -> None:
    Budget.objects.create(scope="user", user=user, period="month", limit=1)
    book = book_of(user)
    assert book.reserve(CALL).outcome == "allow"
    assert book.reserve(CALL).outcome == "allow"  # the limits as kept

    # No save(): updated_at stays, the fingerprint of the row still changes.
    Budget.objects.filter(user=user).update(limit=Decimal("0.002"))
    refused = book.reserve(CALL)

    assert refused.outcome == "exhausted"
    assert refused.data["limit"] == "0.0020"
    assert counter_of(user).reserved == 2 * Decimal("0.001125")


def test_a_budget_added_or_disabled_mid_turn_applies_at_the_next_call(
    user: Any,
) -> None:
    book = book_of(user)
    assert book.reserve(CALL).outcome == "allow"  # no limit: nothing held
    budget = Budget.objects.create(scope="user", user=user, period="day", limit=0)
    assert book.reserve(CALL).outcome == "exhausted"

    budget.enabled = False
    budget.save()
    assert book.reserve(CALL).outcome == "allow"


def test_a_kept_limit_still_asks_past_its_soft_threshold_and_goes_on_once_approved(
    user: Any,
) -> None:
    Budget.objects.create(
        scope="user", user=user, period="month", limit=Decimal("0.01"), soft_percent=30
    )
    book = book_of(user, SOFT_ACTION="approve")
    assert book.reserve(CALL).outcome == "allow"
    assert book.reserve(CALL).outcome == "allow"
    asked = book.reserve(CALL)  # 3 x 0.001125 is past 30% of 0.01

    assert asked.outcome == "approve" and asked.hold is None
    assert counter_of(user).reserved == 2 * Decimal("0.001125")
    BudgetCounter.objects.filter(pk=counter_of(user).pk).update(soft_state="approved")
    with CaptureQueriesContext(connection) as approved:
        assert book.reserve(CALL).outcome == "allow"
    if connection.vendor == "postgresql":
        assert len(approved.captured_queries) == 1


def test_a_kept_limit_warns_once_when_the_site_only_notifies(user: Any) -> None:
    Budget.objects.create(
        scope="user", user=user, period="month", limit=Decimal("0.01"), soft_percent=20
    )
    book = book_of(user)
    outcomes = [book.reserve(CALL).outcome for _ in range(4)]

    assert outcomes == ["allow", "warn", "allow", "allow"]
    assert counter_of(user).soft_state == "notified"


def test_a_kept_limit_stops_the_call_that_would_pass_it(user: Any) -> None:
    Budget.objects.create(
        scope="user",
        user=user,
        period="month",
        limit=Decimal("0.003"),
        soft_percent=100,
    )
    book = book_of(user)
    outcomes = [book.reserve(CALL).outcome for _ in range(3)]

    assert outcomes == ["allow", "allow", "exhausted"]
    assert counter_of(user).reserved == 2 * Decimal("0.001125")


def test_an_unpriced_model_follows_the_sites_rule_with_kept_limits(
    user: Any,
) -> None:
    Budget.objects.create(scope="user", user=user, period="month", limit=1)
    unpriced = CallEstimate(
        model="nowhere/unpriced", prompt_tokens=1000, max_output_tokens=1000
    )
    blocking = book_of(user)
    assert blocking.reserve(CALL).outcome == "allow"
    refused = blocking.reserve(unpriced)
    assert refused.outcome == "exhausted" and refused.data["reason"] == "unpriced"

    charging = book_of(user, UNPRICED={"input": "5", "output": "15"})
    assert charging.reserve(CALL).outcome == "allow"
    held = charging.reserve(unpriced)
    assert held.outcome == "allow"
    assert held.hold.amount == Decimal("0.02")  # 1,000 x $5/M + 1,000 x $15/M


def test_the_estimate_is_priced_as_litellm_prices_the_call() -> None:
    config = parse({})
    assert config is not None
    for model in ("openai/gpt-4o-mini", "gemini/gemini-2.5-pro"):
        for prompt in (10, 3500, 150_000):
            call = CallEstimate(model=model, prompt_tokens=prompt, max_output_tokens=99)
            usage = TokenUsage(input=prompt, output=99)
            assert estimate_price(call, config) == price(model, usage, config)


def test_turns_racing_on_kept_limits_never_hold_more_than_the_limit(
    user: Any,
) -> None:
    """Eight turns, each past its first call (the one-statement check), reserve at
    once from their own database threads until the day's budget says no."""
    import threading

    from django.db import connections

    if connection.vendor != "postgresql":
        pytest.skip("row locks between connections: the PostgreSQL pass")
    limit = Decimal("0.0112")  # room for 9 calls of $0.001125, not 10
    Budget.objects.create(
        scope="user", user=user, period="day", limit=limit, soft_percent=100
    )
    start = threading.Barrier(8)
    allowed: list[Any] = []
    one_statement: list[bool] = []

    def turn() -> None:
        try:
            book = book_of(user)
            book.release(book.reserve(CALL).hold)  # the first call reads the limits
            start.wait()
            while True:
                with CaptureQueriesContext(connection) as checked:
                    decision = book.reserve(CALL)
                if decision.outcome != "allow":
                    break
                allowed.append(decision.hold)
                one_statement.append(len(checked.captured_queries) == 1)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=turn) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert len(allowed) == 9
    assert all(one_statement)
    counter = counter_of(user, period="day")
    assert counter.reserved == 9 * Decimal("0.001125") <= limit
    assert BudgetReservation.objects.count() == 9
