"""Reserve, settle, release: the Django ``BudgetStore`` of one turn.

A reservation is one transaction: the counters of every limit that applies are
locked (``SELECT … FOR UPDATE`` in id order, so concurrent turns of one user queue
on them instead of both fitting the last dollar), checked, and raised by the
call's estimate; a ``BudgetReservation`` row remembers what it holds. The reply's
ledger row settles it inside the step's own transaction (``ledger.TurnLedger``),
so a settled call costs no commit of its own. A call that never replied (failed,
cancelled) gives its reservation back at the turn's end; one a crashed worker held
expires and is given back by the next call that would not fit without it, or by
the sweeper.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal
from typing import Any

from django.db import connection, transaction
from django.db.models import Case, F, Q, Sum, Value, When
from django.db.models.functions import Greatest
from django.utils import timezone
from django.utils.translation import gettext as _

from sagents_django.core import InvalidResume, TokenUsage
from sagents_django.core.middleware.spend_budget import BudgetDecision, CallEstimate
from sagents_django.models import COST_QUANTUM
from sagents_django.scope import Scope

from . import approval, quick_check
from .config import BudgetSettings
from .limits import Limit, Subject, applicable, period_start, start_moment
from .models import BudgetCounter, BudgetReservation, UsageEntry
from .texts import approval_text, exhausted_text, unpriced_text, warning_text

logger = logging.getLogger(__name__)

PERMISSION = approval.PERMISSION
MILLION = Decimal(1_000_000)
PASS_STATES = {"approve": ["approved"], "notify": ["notified", "approved"]}
"""The soft states past which a call goes on without a question (``judge``)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Held:
    """A reservation this turn holds until its reply is recorded."""

    id: Any
    amount: Decimal
    counters: list[int]


def price(
    model: str, usage: TokenUsage, config: BudgetSettings | None
) -> Decimal | None:
    """What ``usage`` counts against budgets: litellm's price, else the site's
    rate for unpriced models, else None (unpriced is never free)."""
    from sagents_django.runtime.usage import cost_of

    cost = cost_of(model, usage)
    if cost is not None or config is None or config.unpriced_rate is None:
        return cost
    rate_in, rate_out = config.unpriced_rate
    total = (usage.input * rate_in + usage.output * rate_out) / MILLION
    return total.quantize(COST_QUANTUM, rounding=ROUND_CEILING)


RATE_PROBES = (1_000, 100_000, 10_000_000)
"""Token counts at which a model's price is probed: equal per token at all three,
it has no tier (litellm prices some models higher above 128k or 200k tokens)."""
_rates: dict[str, tuple[Decimal, Decimal] | None] = {}


def estimate_price(estimate: CallEstimate, config: BudgetSettings) -> Decimal | None:
    """An estimate's price as ``price`` gives it, from per-token rates looked up
    once per model (a litellm lookup costs about 0.3 ms, a third of the check's
    target) while the model's price is linear up to the largest probe."""
    usage = TokenUsage(input=estimate.prompt_tokens, output=estimate.max_output_tokens)
    if estimate.model not in _rates:
        _rates[estimate.model] = linear_rates(estimate.model)
    rates = _rates[estimate.model]
    if rates is None or max(usage.input, usage.output) > RATE_PROBES[-1]:
        return price(estimate.model, usage, config)
    if usage.input <= 0 and usage.output <= 0:
        return Decimal(0)
    total = usage.input * rates[0] + usage.output * rates[1]
    return total.quantize(COST_QUANTUM, rounding=ROUND_HALF_UP)


def linear_rates(model: str) -> tuple[Decimal, Decimal] | None:
    """USD per input and per output token, when litellm prices ``model`` the same
    per token at every probe; else None."""
    from sagents_django.runtime.usage import cost_of

    rates: list[Decimal] = []
    for side in ("input", "output"):
        per_token = set()
        for n in RATE_PROBES:
            cost = cost_of(model, TokenUsage(**{side: n}))
            if cost is None:
                return None
            per_token.add(cost / n)
        if len(per_token) != 1:
            return None
        rates.append(per_token.pop())
    return rates[0], rates[1]


