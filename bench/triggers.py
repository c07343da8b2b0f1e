"""Triggers: what a triggered save costs, how soon its run starts, and a storm.

On the embedded stack (inline executor, the offline demo model without pauses), with
a trigger on ``tests.shop``'s ``Shop`` saves:

- save cost: a ``Shop`` save with the trigger firing (recorded, started after
  commit: the conversation, the message and the run are written, the turn handed to
  the executor) against the same save with the trigger's ``when`` false, in the same
  run (median ms, the ratio, and the statements of each);
- start latency: from the save's commit to the run's ``started_at`` (the turn
  claimed on the runtime loop), p50 and p99 over N saves;
- a storm: 1,000 saves in a row with the default rate (60 a minute): the time to
  record them all, how many started and how many wait for the sweepers.

Run from the repository root::

    .venv/bin/python bench/triggers.py                    # both databases
    .venv/bin/python bench/triggers.py --database sqlite --quick

A benchmark, not a test: it prints figures and asserts no thresholds.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

from databases import bench_database, database_options

REPO = Path(__file__).resolve().parent.parent
ARMED = {"on": False}


def main() -> None:
    options = database_options(__doc__.splitlines()[0], str(Path(__file__)))
    if options is None:
        return
    os.environ.setdefault("SAGENTS_DEMO_DELAY_MS", "0")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    url = os.environ.get(
        "BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test"
    )
    with bench_database(
        options.database,
        postgres_url=url,
        settings_module="tests.settings",
        postgres_name="bench_triggers",
    ):
        run(options.database, quick=options.quick, runs=options.runs)


def run(database: str, *, quick: bool, runs: int | None) -> None:
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.db.models.signals import post_save
    from django.test.utils import CaptureQueriesContext

    from sagents_django.models import AgentRun
    from sagents_django.runtime.executors import wait_inline
    from sagents_django.scope import Scope
    from sagents_django.triggers import Start, on_signal
    from sagents_django.triggers.models import TriggerEvent
    from tests.shop.models import Shop

    # The project's generated factory and its default model (the offline demo).
    settings.SAGENTS = {**settings.SAGENTS, "EXECUTOR": "inline"}
    owner = get_user_model().objects.create_user("bench-owner")
    scope = Scope.for_user(owner)

    @on_signal(post_save, sender=Shop, when=lambda *a, **k: ARMED["on"], rate=10_000)
    def opened(shop: Any, **kwargs: Any) -> Start:
        return Start(scope=scope, message=f"Look at {shop.name}.", title=shop.name)

    count = runs or (10 if quick else 40)
    saves: dict[bool, list[float]] = {True: [], False: []}
    statements: dict[bool, int] = {}
    latencies: list[float] = []
    for i in range(count):
        for armed in (False, True):
            ARMED["on"] = armed
            with CaptureQueriesContext(connection) as queries:
                began = time.perf_counter()
                shop = Shop.objects.create(name=f"shop-{armed}-{i}", owner=owner)
                committed = time.time()
                saves[armed].append(time.perf_counter() - began)
            statements[armed] = len(queries)
            if armed:
                wait_inline(30)
                event = TriggerEvent.objects.get(object=f"shop.shop:{shop.pk}")
                started = AgentRun.objects.get(pk=event.run_id).started_at
                latencies.append(started.timestamp() - committed)
    ARMED["on"] = False
    wait_inline(60)

    plain = statistics.median(saves[False]) * 1000
    triggered = statistics.median(saves[True]) * 1000
    latencies.sort()
    print(f"\n## triggers on {database} ({count} saves each)")
    print(f"save, no trigger:      {plain:7.2f} ms   {statements[False]:3d} statements")
    print(
        f"save, trigger started: {triggered:7.2f} ms   {statements[True]:3d} statements"
        f"   ({triggered / plain:.1f}x)"
    )
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print(
        f"commit -> run started: p50 {statistics.median(latencies) * 1000:.1f} ms, "
        f"p99 {p99 * 1000:.1f} ms"
    )

    storm(Shop, owner, ARMED, quick=quick)


def storm(shop_model: Any, owner: Any, armed: dict[str, bool], *, quick: bool) -> None:
    from django.db.models.signals import post_save

    from sagents_django.runtime.executors import wait_inline
    from sagents_django.scope import Scope
    from sagents_django.triggers import Start, on_signal
    from sagents_django.triggers.models import TriggerEvent

    scope = Scope.for_user(owner)
    burst = {"on": False}

    @on_signal(post_save, sender=shop_model, when=lambda *a, **k: burst["on"])
    def stormed(shop: Any, **kwargs: Any) -> Start:
        return Start(scope=scope, message=f"Look at {shop.name}.", title=shop.name)

    size = 200 if quick else 1_000
    burst["on"] = True
    began = time.perf_counter()
    for i in range(size):
        shop_model.objects.create(name=f"storm-{i}", owner=owner)
    took = time.perf_counter() - began
    burst["on"] = False
    wait_inline(120)
    name = f"{stormed.__module__}.{stormed.__qualname__}"
    found = TriggerEvent.objects.filter(trigger=name)
    started = found.filter(status="started").count()
    pending = found.filter(status="pending").count()
    print(
        f"storm of {size} saves (rate 60/min): recorded in {took:.2f} s "
        f"({took / size * 1000:.2f} ms a save); {started} started, {pending} pending "
        "for the sweepers"
    )


if __name__ == "__main__":
    main()
