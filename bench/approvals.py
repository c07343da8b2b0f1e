"""The approval inbox and the writing of approval requests, at scale.

1,000 users with 10 conversations each (10,000; 1,000 users and conversations
with ``--quick``), every conversation paused on one pending request, and 10 decided
requests per conversation as history (100,000). Measured (medians of 21 runs):

- ``inbox_count`` and the first page of ``routing.decidable`` for an owner (their
  10 conversations) and for an approver holding the permission site-wide (every
  pending request: the inbox across conversations);
- ``records.record_interrupt``: the rows of one interrupt of one request (what a
  run that pauses adds to its ending's transaction), and of five requests; and
  the after-commit ``approval_requested`` signal with its signed link.

Run from the repository root::

    .venv/bin/python bench/approvals.py                 # both databases
    .venv/bin/python bench/approvals.py --database sqlite --quick

A benchmark, not a test: it prints figures and asserts no thresholds.
"""

from __future__ import annotations

import os
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from databases import bench_database, database_options

POSTGRES_URL = os.environ.get(
    "BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/sagents_bench"
)
RUNS = 21
HISTORY = 10
PERMISSION = "sagents_django.decide_approvals"


def main() -> None:
    options = database_options(__doc__.split("\n\n")[0], __file__)
    if options is None:
        return
    users = 100 if options.quick else 1000
    with bench_database(
        options.database,
        postgres_url=POSTGRES_URL,
        postgres_name="test_sagents_bench_approvals",
    ):
        from django.conf import settings

        settings.SAGENTS = {
            **getattr(settings, "SAGENTS", {}),
            "APPROVALS": {"PERMISSIONS": {"*": PERMISSION}},
        }
        run(options.database, users)


def seed(users: int) -> tuple[Any, Any]:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    from sagents_django.approvals.models import ApprovalRequest
    from sagents_django.models import AgentRun, AgentState, Conversation

    people = get_user_model().objects.bulk_create(
        [get_user_model()(username=f"u{n}") for n in range(users)]
    )
    made = Conversation.objects.bulk_create(
        [Conversation(user=p, title=f"c{n}") for p in people for n in range(10)]
    )
    runs = AgentRun.objects.bulk_create(
        [AgentRun(conversation=c, status="interrupted") for c in made]
    )
    interrupt = {
        "type": "hitl",
        "action_requests": [
            {"tool_call_id": "w1", "tool_name": "write_file", "arguments": {"p": 1}}
        ],
    }
    AgentState.objects.bulk_create(
        [
            AgentState(
                conversation=c,
                state_data={"version": 1, "state": {"interrupt_data": interrupt}},
            )
            for c in made
        ]
    )
    rows = []
    for c, r in zip(made, runs, strict=True):
        for n in range(HISTORY + 1):
            pending = n == HISTORY
            rows.append(
                ApprovalRequest(
                    conversation=c,
                    conversation_ref=str(c.pk),
                    run=r if pending else None,
                    run_ref=str(r.pk) if pending else str(uuid.uuid4()),
                    requested_by=c.user,
                    requested_by_label=c.user.username,
                    tool_name="write_file",
                    tool_call_id="w1" if pending else f"old{n}",
                    arguments={"p": 1},
                    arguments_hash="0" * 64,
                    permission=PERMISSION,
                    status="pending" if pending else "approved",
                    allowed_decisions=["approve", "reject"],
                )
            )
        if len(rows) >= 5000:
            ApprovalRequest.objects.bulk_create(rows)
            rows = []
    ApprovalRequest.objects.bulk_create(rows)
    approver = get_user_model().objects.create_user(username="approver")
    approver.user_permissions.add(Permission.objects.get(codename="decide_approvals"))
    return people[0], get_user_model().objects.get(pk=approver.pk)


def median_ms(job: Callable[[], Any]) -> float:
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        job()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def run(database: str, users: int) -> None:
    from django.db import connection, transaction

    from sagents_django import signals
    from sagents_django.approvals import links, records, routing
    from sagents_django.approvals.models import ApprovalRequest
    from sagents_django.models import AgentRun
    from sagents_django.scope import Scope
    from sagents_django.ui.approval_inbox import inbox_count

    print(f"\n{database} ({connection.vendor}): {users * 10:,} pending requests")
    started = time.perf_counter()
    owner, approver = seed(users)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # as autovacuum would after a bulk load
    print(f"  seeding                          {time.perf_counter() - started:8.2f} s")
    for who, user in (("owner", owner), ("approver", approver)):
        scope = Scope.for_user(user)
        count = inbox_count(user, scope)
        ms = median_ms(lambda u=user, s=scope: inbox_count(u, s))
        print(f"  inbox_count, {who:<9} ({count:>6,})   {ms:8.2f} ms")
        ms = median_ms(lambda u=user: list(routing.decidable(u).values_list("pk")[:50]))
        print(f"  decidable first 50, {who:<9}      {ms:8.2f} ms")
    run_row = AgentRun.objects.filter(conversation__user=owner).first()
    for size in (1, 5):
        data = {
            "type": "hitl",
            "action_requests": [
                {"tool_call_id": "", "tool_name": "write_file", "arguments": {"n": i}}
                for i in range(size)
            ],
        }

        def record(data: dict[str, Any] = data) -> None:
            # In a transaction rolled back: the cost added to a run's ending (its
            # commit is the ending's own), without the after-commit signal.
            for i, r in enumerate(data["action_requests"]):
                r["tool_call_id"] = uuid.uuid4().hex + str(i)
            try:
                with transaction.atomic():
                    records.record_interrupt(run_row, data)
                    raise Rollback
            except Rollback:
                pass

        ms = median_ms(record)
        print(f"  record_interrupt, {size} request(s)     {ms:8.2f} ms")
    row = ApprovalRequest.objects.filter(status="pending").first()
    links.path_for(row)  # the URLconf's first import
    ms = median_ms(
        lambda: signals.approval_requested.send_robust(
            sender=ApprovalRequest,
            request=row,
            link=links.path_for(row),
            still_needed=1,
        )
    )
    print(f"  the signal with its link, per request {ms:6.2f} ms")


class Rollback(Exception):
    pass


if __name__ == "__main__":
    main()