class BudgetBook:
    """The budgets of one turn's calls (sync: called on a database thread)."""

    def __init__(
        self,
        *,
        scope: Scope,
        conversation_id: Any,
        run_id: Any,
        config: BudgetSettings,
    ) -> None:
        self.scope = scope
        self.subject = Subject.of(scope, conversation_id)
        self.run_id = run_id
        self.config = config
        self.open: dict[Any, Held] = {}
        """Holds not settled yet, by reservation id (a turn's own calls and its
        sub-agents' calls, which may run in parallel)."""
        self.known: quick_check.Known | None = None
        """The limits as last read, checked against the rows before each call
        (``quick_check``); a plan's (``BUDGET_FOR``) are read again only when
        the rows change."""
        self.rows = quick_check.rows_sql(self.subject)

    # Reserving -------------------------------------------------------------------
    def reserve(self, estimate: CallEstimate) -> BudgetDecision:
        known = self.known
        if known is not None and quick_check.usable():
            quick = self._quick(known, estimate)
            if quick is not None:
                return quick
        limits = self._load().limits
        if not limits:
            return BudgetDecision(outcome="allow")
        amount = estimate_price(estimate, self.config)
        if amount is None:
            data = {"reason": "unpriced", "model": estimate.model}
            return BudgetDecision(
                outcome="exhausted", message=unpriced_text(data), data=data
            )
        for attempt in range(2):
            decision = self._try(limits, amount)
            if decision.outcome != "exhausted" or attempt or not expire_reservations():
                return decision
        return decision  # pragma: no cover (the loop returns)

    def _load(self) -> quick_check.Known:
        """The limits on this turn's calls, read now (the fingerprint first: an
        edit between the two reads is seen at the next call)."""
        seen = quick_check.fingerprint(self.rows)
        known = quick_check.Known(
            fingerprint=seen, limits=applicable(self.scope, self.subject, self.config)
        )
        self.known = known
        return known

    def _quick(
        self, known: quick_check.Known, estimate: CallEstimate
    ) -> BudgetDecision | None:
        """The check in one statement when the cached limits still hold and the
        call fits without a question; None: ask the full transaction."""
        if not known.limits:
            if quick_check.fingerprint(self.rows) == known.fingerprint:
                return BudgetDecision(outcome="allow")
            return None
        amount = estimate_price(estimate, self.config)
        if amount is None:
            return None
        outcome = quick_check.reserve(
            known=known,
            subject_rows=self.rows,
            amount=amount,
            run_id=self.run_id,
            pass_states=PASS_STATES[self.config.soft_action],
            hold_seconds=self.config.reservation_seconds,
            now=timezone.now(),
        )
        if outcome is None or outcome.held is None:
            return None
        held = Held(id=outcome.held, amount=amount, counters=outcome.counters)
        self.open[held.id] = held
        return BudgetDecision(outcome="allow", hold=held)

    def _try(self, limits: list[Limit], amount: Decimal) -> BudgetDecision:
        now = timezone.now()
        with transaction.atomic():
            unsynced()
            counters = lock_counters(limits, self.subject, now)
            if self.known is not None:
                self.known.counters = {
                    pair: (row.starts, row.pk) for pair, row in counters.items()
                }
            decision, notify = judge(limits, counters, amount, self.config)
            if decision.outcome not in ("allow", "warn"):
                return decision
            ids = sorted(c.pk for c in counters.values())
            BudgetCounter.objects.filter(pk__in=ids).update(
                reserved=F("reserved") + amount
            )
            if notify is not None:
                BudgetCounter.objects.filter(pk=notify.pk).update(soft_state="notified")
            row = BudgetReservation.objects.create(
                run_id=self.run_id,
                amount=amount,
                counters=ids,
                expires_at=now + timedelta(seconds=self.config.reservation_seconds),
            )
            held = Held(id=row.pk, amount=amount, counters=ids)
            self.open[held.id] = held
        decision.hold = held
        return decision

    # Settling and releasing ---------------------------------------------------------
    def settle(self, hold: Held | None, charged: Decimal | None) -> None:
        """Inside the transaction that records the call: add what it cost to
        every counter of this subject's current periods, and drop its hold (what
        it reserved is counted when the call said nothing of its usage)."""
        held = hold if hold is not None and hold.id in self.open else None
        now = timezone.now()
        spent = charged if charged is not None else (held.amount if held else None)
        current = Q()
        for key in self.subject.counter_keys():
            for period in ("day", "month", "total"):
                current |= Q(key=key, period=period, starts=period_start(period, now))
        if held is not None:
            current |= Q(pk__in=held.counters)
        changes: dict[str, Any] = {}
        if spent:
            changes["spent"] = F("spent") + spent
        if held is not None:
            changes["reserved"] = Case(
                When(pk__in=held.counters, then=taken(held.amount)),
                default=F("reserved"),
            )
        if changes:
            BudgetCounter.objects.filter(current).update(**changes)
        if held is not None:
            BudgetReservation.objects.filter(pk=held.id).delete()
            # Only once committed: a unit tried again settles it again.
            transaction.on_commit(lambda: self.open.pop(held.id, None))

    def release(self, hold: Held | None) -> None:
        """Give back a hold no reply settled."""
        held = self.open.pop(hold.id, None) if hold is not None else None
        if held is None:
            return
        with transaction.atomic():
            unsynced()
            if BudgetReservation.objects.filter(pk=held.id).delete()[0]:
                give_back(held.counters, held.amount)

    # Approving ----------------------------------------------------------------------
    def decide(self, data: dict[str, Any], approved: bool) -> None:
        # Decided through an approval request (the inbox, the chat page, a link):
        # by whoever voted; resumed directly: by the person the agent acts for.
        recorded, user = approval.decider(self.run_id)
        if not recorded:
            user = self.scope.user if self.scope.is_authenticated else None
        if user is None or not user.is_active or not user.has_perm(PERMISSION):
            raise InvalidResume(
                _("Only someone allowed to raise budgets may answer this request.")
            )
        key, period = data.get("key"), data.get("period")
        try:
            starts = date.fromisoformat(str(data.get("starts")))
        except ValueError:
            raise InvalidResume(
                f"Not a budget period: {data.get('starts')!r}"
            ) from None
        updated = BudgetCounter.objects.filter(
            key=key, period=period, starts=starts
        ).update(
            soft_state="approved" if approved else "declined",
            decided_by=user,
        )
        if not updated:
            raise InvalidResume(f"No budget counter {key!r} {period!r} {starts!r}")


