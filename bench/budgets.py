"""The budget check before each model call, at a million ledger rows.

The ledger holds 1,000,000 model calls (100,000 with ``--quick``) of 1,000 users
over 60 days; the measured user has 3,000 of them this month. Three limits apply to
that user (the site's month, the user's month and day), as ``Budget`` rows. Measured:

- ``reserve``: ``BudgetBook.reserve`` then its release, per call, after the turn's
  first call (which read the limits and found the counters): the limits kept, checked
  against the budget rows' fingerprint, the three counters locked, checked and
  raised and the reservation inserted in one statement (``budgets/quick_check.py``);
  the target is 1 ms;
- of which pricing: the estimate priced from the model's per-token rates (litellm's
  offline cost map, looked up once per model);
- the estimate: ``SpendBudget.estimate`` on a 100-message history (the prompt's
  tokens with litellm's tokenizer, cached per message as the loop does);
- ``settle``: what the reply's transaction adds: the ledger row and the counters'
  update (``TurnLedger.write``), per call;
- the first check of a period: a missing counter made from the ledger's sum (once
  per scope and period), at this ledger size;
- statements and commits of each.

The databases are the benchmark's own (``bench/databases.py``).

Run from the repository root::

    .venv/bin/python bench/budgets.py --database postgres
    .venv/bin/python bench/budgets.py --database postgres --quick

A benchmark, not a test: it prints figures and asserts no thresholds.
"""

from __future__ import annotations

import os
import statistics
import time
from decimal import Decimal
from typing import Any

from databases import bench_database, database_options

POSTGRES_URL = os.environ.get(
    "BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/sagents_bench"
)
USERS = 1000
MINE = 3000
"""The measured user's calls this month."""


def main() -> None:
    options = database_options(__doc__.split("\n\n")[0], __file__)
    if options is None:
        return
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    rows = 100_000 if options.quick else 1_000_000
    calls = options.runs or (200 if options.quick else 1000)
    with bench_database(
        options.database,
        postgres_url=POSTGRES_URL,
        postgres_name="test_sagents_bench_budgets",
    ):
        run(options.database, rows, calls)


