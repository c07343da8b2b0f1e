"""An ORM tool's pages over 100,000 rows: keyset pages cost the same at any depth.

The shop of the tests (``tests.shop``): alice's shop holds 100,000 orders and bob's
another 100,000 in the same table. ``ModelTools`` over alice's orders (the tests'
configuration, ``tests.shop.tools``) answers ``order_list`` calls; each figure is
the median of several calls of the tool's function, as the core runs it but on this
thread's open connection (the runtime adds a thread hop and, with Django's default
``CONN_MAX_AGE = 0``, a new connection per call: the "through the core" row).

- page 1, the page halfway and the last page, 99,950 rows deep (by the cursors
  ``next_cursor`` gave, found by walking every page once: the walk's first and last
  20 pages are printed too), 50 rows a page, newest first; and with a filter;
- for comparison, the last page as an OFFSET query would read it (what a tool
  without cursors does: the database steps over 99,950 rows), and page 1 of a
  queryset that finds the tenant through a join (``shop__owner=user``) instead of
  by its key: the database then sorts every row of the tenant for each page;
- ``order_count`` (stops at its limit, 10,000 here) against an exact ``COUNT(*)``;
- ``order_search`` for a word no row holds: ``icontains`` has no index, so a search
  reads every row of the tenant (the cost a site accepts by offering search);
- the queries one call makes, and the database's plan for page 1 and the deep page.

The databases are the benchmark's own: Django's test-database machinery creates
``test_sagents_bench_model_tools`` on the PostgreSQL server (127.0.0.1:5432 unless
``BENCH_POSTGRES_URL`` says otherwise) and a temporary SQLite file, and drops them
at the end. Run from the repository root::

    .venv/bin/python bench/model_tools.py                  # both databases
    .venv/bin/python bench/model_tools.py --database sqlite
    .venv/bin/python bench/model_tools.py --quick          # 20,000 rows a shop

A benchmark, not a test: it prints figures and asserts no thresholds.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from databases import bench_database, database_options

REPO = Path(__file__).resolve().parent.parent
POSTGRES_URL = os.environ.get(
    "BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/sagents_bench_model_tools"
)
PAGE = 50


def main() -> None:
    options = database_options(__doc__.split("\n\n")[0], __file__)
    if options is None:
        return
    rows = 20_000 if options.quick else 100_000
    run(options.database, rows=rows, runs=options.runs or (5 if options.quick else 15))


def run(database: str, *, rows: int, runs: int) -> None:
    # The suite's settings: the project's plus the tests' shop app.
    with bench_database(
        database, postgres_url=POSTGRES_URL, settings_module="tests.settings"
    ):
        Bench(rows=rows, runs=runs).report()


def fill(rows: int) -> Any:
    """Two shops of ``rows`` orders each; alice's scope."""
    from decimal import Decimal

    from django.contrib.auth import get_user_model
    from django.db import connection

    from sagents_django.scope import Scope
    from tests.shop.models import Customer, Order, Product, Shop

    product = Product.objects.create(name="Tea", sku="TEA-1")
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    scope = None
    for name in ("alice", "bob"):
        user = get_user_model().objects.create_user(username=name)
        shop = Shop.objects.create(name=name, owner=user)
        customers = Customer.objects.bulk_create(
            Customer(shop=shop, name=f"{name} customer {i}") for i in range(100)
        )
        batch = []
        for i in range(rows):
            batch.append(
                Order(
                    shop=shop,
                    product=product,
                    customer=customers[i % 100],
                    number=f"{name[0].upper()}-{i:07}",
                    status=("open", "paid", "shipped")[i % 3],
                    total=Decimal(i % 500) + Decimal("0.99"),
                    # Ties every 4 rows: the key orders rows within a tie.
                    placed_at=start + datetime.timedelta(minutes=i // 4),
                    note=f"order {i} of {name}",
                )
            )
            if len(batch) == 5_000:
                Order.objects.bulk_create(batch)
                batch = []
        Order.objects.bulk_create(batch)
        if name == "alice":
            scope = Scope.for_user(user)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return scope


class Bench:
    def __init__(self, *, rows: int, runs: int) -> None:
        from sagents_django.core import State, ToolContext
        from tests.shop.models import Order
        from tests.shop.tools import ORDERS, order_tools

        self.rows = rows
        self.runs = runs
        started = time.perf_counter()
        self.scope = fill(rows)
        self.fill_seconds = time.perf_counter() - started
        self.configuration = {**ORDERS, "max_page_size": PAGE, "count_limit": 10_000}
        self.model_tools = order_tools(**self.configuration)
        self.tools = {t.name: t for t in self.model_tools.tools()}
        user = self.scope.user
        joined = order_tools(
            **{
                **self.configuration,
                "get_queryset": lambda scope: Order.objects.filter(shop__owner=user),
            }
        )
        self.joined = next(t for t in joined.tools() if t.name == "order_list")
        self.context = ToolContext(
            state=State(), agent_id=None, tool_context={"scope": self.scope}
        )

    def call(self, name: str, args: dict[str, Any]) -> str:
        result = self.tools[name].function(args, self.context)
        assert isinstance(result, str), result.content  # no tool error
        return result

    def median_ms(self, work: Callable[[], Any]) -> float:
        work()  # warm: the first call compiles nothing we want to time
        times = []
        for _ in range(self.runs):
            started = time.perf_counter()
            work()
            times.append(time.perf_counter() - started)
        return statistics.median(times) * 1000

    def walk(
        self, filters: dict[str, Any] | None = None
    ) -> tuple[list[float], list[str]]:
        """Every page once, by cursor: each page's time, and the cursors given."""
        import json

        args: dict[str, Any] = {
            "limit": PAGE,
            **({"filters": filters} if filters else {}),
        }
        times: list[float] = []
        cursors: list[str] = []
        while True:
            started = time.perf_counter()
            page = json.loads(self.call("order_list", args))
            times.append(time.perf_counter() - started)
            if page["next_cursor"] is None:
                return times, cursors
            args["cursor"] = page["next_cursor"]
            cursors.append(args["cursor"])

    def report(self) -> None:
        from django.db import connection

        engine = (
            f"PostgreSQL {connection.pg_version // 10000}"
            if connection.vendor == "postgresql"
            else f"SQLite {connection.Database.sqlite_version} (file)"
        )
        print(
            f"\n{engine}: {self.rows:,} orders in each of 2 shops (filled in "
            f"{self.fill_seconds:.1f} s); medians of {self.runs} calls, {PAGE} rows "
            "a page"
        )
        times, cursors = self.walk()
        middle = len(cursors) // 2
        middle_args = {"limit": PAGE, "cursor": cursors[middle - 1]}
        deep_args = {"limit": PAGE, "cursor": cursors[-1]}
        first_args: dict[str, Any] = {"limit": PAGE}
        paid = {"status": "paid"}
        paid_times, paid_cursors = self.walk(paid)
        paid_deep = paid_cursors[-1]
        figures = [
            (
                "list page 1",
                self.median_ms(lambda: self.call("order_list", first_args)),
            ),
            (
                f"list page {middle + 1} (after {middle * PAGE:,} rows, cursor)",
                self.median_ms(lambda: self.call("order_list", middle_args)),
            ),
            (
                f"list page {len(times)} (after {self.rows - PAGE:,} rows, cursor)",
                self.median_ms(lambda: self.call("order_list", deep_args)),
            ),
            (
                f"  the same rows by OFFSET {self.rows - PAGE:,} (no cursor)",
                self.median_ms(lambda: self.offset_page(self.rows - PAGE)),
            ),
            (
                "  page 1 of a queryset joined through shop__owner",
                self.median_ms(self.joined_page),
            ),
            (
                "list page 1, status=paid",
                self.median_ms(
                    lambda: self.call("order_list", {**first_args, "filters": paid})
                ),
            ),
            (
                f"list page {len(paid_times)}, status=paid (cursor)",
                self.median_ms(
                    lambda: self.call(
                        "order_list",
                        {"limit": PAGE, "filters": paid, "cursor": paid_deep},
                    )
                ),
            ),
            (
                "count (stops at 10,000)",
                self.median_ms(lambda: self.call("order_count", {})),
            ),
            ("  exact COUNT(*) of the shop's rows", self.median_ms(self.exact_count)),
            (
                "search, a word no row holds (reads every row)",
                self.median_ms(
                    lambda: self.call("order_search", {"query": "zebra", "limit": PAGE})
                ),
            ),
            (
                "list page 1 through the core (thread, new connection)",
                self.median_ms(self.through_core),
            ),
        ]
        width = max(len(label) for label, _ in figures)
        print(f"| {'call'.ljust(width)} | median ms |")
        print(f"| {'-' * width} | --------: |")
        for label, value in figures:
            print(f"| {label.ljust(width)} | {value:9.2f} |")
        walked = (
            statistics.median(times[:20]) * 1000,
            statistics.median(times[-20:]) * 1000,
        )
        print(
            f"walking all {len(times)} pages: {sum(times):.2f} s; median of the first "
            f"20 pages {walked[0]:.2f} ms, of the last 20 {walked[1]:.2f} ms"
        )
        print("statements of one call: the site's shop lookup, then the page")
        self.queries(first_args, middle_args)

    def offset_page(self, offset: int) -> list[Any]:
        from tests.shop.tools import orders_of

        rows = orders_of(self.scope).order_by("-placed_at", "-pk")
        return list(
            rows.values(*self.model_tools.spec.paths)[offset : offset + PAGE + 1]
        )

    def joined_page(self) -> Any:
        """Page 1 where the site's queryset finds the tenant by a join, not a key."""
        return self.joined.function({"limit": PAGE}, self.context)

    def exact_count(self) -> int:
        from tests.shop.tools import orders_of

        return orders_of(self.scope).count()

    def through_core(self) -> Any:
        from sagents_django.core import ToolCall
        from sagents_django.core.tools import execute_tool_call

        call = ToolCall(call_id="c1", name="order_list", arguments={"limit": PAGE})
        return asyncio.run(execute_tool_call(call, self.tools, self.context))

    def queries(self, first: dict[str, Any], deep: dict[str, Any]) -> None:
        """The statements of one call, and the plan of its page query."""
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        for label, args in (("page 1", first), ("a page halfway", deep)):
            with CaptureQueriesContext(connection) as captured:
                self.call("order_list", args)
            sql = captured.captured_queries[-1]["sql"]
            print(f"{label}: {len(captured)} statement(s)")
            with connection.cursor() as cursor:
                prefix = (
                    "EXPLAIN QUERY PLAN "
                    if connection.vendor == "sqlite"
                    else "EXPLAIN "
                )
                cursor.execute(prefix + sql)
                plan = [" ".join(str(c) for c in row) for row in cursor.fetchall()]
            for line in plan:
                print(f"    {line}")


if __name__ == "__main__":
    main()