def unsynced() -> None:
    """On PostgreSQL, this transaction's commit does not wait for its WAL flush
    (``synchronous_commit`` off, for it alone). A reservation is a hold, not a
    fact: one a server crash loses is one that expired (its call is settled by
    the ledger row, which is written durably with the reply)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")


def lock_counters(
    limits: list[Limit], subject: Subject, now: Any
) -> dict[tuple[str, str], BudgetCounter]:
    """The counters of ``limits``' current periods, locked; made when missing (from
    the ledger's sum so far)."""
    wanted = {
        (limit.key, limit.period): period_start(limit.period, now) for limit in limits
    }
    query = Q()
    for (key, period), starts in wanted.items():
        query |= Q(key=key, period=period, starts=starts)

    def locked() -> dict[tuple[str, str], BudgetCounter]:
        rows = BudgetCounter.objects.select_for_update().filter(query).order_by("pk")
        return {(row.key, row.period): row for row in rows}

    found = locked()
    missing = [pair for pair in wanted if pair not in found]
    if missing:
        BudgetCounter.objects.bulk_create(
            [
                BudgetCounter(
                    key=key,
                    period=period,
                    starts=wanted[(key, period)],
                    spent=ledger_sum(key, wanted[(key, period)]),
                )
                for key, period in missing
            ],
            ignore_conflicts=True,
        )
        found = locked()
    return found


