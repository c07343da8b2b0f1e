"""The budget check of a turn's later calls: cached limits, one statement.

Why: the first version read the limits, then locked, checked and raised the
counters and inserted the hold in a transaction: seven round trips (SELECT, BEGIN,
SET, SELECT … FOR UPDATE, UPDATE, INSERT, COMMIT) before every model call. A turn's
limits rarely change between its calls, so ``BudgetBook`` keeps them, with the
counters they count on, and a *fingerprint* of the budget rows they came from
(every field that matters, so an edit that skips ``updated_at``, such as a
queryset ``update()``, is seen too). On PostgreSQL each later check is then one
statement in autocommit, its own transaction:

1. the fingerprint of the subject's budget rows now;
2. the counters locked in id order (``FOR UPDATE``: concurrent turns queue here;
   in READ COMMITTED a locked row is read again at its newest version), if the
   fingerprint is still the one the limits came from;
3. the verdict: every counter fits its limit, and its soft threshold unless that
   was already answered (approved, or notified when the site only notifies);
4. only then the counters raised and the hold inserted;
5. ``set_config('synchronous_commit', 'off', true)``: its implicit commit does not
   wait for the WAL flush, as ``store.unsynced`` does for a transaction.

Anything else (a fingerprint that changed, a new period, a missing counter, a call
that would warn, ask or stop) changes nothing and goes to ``BudgetBook``'s full
transaction, which reads the limits again and answers with its reasons. SQLite,
and a caller inside a transaction, always take that path.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import connection

from .limits import Limit, Subject, period_start
from .models import Budget, BudgetCounter, BudgetReservation

FIELDS = (
    "id",
    "scope",
    "user_id",
    "owner_key",
    "conversation_id",
    "period",
    "limit",
    "soft_percent",
    "enabled",
    "updated_at",
)


@dataclass(kw_only=True, slots=True)
class Known:
    """A turn's limits, as of ``fingerprint``, and the counters they count on."""

    fingerprint: str | None
    """The subject's budget rows when ``limits`` were read; None off PostgreSQL."""
    limits: list[Limit]
    counters: dict[tuple[str, str], tuple[date, int]] = field(default_factory=dict)
    """``(key, period)`` → the current period's start and its counter's id."""

    def wanted(self, now: datetime) -> list[tuple[int, Limit]] | None:
        """Each limit with its counter's id, in id order; None when a counter of
        the current period is not known yet."""
        pairs = []
        for limit in self.limits:
            known = self.counters.get((limit.key, limit.period))
            if known is None or known[0] != period_start(limit.period, now):
                return None
            pairs.append((known[1], limit))
        return sorted(pairs, key=lambda pair: pair[0])


def usable() -> bool:
    """One statement is its own transaction only in autocommit, on PostgreSQL."""
    return connection.vendor == "postgresql" and connection.get_autocommit()


def rows_sql(subject: Subject) -> tuple[str, tuple[Any, ...]]:
    """The subject's budget rows, as SQL to select from."""
    query = Budget.objects.filter(subject.rows()).order_by().values(*FIELDS).query
    sql, params = query.sql_with_params()
    return sql, tuple(params)


def _fingerprint_sql(rows: str) -> str:
    columns = ", ".join(f'b."{name}"' for name in FIELDS)
    return (
        f"SELECT md5(coalesce(string_agg(ROW({columns})::text, ';' ORDER BY b.id), ''))"
        f" AS fp FROM ({rows}) AS b"
    )


def fingerprint(subject_rows: tuple[str, tuple[Any, ...]]) -> str | None:
    """The subject's budget rows now, as a hash (one statement); None off
    PostgreSQL."""
    if connection.vendor != "postgresql":
        return None
    rows, params = subject_rows
    with connection.cursor() as cursor:
        cursor.execute(_fingerprint_sql(rows), params)
        return str(cursor.fetchone()[0])


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    held: uuid.UUID | None
    """The hold's id when the call fits; None: nothing changed."""
    counters: list[int]
    fingerprint: str
    """The budget rows' fingerprint the statement saw."""


def reserve(
    *,
    known: Known,
    subject_rows: tuple[str, tuple[Any, ...]],
    amount: Decimal,
    run_id: Any,
    pass_states: list[str],
    hold_seconds: int,
    now: datetime,
) -> Outcome | None:
    """Hold ``amount`` on every counter of ``known`` in one statement if it fits
    without a question; None when the counters of this period are not known."""
    wanted = known.wanted(now)
    if wanted is None or known.fingerprint is None:
        return None
    ids = [pk for pk, _limit in wanted]
    soft = [limit.soft for _pk, limit in wanted]
    hard = [limit.amount for _pk, limit in wanted]
    hold = uuid.uuid4()
    rows, row_params = subject_rows
    counters = BudgetCounter._meta.db_table
    reservations = BudgetReservation._meta.db_table
    sql = f"""
        WITH version AS MATERIALIZED ({_fingerprint_sql(rows)}),
        wanted AS (
            SELECT * FROM unnest(%s::bigint[], %s::numeric[], %s::numeric[])
                AS w(id, hard, soft)
        ),
        locked AS MATERIALIZED (
            SELECT c.id, c.spent + c.reserved + %s AS after, c.soft_state,
                   w.hard, w.soft
            FROM {counters} c JOIN wanted w ON w.id = c.id
            WHERE (SELECT fp FROM version) = %s
            ORDER BY c.id
            FOR UPDATE OF c
        ),
        verdict AS MATERIALIZED (
            SELECT count(*) = %s AND coalesce(bool_and(
                hard > 0 AND after <= hard
                AND (soft IS NULL OR after <= soft OR soft_state = ANY(%s))
            ), false) AS ok
            FROM locked
        ),
        raised AS (
            UPDATE {counters} c SET reserved = c.reserved + %s
            FROM locked l WHERE c.id = l.id AND (SELECT ok FROM verdict)
            RETURNING c.id
        ),
        held AS (
            INSERT INTO {reservations}
                (id, run_id, amount, counters, created_at, expires_at)
            SELECT %s, %s::uuid, %s, %s::jsonb, %s, %s FROM verdict WHERE ok
            RETURNING id
        ),
        unsynced AS MATERIALIZED (
            SELECT set_config('synchronous_commit', 'off', true) AS value
        )
        SELECT (SELECT fp FROM version), (SELECT ok FROM verdict),
               (SELECT count(*) FROM raised), (SELECT count(*) FROM held),
               (SELECT value FROM unsynced)
    """
    params = (
        *row_params,
        ids,
        hard,
        soft,
        amount,
        known.fingerprint,
        len(ids),
        pass_states,
        amount,
        hold,
        str(run_id) if run_id else None,
        amount,
        json.dumps(ids),
        now,
        now + timedelta(seconds=hold_seconds),
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        seen, ok, raised, inserted, _sync = cursor.fetchone()
    fits = bool(ok) and raised == len(ids) and inserted == 1
    return Outcome(held=hold if fits else None, counters=ids, fingerprint=str(seen))
