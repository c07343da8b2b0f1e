"""What sharing costs a request, on PostgreSQL and SQLite.

A site of 200 owners with 50 conversations each (10,000; 20 owners with ``--quick``),
every conversation shared with two other users and one group; Bob is shared 1,000
conversations (100 with ``--quick``), half of them through groups he is in (20
groups). Measured, each the median of ``--runs`` (default 200) calls:

- ``scope_for`` for the owner (what every chat view and socket frame now asks
  first), for Bob through his own share, and for Bob through a group's;
- ``shared_with_me(limit=50)`` for Bob (the sidebar and the list page);
- ``links.open_link`` of a working token (a link page's look-up).

The databases are the benchmark's own (``bench/databases.py``).

Run from the repository root::

    .venv/bin/python bench/sharing.py                 # both databases
    .venv/bin/python bench/sharing.py --database sqlite --quick

A benchmark, not a test: it prints figures and asserts no thresholds.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from databases import bench_database, database_options

POSTGRES_URL = os.environ.get(
    "BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/sagents_bench"
)
PER_OWNER = 50


def main() -> None:
    options = database_options(__doc__.split("\n\n")[0], __file__)
    if options is None:
        return
    owners = 20 if options.quick else 200
    with bench_database(
        options.database,
        postgres_url=POSTGRES_URL,
        postgres_name="test_sagents_bench_sharing",
    ):
        run(options.database, owners, options.runs or 200)


def median_ms(call: Callable[[], Any], runs: int) -> float:
    call()  # warm
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def run(database: str, owners: int, runs: int) -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from sagents_django.scope import Scope
    from sagents_django.services import conversation_model
    from sagents_django.sharing import links
    from sagents_django.sharing.access import scope_for
    from sagents_django.sharing.models import ConversationShare
    from sagents_django.sharing.services import shared_with_me

    users = get_user_model().objects
    started = time.perf_counter()
    people = users.bulk_create(
        [get_user_model()(username=f"owner{n}") for n in range(owners)]
    )
    bob = users.create(username="bob")
    groups = Group.objects.bulk_create([Group(name=f"g{n}") for n in range(40)])
    bob.groups.add(*groups[:20])
    conversations = conversation_model().objects.bulk_create(
        [
            conversation_model()(user=owner, title=f"c{n}")
            for owner in people
            for n in range(PER_OWNER)
        ]
    )
    bobs = len(conversations) // 10
    shares = []
    for n, c in enumerate(conversations):
        others = [people[(n + 1) % owners], people[(n + 2) % owners]]
        shares += [ConversationShare(conversation=c, user=u) for u in others]
        if n < bobs and n % 2 == 0:
            shares.append(ConversationShare(conversation=c, user=bob))
        group = groups[n % 20] if n < bobs and n % 2 else groups[20 + n % 20]
        shares.append(ConversationShare(conversation=c, group=group))
    ConversationShare.objects.bulk_create(shares, batch_size=2000)
    setup = time.perf_counter() - started

    owner = Scope.for_user(people[0])
    bob_scope = Scope.for_user(bob)
    mine, by_user, by_group = conversations[0], conversations[0], conversations[1]
    token = links.token_of(links.create_link(owner, mine.pk))
    figures = {
        "scope_for, the owner": median_ms(lambda: scope_for(owner, mine.pk), runs),
        "scope_for, Bob's own share": median_ms(
            lambda: scope_for(bob_scope, by_user.pk), runs
        ),
        "scope_for, a group's share": median_ms(
            lambda: scope_for(bob_scope, by_group.pk), runs
        ),
        "shared_with_me(limit=50)": median_ms(
            lambda: shared_with_me(bob_scope, limit=50), runs
        ),
        "open_link": median_ms(lambda: links.open_link(token), runs),
    }
    print(
        f"\n{database}: {len(conversations):,} conversations, {len(shares):,} shares, "
        f"Bob shared {bobs:,} (set up in {setup:.1f} s); median of {runs} calls"
    )
    for name, value in figures.items():
        print(f"  {name:<30} {value:8.3f} ms")


if __name__ == "__main__":
    main()
