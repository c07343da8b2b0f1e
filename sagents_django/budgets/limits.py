"""Which limits apply to a model call, and the periods they count in.

Three sources, in this order of precedence for one scope key and period: a
``Budget`` row (what an admin set, even a disabled one, which lifts the limit), the
site's plan hook ``BUDGET_FOR(scope)``, and ``SAGENTS["BUDGETS"]["DEFAULTS"]``. Rows
are read again before every call, so an admin's edit applies to the next call of a
running turn. Periods follow the current time zone (``settings.TIME_ZONE``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

from django.db.models import Q
from django.utils import timezone
from django.utils.module_loading import import_string

from sagents_django.scope import Scope, conversation_model

from .config import BudgetSettings, limit_spec
from .models import Budget, scope_key

EPOCH = date(1970, 1, 1)


@dataclass(frozen=True, kw_only=True, slots=True)
class Limit:
    key: str
    """The counter's key (``models.scope_key``)."""
    scope: str
    period: str
    amount: Decimal
    soft_percent: int
    source: str
    """``row``, ``plan`` or ``settings``."""

    @property
    def soft(self) -> Decimal | None:
        """The amount past which the site warns or asks; None: never."""
        if self.soft_percent >= 100:
            return None
        return self.amount * self.soft_percent / 100


@dataclass(frozen=True, kw_only=True, slots=True)
class Subject:
    """Whose call it is: the keys its spend counts under."""

    user_pk: Any
    owner_pk: Any
    conversation_id: str | None

    @classmethod
    def of(cls, scope: Scope, conversation_id: Any) -> Subject:
        user = scope.user
        user_pk = user.pk if scope.is_authenticated else None
        return cls(
            user_pk=user_pk,
            owner_pk=scope.owner_pk(conversation_model()),
            conversation_id=str(conversation_id) if conversation_id else None,
        )

    def key(self, scope: str) -> str | None:
        value = {
            "site": "",
            "owner": self.owner_pk,
            "user": self.user_pk,
            "conversation": self.conversation_id,
        }[scope]
        if value is None:
            return None
        return scope_key(scope, user=value, owner=str(value), conversation=value)

    def counter_keys(self) -> list[str]:
        scopes = ("site", "owner", "user", "conversation")
        return [key for s in scopes if (key := self.key(s)) is not None]

    def rows(self) -> Q:
        q = Q(scope="site")
        if self.user_pk is not None:
            q |= Q(scope="user", user_id=self.user_pk)
        if self.owner_pk is not None:
            q |= Q(scope="owner", owner_key=str(self.owner_pk))
        if self.conversation_id is not None:
            q |= Q(scope="conversation", conversation_id=self.conversation_id)
        return q


def applicable(scope: Scope, subject: Subject, config: BudgetSettings) -> list[Limit]:
    """The limits on this call (one per key and period)."""
    chosen: dict[tuple[str, str], Limit | None] = {}
    for row in Budget.objects.filter(subject.rows()):
        pair = (row.key, row.period)
        chosen[pair] = (
            Limit(
                key=row.key,
                scope=row.scope,
                period=row.period,
                amount=row.limit,
                soft_percent=row.soft_percent,
                source="row",
            )
            if row.enabled
            else None
        )
    sources: list[tuple[str, Any]] = []
    if config.budget_for:
        sources.append(("plan", import_string(config.budget_for)(scope) or []))
    sources.append(("settings", config.defaults))
    for source, specs in sources:
        for raw in specs:
            spec = raw if not isinstance(raw, dict) else limit_spec(raw)
            key = subject.key(spec.scope)
            if key is None or (key, spec.period) in chosen:
                continue
            chosen[(key, spec.period)] = Limit(
                key=key,
                scope=spec.scope,
                period=spec.period,
                amount=spec.limit,
                soft_percent=spec.soft_percent,
                source=source,
            )
    return [limit for limit in chosen.values() if limit is not None]


def period_start(period: str, now: datetime | None = None) -> date:
    if period == "total":
        return EPOCH
    today = timezone.localdate(now or timezone.now())
    return today if period == "day" else today.replace(day=1)


def start_moment(starts: date) -> datetime:
    """The first instant of a period, in the current time zone."""
    return timezone.make_aware(datetime.combine(starts, time.min))
