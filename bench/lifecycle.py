"""Export and erasure of a large account, on PostgreSQL and SQLite.

One user with 1,000 conversations (100 with ``--quick``), each with 100 display
rows (100,000 in all: a question of 50-300 characters and an answer of 300-2,000,
in turns), a finished run, an agent state and a stored file. Measured, each once
on a fresh copy of the account (real commits, no test transaction):

- the dry run of the erasure (the counts an operator reads first);
- the export: the zip written to a temporary file (``lifecycle.export.write_archive``:
  a JSON per conversation, the files read through the site's backends);
- the erasure (``lifecycle.erasure.erase_user``): seconds in all, batches of
  ``LIFECYCLE_BATCH`` conversations and seconds per batch, and the part spent on
  files (the site's factory is asked once per filesystem scope: 1,000 scopes here).

The databases are the benchmark's own (``bench/databases.py``): ``test_`` +
``BENCH_POSTGRES_URL``'s name on PostgreSQL, a temporary file on SQLite.

Run from the repository root::

    .venv/bin/python bench/lifecycle.py                 # both databases
    .venv/bin/python bench/lifecycle.py --database sqlite --quick

A benchmark, not a test: it prints figures and asserts no thresholds.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from typing import Any

from databases import bench_database, database_options

POSTGRES_URL = os.environ.get(
    "BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/sagents_bench"
)
ROWS_PER_CONVERSATION = 100


def main() -> None:
    options = database_options(__doc__.split("\n\n")[0], __file__)
    if options is None:
        return
    conversations = 100 if options.quick else 1000
    with bench_database(
        options.database,
        postgres_url=POSTGRES_URL,
        postgres_name="test_sagents_bench_lifecycle",
    ):
        run(options.database, conversations)


def seed(conversations: int) -> Any:
    """The account: a user and everything of theirs, written in bulk."""
    from django.contrib.auth import get_user_model

    from sagents_django.models import (
        AgentRun,
        AgentState,
        Conversation,
        DisplayMessage,
        StoredFile,
    )

    rng = random.Random(42)
    user = get_user_model().objects.create_user(username=f"big{time.time_ns()}")
    made = Conversation.objects.bulk_create(
        [
            Conversation(user=user, title=f"Conversation {n}")
            for n in range(conversations)
        ]
    )
    AgentRun.objects.bulk_create(
        [
            AgentRun(
                conversation=c, status="completed", input_tokens=900, output_tokens=300
            )
            for c in made
        ]
    )
    AgentState.objects.bulk_create(
        [
            AgentState(
                conversation=c, state_data={"version": 1, "state": {"messages": []}}
            )
            for c in made
        ]
    )
    StoredFile.objects.bulk_create(
        [
            StoredFile(
                scope_kind="agent",
                scope_id=f"conversation-{c.pk}",
                path="/notes.md",
                content="x" * 500,
                size=500,
            )
            for c in made
        ]
    )
    rows: list[Any] = []
    for c in made:
        for n in range(ROWS_PER_CONVERSATION):
            question = n % 2 == 0
            length = rng.randint(50, 300) if question else rng.randint(300, 2000)
            rows.append(
                DisplayMessage(
                    conversation=c,
                    message_type="user" if question else "assistant",
                    content_type="text",
                    content={"text": "w" * length},
                )
            )
        if len(rows) >= 5000:
            DisplayMessage.objects.bulk_create(rows)
            rows = []
    DisplayMessage.objects.bulk_create(rows)
    return user


def run(database: str, conversations: int) -> None:
    from django.db import connection

    from sagents_django.conf import sagents_settings
    from sagents_django.lifecycle import stores
    from sagents_django.lifecycle.erasure import erase_user
    from sagents_django.lifecycle.export import write_archive

    rows = conversations * ROWS_PER_CONVERSATION
    print(
        f"\n{database} ({connection.vendor}): one user, {conversations:,} "
        f"conversations, {rows:,} display rows, factory {sagents_settings.FACTORY}"
    )
    started = time.perf_counter()
    user = seed(conversations)
    print(f"  seeding                        {time.perf_counter() - started:8.2f} s")

    started = time.perf_counter()
    counts = erase_user(user, dry_run=True)
    print(
        f"  erasure, dry run               {time.perf_counter() - started:8.2f} s"
        f"  ({counts.removed['display_messages']:,} rows counted)"
    )

    with tempfile.TemporaryFile() as handle:
        started = time.perf_counter()
        write_archive(user, handle)
        seconds = time.perf_counter() - started
        size = handle.tell()
    print(f"  export (zip)                   {seconds:8.2f} s  ({size / 1e6:.1f} MB)")

    # The files' part alone, on a second copy: the factory once per scope.
    spent: list[float] = []
    remove_files = stores.remove_files

    def timed(*args: Any, **kwargs: Any) -> Any:
        begun = time.perf_counter()
        try:
            return remove_files(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - begun)

    stores.remove_files = timed  # type: ignore[assignment]
    try:
        started = time.perf_counter()
        report = erase_user(user)
        seconds = time.perf_counter() - started
    finally:
        stores.remove_files = remove_files  # type: ignore[assignment]
    batch = sagents_settings.LIFECYCLE_BATCH
    per_batch = (seconds - sum(spent)) / max(report.batches, 1)
    print(
        f"  erasure                        {seconds:8.2f} s  ({report.batches} "
        f"batches of {batch}, {per_batch * 1000:.0f} ms each; files "
        f"{sum(spent):.2f} s; {report.removed.get('display_messages', 0):,} rows)"
    )


if __name__ == "__main__":
    main()
