"""The cost of offering tools by Django permission (``ScopeToolAccess``).

A user holds 50 permissions (30 of their own, 20 through a group); the agent has
200 tools, each needing one of 100 permissions (every fourth needs two), so about
half are offered. Figures, each the median of ``--runs`` runs:

- building the agent (``Agent(tools=..., tool_access=ScopeToolAccess(scope))``,
  no middleware, done once per turn), beside the same 200 tools without a
  permission, in the same run: with the user read for the turn (Django's
  permission cache empty, as the runtime's ``Scope.from_dict`` leaves it: two
  queries) and with the cache warm (offering alone);
- the per-call check, which reads the user and their permissions again:
  ``ScopeToolAccess.allows(tool)`` awaited on an event loop (the hop to a runtime
  database thread included), and its synchronous part for a user and for a
  superuser, with the queries each makes;
- a 20-step turn on ``ScriptedModel`` whose every step calls one tool, gated or not:
  the difference per step is what the check adds to a call.

The database is the benchmark's own: Django's test-database machinery creates
``test_tool_permissions_bench`` on the PostgreSQL server (127.0.0.1:5432 unless
``BENCH_POSTGRES_URL`` says otherwise) or a temporary SQLite file, and drops it at
the end. Run from the repository root::

    .venv/bin/python bench/tool_permissions.py                # PostgreSQL
    .venv/bin/python bench/tool_permissions.py --database sqlite
    .venv/bin/python bench/tool_permissions.py --quick        # smoke run

A benchmark, not a test: it prints figures and asserts no thresholds.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from databases import bench_database, database_options

POSTGRES_URL = os.environ.get(
    "BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/tool_permissions_bench"
)
TOOLS = 200
HELD = 50
STEPS = 20


def main() -> None:
    options = database_options(__doc__.split("\n\n")[0], __file__)
    if options is None:  # both databases, each run in a process of its own
        return
    with bench_database(options.database, postgres_url=POSTGRES_URL):
        try:
            Bench(runs=options.runs or (3 if options.quick else 9)).report(
                options.database
            )
        finally:
            from sagents_django.runtime.database import close_connections

            close_connections()


class Bench:
    def __init__(self, *, runs: int) -> None:
        from django.contrib.auth import get_user_model
        from django.contrib.auth.models import Group, Permission

        from sagents_django.core import Tool

        self.runs = runs
        names = [
            f"{p.content_type.app_label}.{p.codename}"
            for p in Permission.objects.select_related("content_type").order_by("pk")
        ]
        rows = list(Permission.objects.order_by("pk"))
        if len(rows) < 2 * HELD:  # a project with few models: make up the rest
            ct = rows[0].content_type
            for i in range(2 * HELD - len(rows)):
                extra = Permission.objects.create(
                    content_type=ct, codename=f"bench_{i}", name=f"bench {i}"
                )
                rows.append(extra)
                names.append(f"{ct.app_label}.{extra.codename}")
        pool = names[: 2 * HELD]
        held = rows[: 2 * HELD : 2]  # every other one: half the pool
        users = get_user_model()
        self.user = users.objects.create_user(username="bench")
        self.user.user_permissions.add(*held[:30])
        group = Group.objects.create(name="bench")
        group.permissions.add(*held[30:])
        self.user.groups.add(group)
        self.root = users.objects.create_superuser("root", password="x")

        def echo(args: dict[str, Any], context: Any) -> str:
            return "ok"

        def needs(i: int) -> Any:
            if i % 4 == 3:
                return [pool[i % len(pool)], pool[(i + 2) % len(pool)]]
            return pool[i % len(pool)]

        self.gated = [
            Tool(
                name=f"t{i}", description="A tool.", function=echo, permission=needs(i)
            )
            for i in range(TOOLS)
        ]
        self.plain = [
            Tool(name=f"t{i}", description="A tool.", function=echo)
            for i in range(TOOLS)
        ]
        self.held_tool = self.gated[0]  # pool[0] is held

    # Building -----------------------------------------------------------------
    def fresh_scope(self, user: Any = None) -> Any:
        from sagents_django.scope import Scope

        return Scope.from_dict({"user_id": (user or self.user).pk})

    def build(self, tools: list[Any], scope: Any) -> Any:
        from sagents_django.core import Agent
        from sagents_django.core.testing import ScriptedModel
        from sagents_django.tool_access import ScopeToolAccess

        return Agent(
            model=ScriptedModel([]),
            tools=tools,
            tool_access=ScopeToolAccess(scope),
            replace_default_middleware=True,
        )

    def building(self) -> dict[str, float]:
        """Seconds per build: plain, gated (cold cache), gated (warm cache)."""
        times: dict[str, list[float]] = {"plain": [], "cold": [], "warm": []}
        reps = 20
        for _ in range(self.runs):
            scopes = iter([self.fresh_scope() for _ in range(reps)])
            warm = self.fresh_scope()
            times["plain"].append(per(reps, lambda s=warm: self.build(self.plain, s)))
            times["cold"].append(
                per(reps, lambda it=scopes: self.build(self.gated, next(it)))
            )
            self.build(self.gated, warm)  # fills its user's permission cache
            times["warm"].append(per(reps, lambda s=warm: self.build(self.gated, s)))
        offered = len(self.build(self.gated, self.fresh_scope()).tools)
        return {"offered": offered} | {
            k: statistics.median(v) for k, v in times.items()
        }

    # The per-call check ---------------------------------------------------------
    def checking(self) -> dict[str, float]:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        from sagents_django.tool_access import ScopeToolAccess

        tool = self.held_tool
        user = ScopeToolAccess(self.fresh_scope())
        root = ScopeToolAccess(self.fresh_scope(self.root))
        reps = 200
        found: dict[str, list[float]] = {"user": [], "root": [], "awaited": []}

        async def awaited() -> float:
            start = time.perf_counter()
            for _ in range(reps):
                assert await user.allows(tool)
            return (time.perf_counter() - start) / reps

        for _ in range(self.runs):
            found["user"].append(per(reps, lambda: user.refreshed().permits(tool)))
            found["root"].append(per(reps, lambda: root.refreshed().permits(tool)))
            found["awaited"].append(asyncio.run(awaited()))
        queries = {}
        for key, access in (("user", user), ("root", root)):
            with CaptureQueriesContext(connection) as captured:
                access.refreshed().permits(tool)
            queries[key] = len(captured)
        return {k: statistics.median(v) for k, v in found.items()} | {
            f"{k}_queries": v for k, v in queries.items()
        }

    def turns(self) -> dict[str, float]:
        """Seconds per step of a 20-step turn calling a gated or a plain tool."""
        from sagents_django.core import Agent, Message, ToolCall
        from sagents_django.core.testing import ScriptedModel
        from sagents_django.tool_access import ScopeToolAccess

        scope = self.fresh_scope()

        def agent(tools: list[Any]) -> Any:
            replies: list[Any] = [
                Message.assistant(
                    tool_calls=[ToolCall(call_id=f"c{i}", name="t0", arguments={})]
                )
                for i in range(STEPS - 1)
            ]
            return Agent(
                model=ScriptedModel([*replies, "Done."]),
                tools=tools,
                tool_access=ScopeToolAccess(scope),
                replace_default_middleware=True,
            )

        found: dict[str, list[float]] = {"plain": [], "gated": []}
        for _ in range(self.runs):
            for key, tools in (("plain", self.plain), ("gated", self.gated)):
                built = agent(tools)

                async def turn(built: Any = built) -> float:
                    start = time.perf_counter()
                    result = await built.aexecute(["Go"])
                    assert result.ok, result.error
                    return (time.perf_counter() - start) / STEPS

                found[key].append(asyncio.run(turn()))
        return {k: statistics.median(v) for k, v in found.items()}

    def report(self, database: str) -> None:
        from django.db import connection

        build = self.building()
        check = self.checking()
        steps = self.turns()
        print(
            f"tool_permissions.py: {database} ({connection.vendor}), a user with "
            f"{HELD} permissions, {TOOLS} tools, median of {self.runs} runs"
        )
        print(f"  agent build, {TOOLS} tools without permission  {ms(build['plain'])}")
        print(
            f"  agent build, {TOOLS} gated tools, user just read {ms(build['cold'])}"
            f"  (+{ms(build['cold'] - build['plain'])}, x{build['cold'] / build['plain']:.2f};"
            f" {build['offered']:.0f} offered)"
        )
        print(
            f"  agent build, {TOOLS} gated tools, cache warm     {ms(build['warm'])}"
            f"  (+{ms(build['warm'] - build['plain'])})"
        )
        print(
            f"  per-call check, user (sync, {check['user_queries']:.0f} queries)"
            f"      {ms(check['user'])}"
        )
        print(
            f"  per-call check, superuser (sync, {check['root_queries']:.0f} query)"
            f"  {ms(check['root'])}"
        )
        print(
            f"  per-call check, awaited allows() (db thread)   {ms(check['awaited'])}"
        )
        print(f"  turn step calling a plain tool                 {ms(steps['plain'])}")
        print(
            f"  turn step calling a gated tool                 {ms(steps['gated'])}"
            f"  (+{ms(steps['gated'] - steps['plain'])})"
        )


def per(reps: int, work: Callable[[], Any]) -> float:
    start = time.perf_counter()
    for _ in range(reps):
        work()
    return (time.perf_counter() - start) / reps


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.3f} ms"


if __name__ == "__main__":
    main()
