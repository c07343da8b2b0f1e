"""Token usage and cost summed over runs: per conversation, per owner.

Every run counts, whatever its status: a cancelled or failed turn consumed the
tokens it reported. A run whose model has no known price stores a NULL cost
(``runtime.usage``); totals add up the priced runs and count the others in
``unpriced_runs``, so a sum never passes an unknown for zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum

from sagents_django.models import COST_QUANTUM, AgentRun
from sagents_django.scope import Scope

from .conversations import owned_ids, require_conversation


@dataclass(frozen=True, kw_only=True)
class UsageTotals:
    """What a set of runs consumed."""

    runs: int = 0
    """How many runs were counted."""
    input_tokens: int = 0
    output_tokens: int = 0
    cost: Decimal = Decimal(0)
    """USD, summed over the priced runs."""
    unpriced_runs: int = 0
    """Runs whose model has no known price: their tokens are counted, their cost
    is not in ``cost``."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost": str(self.cost),
            "unpriced_runs": self.unpriced_runs,
        }


# Prefixed: an aggregate named like a field ("cost") would shadow it in the
# filter of another aggregate.
_AGGREGATES = {
    "total_runs": Count("pk"),
    "total_input_tokens": Sum("input_tokens"),
    "total_output_tokens": Sum("output_tokens"),
    "total_cost": Sum("cost"),
    "total_unpriced_runs": Count("pk", filter=Q(cost__isnull=True)),
}


def usage_totals(scope: Scope, *, conversation_id: Any = None) -> UsageTotals:
    """The usage of one conversation's runs, or (``conversation_id`` None) of all
    the runs of every conversation ``scope`` owns: a user's total. NotFound for a
    conversation outside ``scope``; a scope that owns nothing gets zeros."""
    runs = _runs(scope, conversation_id)
    return _totals(runs.aggregate(**_AGGREGATES))


def usage_by_conversation(scope: Scope) -> dict[Any, UsageTotals]:
    """The usage of each conversation ``scope`` owns that has runs, by its id (one
    query)."""
    rows = (
        _runs(scope, None).order_by().values("conversation_id").annotate(**_AGGREGATES)
    )
    return {row.pop("conversation_id"): _totals(row) for row in rows}


def _runs(scope: Scope, conversation_id: Any) -> QuerySet[AgentRun]:
    if conversation_id is not None:
        pk = require_conversation(scope, conversation_id, touch=False)
        return AgentRun.objects.filter(conversation_id=pk)
    return AgentRun.objects.filter(conversation__in=owned_ids(scope))


def _totals(row: dict[str, Any]) -> UsageTotals:
    cost = row.get("total_cost")
    return UsageTotals(
        runs=row.get("total_runs") or 0,
        input_tokens=row.get("total_input_tokens") or 0,
        output_tokens=row.get("total_output_tokens") or 0,
        # Kept to the runs' own precision (a database's sum may carry more digits).
        cost=Decimal(cost).quantize(COST_QUANTUM) if cost is not None else Decimal(0),
        unpriced_runs=row.get("total_unpriced_runs") or 0,
    )
