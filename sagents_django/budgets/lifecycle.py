"""The ledger under erasure and export.

Erasure anonymises, it does not delete: the ledger is the site's books (what was
spent, on which model, when), so a row keeps its tokens, cost and time and loses
whom it names (user, owner, conversation, run). Counters whose key names the
subject and the subject's own budget rows go: they are about the person.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from .models import Budget, BudgetCounter, UsageEntry

EXPORT_FIELDS = (
    "created_at",
    "conversation_id",
    "run_id",
    "model",
    "input_tokens",
    "output_tokens",
    "cost",
    "charged",
)


def entries_of(
    *, user_pk: Any = None, owner_pk: Any = None, conversations: Any = ()
) -> QuerySet[UsageEntry]:
    """The ledger rows that name the subject: as user, as owner, or by one of its
    conversations."""
    q = Q(conversation_id__in=list(conversations))
    if user_pk is not None:
        q |= Q(user_id=user_pk)
    if owner_pk is not None:
        q |= Q(owner_key=str(owner_pk))
    return UsageEntry.objects.filter(q)


def anonymise(
    entries: QuerySet[UsageEntry], *, user_pk: Any = None, owner_pk: Any = None
) -> int:
    """Strip whom ``entries`` name (totals stay); remove the subject's budget rows
    and counters. How many ledger rows were anonymised."""
    count = entries.update(
        user=None, owner_key="", conversation=None, run=None, anonymised=True
    )
    keys = []
    if user_pk is not None:
        Budget.objects.filter(user_id=user_pk).delete()
        keys.append(f"user:{user_pk}")
    if owner_pk is not None:
        Budget.objects.filter(scope="owner", owner_key=str(owner_pk)).delete()
        keys.append(f"owner:{owner_pk}")
    BudgetCounter.objects.filter(key__in=keys).delete()
    return count


def export_rows(user: Any) -> list[dict[str, Any]]:
    """A user's ledger rows for their archive."""
    return list(
        UsageEntry.objects.filter(user=user)
        .order_by("created_at")
        .values(*EXPORT_FIELDS)
    )