def judge(
    limits: list[Limit],
    counters: dict[tuple[str, str], BudgetCounter],
    amount: Decimal,
    config: BudgetSettings,
) -> tuple[BudgetDecision, BudgetCounter | None]:
    """The tightest answer over every limit, and the counter to mark notified."""
    answer, notify = BudgetDecision(outcome="allow"), None
    for limit in sorted(limits, key=lambda item: item.amount):
        counter = counters[(limit.key, limit.period)]
        used = counter.spent + counter.reserved
        after = used + amount
        data = details(limit, counter, amount)
        soft = limit.soft
        declined = counter.soft_state == "declined"
        # A limit of 0 stops every call, a free model's too.
        over = after > limit.amount or limit.amount <= 0
        if over or (soft is not None and declined and after > soft):
            return BudgetDecision(
                outcome="exhausted", message=exhausted_text(data), data=data
            ), None
        if soft is None or after <= soft or answer.outcome != "allow":
            continue
        if config.soft_action == "approve" and counter.soft_state != "approved":
            answer = BudgetDecision(
                outcome="approve", message=approval_text(data), data=data
            )
        elif config.soft_action == "notify" and counter.soft_state == "":
            answer = BudgetDecision(
                outcome="warn", message=warning_text(data), data=data
            )
            notify = counter
    return answer, notify


def details(limit: Limit, counter: BudgetCounter, amount: Decimal) -> dict[str, Any]:
    used = counter.spent + counter.reserved
    return {
        "scope": limit.scope,
        "key": limit.key,
        "period": limit.period,
        "starts": counter.starts.isoformat(),
        "limit": str(limit.amount),
        "spent": str(used.quantize(Decimal("0.0001"))),
        "remaining": str(
            max(limit.amount - used, Decimal(0)).quantize(Decimal("0.0001"))
        ),
        "estimate": str(amount.quantize(Decimal("0.000001"))),
    }


def ledger_sum(key: str, starts: Any) -> Decimal:
    """What the ledger holds for ``key`` since ``starts`` (a counter's first value)."""
    kind, _sep, value = key.partition(":")
    entries = UsageEntry.objects.filter(created_at__gte=start_moment(starts))
    if kind == "user":
        entries = entries.filter(user_id=value)
    elif kind == "owner":
        entries = entries.filter(owner_key=value)
    elif kind == "conversation":
        entries = entries.filter(conversation_id=value)
    return entries.aggregate(total=Sum("charged"))["total"] or Decimal(0)


def give_back(counter_ids: list[int], amount: Decimal) -> None:
    BudgetCounter.objects.filter(pk__in=counter_ids).update(reserved=taken(amount))


def taken(amount: Decimal) -> Any:
    """``reserved`` less ``amount``, never below 0 (a hold a server crash lost is
    not given back twice)."""
    return Greatest(F("reserved") - amount, Value(Decimal(0)))


def expire_reservations(now: Any = None) -> int:
    """Give back the reservations whose worker never settled them (it crashed);
    how many. Each in its own short transaction, skipping those being settled."""
    now = now or timezone.now()
    count = 0
    with transaction.atomic():
        stale = list(
            BudgetReservation.objects.select_for_update(skip_locked=True).filter(
                expires_at__lt=now
            )[:500]
        )
        for row in stale:
            give_back(list(row.counters), row.amount)
        BudgetReservation.objects.filter(pk__in=[r.pk for r in stale]).delete()
        count = len(stale)
    if count:
        logger.info("Gave back %d expired budget reservations", count)
    return count
