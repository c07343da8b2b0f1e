"""What the ledger and the counters tell people: spend by user, owner, model and
day (the admin), and what a person has left (the "My usage" page, the chat)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from django.contrib.auth import get_user_model
from django.db.models import Count, F, QuerySet, Sum
from django.db.models.functions import TruncDay
from django.utils.translation import gettext as _

from sagents_django.scope import Scope

from .config import budget_settings
from .limits import Limit, Subject, applicable, period_start
from .models import BudgetCounter, UsageEntry
from .store import ledger_sum

Dimension = Literal["user", "owner", "model", "day"]


def column(dimension: Dimension) -> Any:
    if dimension == "user":
        return F(f"user__{get_user_model().USERNAME_FIELD}")
    if dimension == "day":
        return TruncDay("created_at")
    return F({"owner": "owner_key", "model": "model"}[dimension])


def spend_by(
    entries: QuerySet[UsageEntry], dimension: Dimension, *, limit: int = 20
) -> list[dict[str, Any]]:
    """The largest spenders along ``dimension`` (one GROUP BY over the rows
    given): ``label``, ``calls``, ``input``, ``output``, ``cost``, ``charged`` and
    ``unpriced`` (calls with no price, counted apart: never as free)."""
    grouped = (
        entries.order_by()
        .annotate(label=column(dimension))
        .values("label")
        .annotate(
            calls=Count("id"),
            input=Sum("input_tokens"),
            output=Sum("output_tokens"),
            priced=Count("cost"),
            cost=Sum("cost"),
            charged=Sum("charged"),
        )
    )
    ordering = "-label" if dimension == "day" else "-charged"
    rows = list(grouped.order_by(ordering)[:limit])
    for row in rows:
        row["unpriced"] = row["calls"] - row.pop("priced")
        if row["label"] in (None, ""):
            row["label"] = "(erased)" if dimension == "user" else "-"
    return rows


@dataclass(frozen=True, kw_only=True, slots=True)
class Standing:
    """One limit on a person, and where they stand against it."""

    limit: Limit
    spent: Decimal
    reserved: Decimal

    @property
    def label(self) -> str:
        return {
            "site": _("The whole site"),
            "owner": _("Your organisation"),
            "user": _("You"),
            "conversation": _("This conversation"),
        }.get(self.limit.scope, self.limit.scope)

    @property
    def period(self) -> str:
        return {"day": _("today"), "month": _("this month"), "total": _("in all")}.get(
            self.limit.period, self.limit.period
        )

    @property
    def remaining(self) -> Decimal:
        return max(self.limit.amount - self.spent - self.reserved, Decimal(0))

    @property
    def percent_used(self) -> int:
        if self.limit.amount <= 0:
            return 100
        used = (self.spent + self.reserved) * 100 / self.limit.amount
        return min(int(used), 100)

    @property
    def used_up(self) -> bool:
        return self.remaining <= 0

    @property
    def near(self) -> bool:
        soft = self.limit.soft
        return soft is not None and self.spent + self.reserved >= soft


def standings(scope: Scope, conversation_id: Any = None) -> list[Standing]:
    """Every limit on ``scope`` (and on ``conversation_id``, if given) with what is
    left in its current period; empty when budgets are off."""
    config = budget_settings()
    if config is None:
        return []
    subject = Subject.of(scope, conversation_id)
    limits = applicable(scope, subject, config)
    counters = {
        (c.key, c.period): c
        for c in BudgetCounter.objects.filter(
            key__in=[limit.key for limit in limits],
            starts__in={period_start(limit.period) for limit in limits},
        )
        if c.starts == period_start(c.period)
    }
    result = []
    for limit in sorted(limits, key=lambda item: (item.scope, item.period)):
        counter = counters.get((limit.key, limit.period))
        # No counter yet (no call since the limit was set): the ledger says.
        spent = (
            counter.spent
            if counter is not None
            else ledger_sum(limit.key, period_start(limit.period))
        )
        reserved = counter.reserved if counter is not None else Decimal(0)
        result.append(Standing(limit=limit, spent=spent, reserved=reserved))
    return result
