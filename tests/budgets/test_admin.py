"""Budgets in the admin and on the "My usage" page: validated edits, a reset,
spend by user, owner, model and day, and what a person has left."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from sagents_django import services
from sagents_django.budgets.limits import period_start
from sagents_django.models import Budget, BudgetCounter, UsageEntry
from sagents_django.scope import Scope

pytestmark = pytest.mark.django_db

ADD = reverse("admin:sagents_django_budget_add")
LEDGER = reverse("admin:sagents_django_usageentry_changelist")


@pytest.fixture
def admin_client() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="x"))
    return client


def form(**fields: Any) -> dict[str, Any]:
    return {
        "scope": "site",
        "period": "month",
        "limit": "10",
        "soft_percent": "80",
        "enabled": "on",
        "owner_key": "",
        "note": "",
        **fields,
    }


@pytest.mark.parametrize(
    ("limit", "error"),
    [
        ("-1", "greater than or equal to 0"),
        ("1000000000", "less than or equal to 1000000"),
        ("NaN", "Enter a number"),
        ("1e400", "no more than 14 digits in total"),
        ("0.000001", "no more than 4 decimal places"),
        ("", "This field is required"),
    ],
)
def test_a_negative_absurd_or_malformed_limit_is_refused(
    admin_client: Client, limit: str, error: str
) -> None:
    response = admin_client.post(ADD, form(limit=limit))
    assert response.status_code == 200
    assert error in response.content.decode()
    assert not Budget.objects.exists()


def test_a_budget_must_name_exactly_its_scope_s_target(
    admin_client: Client, user: Any
) -> None:
    missing = admin_client.post(ADD, form(scope="user"))
    assert "A user budget names its user." in missing.content.decode()
    extra = admin_client.post(ADD, form(scope="site", user=str(user.pk)))
    assert "A site budget has no user." in extra.content.decode()
    assert not Budget.objects.exists()


def test_a_second_budget_for_one_scope_and_period_is_refused(
    admin_client: Client,
) -> None:
    assert admin_client.post(ADD, form()).status_code == 302
    twice = admin_client.post(ADD, form(limit="20"))
    assert "already has a budget for this period" in twice.content.decode()
    assert Budget.objects.get().limit == Decimal("10")


def test_a_soft_threshold_outside_one_to_a_hundred_is_refused(
    admin_client: Client,
) -> None:
    response = admin_client.post(ADD, form(soft_percent="0"))
    assert "greater than or equal to 1" in response.content.decode()


def test_resetting_a_budget_zeroes_its_current_period_only(
    admin_client: Client, user: Any
) -> None:
    budget = Budget.objects.create(
        scope="user", user=user, period="month", limit=Decimal(5)
    )
    now = BudgetCounter.objects.create(
        key=budget.key,
        period="month",
        starts=period_start("month"),
        spent=Decimal(4),
        soft_state="notified",
    )
    before = BudgetCounter.objects.create(
        key=budget.key,
        period="month",
        starts=period_start("month").replace(year=2000),
        spent=Decimal(3),
    )
    changelist = reverse("admin:sagents_django_budget_changelist")
    response = admin_client.post(
        changelist, {"action": "reset_spend", "_selected_action": [budget.pk]}
    )
    assert response.status_code == 302
    now.refresh_from_db()
    before.refresh_from_db()
    assert (now.spent, now.soft_state) == (0, "")
    assert before.spent == 3


def test_a_staff_member_without_the_permission_cannot_reset(user: Any) -> None:
    staff = User.objects.create_user("staff", password="x", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_budget"))
    client = Client()
    client.force_login(staff)
    budget = Budget.objects.create(scope="site", period="day", limit=Decimal(1))
    changelist = reverse("admin:sagents_django_budget_changelist")
    page = client.get(changelist).content.decode()
    assert "reset_spend" not in page
    client.post(changelist, {"action": "reset_spend", "_selected_action": [budget.pk]})
    response = client.post(
        reverse("admin:sagents_django_budget_change", args=[budget.pk]),
        form(limit="1000"),
    )
    assert response.status_code == 403
    budget.refresh_from_db()
    assert budget.limit == 1


def test_the_ledger_shows_spend_by_user_owner_model_and_day(
    admin_client: Client, user: Any, other_user: Any
) -> None:
    today = timezone.now()
    for who, model, cost, when in (
        (user, "openai/gpt-4o", Decimal("0.5"), today),
        (user, "openai/gpt-4o-mini", Decimal("0.25"), today - timedelta(days=1)),
        (other_user, "openai/gpt-4o", None, today),
    ):
        UsageEntry.objects.create(
            created_at=when,
            user=who,
            owner_key=str(who.pk),
            model=model,
            input_tokens=100,
            output_tokens=10,
            cost=cost,
            charged=cost,
        )
    page = admin_client.get(LEDGER).content.decode()
    assert 'id="sg-spend"' in page
    for caption in ("By user", "By owner", "By model", "By day"):
        assert f"<caption>{caption}</caption>" in page
    assert "$0.7500" in page  # the user's two calls, summed
    assert "+ 1 unpriced" in page  # the other user's call: not free, not hidden


def test_my_usage_says_what_is_left(user: Any, settings: Any) -> None:
    settings.SAGENTS = {
        **settings.SAGENTS,
        "BUDGETS": {"DEFAULTS": [{"scope": "user", "period": "month", "limit": "2"}]},
    }
    UsageEntry.objects.create(
        created_at=timezone.now(),
        user=user,
        owner_key=str(user.pk),
        model="openai/gpt-4o",
        cost=Decimal("1.75"),
        charged=Decimal("1.75"),
    )
    services.create_conversation(Scope.for_user(user))
    client = Client()
    client.force_login(user)
    page = client.get(reverse("sagents_django:my_usage")).content.decode()
    assert 'id="sg-budgets"' in page
    assert "You, this month: $2.00" in page
    assert "$0.2500" in page and "(near the limit)" in page