def seed(rows: int) -> Any:
    """The users and the ledger, written in bulk (one statement on PostgreSQL)."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.utils import timezone

    from sagents_django.models import UsageEntry

    users = get_user_model().objects.bulk_create(
        [get_user_model()(username=f"u{n}") for n in range(USERS)]
    )
    me = users[0]
    now = timezone.now()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                f"""
                INSERT INTO {UsageEntry._meta.db_table}
                    (created_at, user_id, owner_key, model, input_tokens,
                     output_tokens, cost, charged, anonymised)
                SELECT %s - (n %% 60) * interval '1 day' - (n %% 86400) * interval '1 s',
                       %s + n %% %s, (%s + n %% %s)::text, 'openai/gpt-4o-mini',
                       900 + n %% 300, 100 + n %% 50, 0.0002, 0.0002, false
                FROM generate_series(1, %s) AS n
                """,
                [now, users[1].pk, USERS - 1, users[1].pk, USERS - 1, rows - MINE],
            )
    else:
        batch = []
        for n in range(rows - MINE):
            who = users[1 + n % (USERS - 1)]
            batch.append(_entry(who, now, n))
            if len(batch) == 10_000:
                UsageEntry.objects.bulk_create(batch)
                batch = []
        UsageEntry.objects.bulk_create(batch)
    start = now.replace(day=1)
    span = max((now - start).total_seconds(), 1)
    UsageEntry.objects.bulk_create(
        [
            _entry(me, start + (now - start) * (n / MINE), n, span=span)
            for n in range(MINE)
        ]
    )
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {UsageEntry._meta.db_table}")
    return me


def _entry(user: Any, when: Any, n: int, span: float = 0) -> Any:
    from sagents_django.models import UsageEntry

    return UsageEntry(
        created_at=when,
        user=user,
        owner_key=str(user.pk),
        model="openai/gpt-4o-mini",
        input_tokens=900 + n % 300,
        output_tokens=100 + n % 50,
        cost=Decimal("0.0002"),
        charged=Decimal("0.0002"),
    )


def run(database: str, rows: int, calls: int) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from sagents_django.budgets.config import parse
    from sagents_django.budgets.store import BudgetBook, estimate_price, price
    from sagents_django.budgets.turns import TurnLedger
    from sagents_django.core import Message, SpendBudget, State, TokenUsage
    from sagents_django.core.middleware.spend_budget import CallEstimate
    from sagents_django.models import Budget, BudgetCounter
    from sagents_django.scope import Scope

    print(f"\n{database} ({connection.vendor}): {rows:,} ledger rows, {USERS:,} users")
    started = time.perf_counter()
    me = seed(rows)
    print(
        f"  seeding                              {time.perf_counter() - started:8.1f} s"
    )
    scope = Scope.for_user(me)
    Budget.objects.create(scope="site", period="month", limit=Decimal("100000"))
    Budget.objects.create(scope="user", user=me, period="month", limit=Decimal("1000"))
    Budget.objects.create(scope="user", user=me, period="day", limit=Decimal("100"))
    config = parse({"MAX_OUTPUT_TOKENS": 1000})
    assert config is not None
    book = BudgetBook(scope=scope, conversation_id=None, run_id=None, config=config)
    estimate = CallEstimate(
        model="openai/gpt-4o-mini", prompt_tokens=3500, max_output_tokens=1000
    )
    price(estimate.model, TokenUsage(input=1, output=1), None)  # imports litellm

    started = time.perf_counter()
    with CaptureQueriesContext(connection) as first:
        decision = book.reserve(estimate)
    made = (time.perf_counter() - started) * 1000
    book.release(decision.hold)
    counters = BudgetCounter.objects.filter(key__startswith="user:")
    spent = {c.period: c.spent for c in counters}
    print(
        f"  first check of a period (counters from the ledger's sum)  {made:8.2f} ms, "
        f"{len(first.captured_queries)} statements; month so far ${spent.get('month')}"
    )

    reserve, release, pricing, in_sql = [], [], [], []
    with CaptureQueriesContext(connection) as one:
        decision = book.reserve(estimate)
    book.release(decision.hold)
    clock = StatementClock()
    for _ in range(calls):
        t0 = time.perf_counter()
        with connection.execute_wrapper(clock):
            decision = book.reserve(estimate)
        t1 = time.perf_counter()
        in_sql.append(clock.take())
        book.release(decision.hold)
        t2 = time.perf_counter()
        estimate_price(estimate, config)
        t3 = time.perf_counter()
        reserve.append((t1 - t0) * 1000)
        release.append((t2 - t1) * 1000)
        pricing.append((t3 - t2) * 1000)
    statements = len(one.captured_queries)
    kinds = " ".join(q["sql"].split()[0] for q in one.captured_queries)
    print(
        f"  reserve (the check), per call        {_median(reserve):8.3f} ms median, "
        f"p95 {_p95(reserve):.3f} ms ({statements} statements)"
    )
    print(f"    statements: {kinds}; one round trip (SELECT 1): {round_trip():.3f} ms")
    print(f"    of which in its statements         {_median(in_sql):8.3f} ms median")
    rest = [r - q for r, q in zip(reserve, in_sql, strict=True)]
    print(
        f"    the rest (Python, any BEGIN/COMMIT) {_median(rest):7.3f} ms median "
        f"(the server's floor, one INSERT + COMMIT: {floor():.3f} ms)"
    )
    print(f"    of which pricing (per-token rates) {_median(pricing):8.3f} ms median")
    print(f"  release (a call that never replied)  {_median(release):8.3f} ms median")

    agent_state = State(
        messages=[
            Message.user("w" * 400) if n % 2 == 0 else Message.assistant("w" * 1200)
            for n in range(100)
        ]
    )
    from sagents_django.core import Agent

    agent = Agent(model="openai/gpt-4o-mini", base_system_prompt="You help.")
    middleware = SpendBudget(store=book)
    agent.add_middleware(middleware)
    middleware.estimate(agent_state)
    timings = []
    for _ in range(calls):
        t0 = time.perf_counter()
        middleware.estimate(agent_state)
        timings.append((time.perf_counter() - t0) * 1000)
    print(
        f"  estimate, 100-message history        {_median(timings):8.3f} ms median "
        f"(cached per message, as the loop counts)"
    )

    ledger = TurnLedger(
        scope=scope, conversation_id=None, run_id=None, model=estimate.model, book=book
    )
    settle = []
    hold = book.reserve(estimate).hold
    with CaptureQueriesContext(connection) as written:
        _settle_once(ledger, hold)
    for _ in range(calls):
        hold = book.reserve(estimate).hold
        t0 = time.perf_counter()
        _settle_once(ledger, hold)
        settle.append((time.perf_counter() - t0) * 1000)
    kinds = [q["sql"].split()[0] for q in written.captured_queries]
    inside = [k for k in kinds if k not in ("SAVEPOINT", "RELEASE")]
    print(
        f"  settle in the reply's transaction    {_median(settle):8.3f} ms median "
        f"(statements: {', '.join(inside)})"
    )


def _settle_once(ledger: Any, hold: Any) -> None:
    """What the reply's transaction adds (``TurnLedger.write`` of the turn's
    call): the ledger row and the hold settled."""
    from django.db import transaction

    from sagents_django.core import TokenUsage

    with transaction.atomic():
        ledger.record("openai/gpt-4o-mini", TokenUsage(input=3500, output=200), hold)


class StatementClock:
    """An ``execute_wrapper`` summing the time spent in statements."""

    def __init__(self) -> None:
        self.total = 0.0

    def __call__(
        self, execute: Any, sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.total += time.perf_counter() - started

    def take(self) -> float:
        total, self.total = self.total, 0.0
        return total * 1000


def round_trip() -> float:
    """``SELECT 1``: the price of any statement on this machine, now."""
    from django.db import connection

    times = []
    with connection.cursor() as cursor:
        for _ in range(200):
            started = time.perf_counter()
            cursor.execute("SELECT 1")
            cursor.fetchone()
            times.append((time.perf_counter() - started) * 1000)
    return _median(times)


def floor() -> float:
    """One raw INSERT and its COMMIT: what any committed write costs here."""
    from django.db import connection, transaction

    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS budgets_floor_probe (n int)")
    times = []
    for n in range(100):
        started = time.perf_counter()
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("INSERT INTO budgets_floor_probe VALUES (%s)", [n])
        times.append((time.perf_counter() - started) * 1000)
    return _median(times)


def _median(values: list[float]) -> float:
    return statistics.median(values)


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[int(len(ordered) * 0.95) - 1]


if __name__ == "__main__":
    main()
