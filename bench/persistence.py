"""Throughput and latency of the persistence layer on PostgreSQL and SQLite.

What it measures (each figure the median of several runs, real commits, no test
transaction around them):

- display rows appended per second: one row per ``services.append_display_message``
  call; through ``DjangoDisplayMessagePersistence.save_message`` (the bulk path: an
  assistant message of thinking + text + two tool calls is one INSERT of four rows),
  by one writer and by eight conversations at once; and one ``append_display_messages``
  batch of 1,000 rows; tool-call card moves (``mark_tool_executing`` then
  ``complete_tool_call``) per second. Each call is its own durable transaction, so a single writer
  cannot beat the server's commit rate, printed first (raw SQL, no ORM) as the floor;
- the latest 50 rows of a 100,000-row conversation (``load_display_messages(limit=50)``)
  and a page 100 pages deep (``before=`` a cursor 5,000 rows from the end);
- a page of the conversation list 50 pages deep (``list_conversations(cursor=...)``,
  newest first) among 10,000 conversations of one owner (2,000 with ``--quick``);
- saving and loading (``save_agent_state`` / ``load_agent_state``) the state of a
  1,000-message conversation of realistic sizes (user questions of 50-300 characters,
  answers of 300-2,000, a tool call with its 200-4,000-character result every third
  turn; about 1 MB of JSON), and, for reference, ``deserialize_server_state`` of it.

Targets on PostgreSQL: >= 2,000 rows appended per second, latest 50 in <= 5 ms, state
save and load <= 20 ms each.

The databases are the benchmark's own: Django's test-database machinery creates
``test_sagents_bench`` on the PostgreSQL server (127.0.0.1:5432 unless
``BENCH_POSTGRES_URL`` says otherwise; ``test_`` + its database name) and a temporary SQLite file, migrates them,
and drops them at the end; ``db.sqlite3`` is never opened.

Run from the repository root::

    .venv/bin/python bench/persistence.py                 # both databases
    .venv/bin/python bench/persistence.py --database postgres
    .venv/bin/python bench/persistence.py --quick         # smoke run (10,000 rows)

A benchmark, not a test: it prints figures and asserts no thresholds.
"""

from __future__ import annotations

import logging
import os
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from databases import bench_database, database_options

REPO = Path(__file__).resolve().parent.parent
POSTGRES_URL = os.environ.get(
    "BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/sagents_bench"
)
TARGETS = {
    "commit_floor": "(the disk's bound)",
    "append_one": ">= 2,000/s",
    "concurrent": ">= 2,000/s",
    "save_message": ">= 2,000/s",
    "append_batch": ">= 2,000/s",
    "transitions": ">= 2,000/s",
    "latest_50": "<= 5 ms",
    "deep_page": "",
    "list_page": "",
    "state_save": "<= 20 ms",
    "state_load": "<= 20 ms",
    "deserialize": "",
}


def main() -> None:
    options = database_options(__doc__.split("\n\n")[0], __file__)
    if options is None:
        return
    run(
        options.database,
        quick=options.quick,
        runs=options.runs or (3 if options.quick else 7),
    )


def run(database: str, *, quick: bool, runs: int) -> None:
    with bench_database(database, postgres_url=POSTGRES_URL):
        # Failed writes are counted by the benchmark; their tracebacks would drown it.
        logging.getLogger("sagents_django.persistence").setLevel(logging.CRITICAL)
        Bench(database, quick=quick, runs=runs).report()


class Bench:
    def __init__(self, database: str, *, quick: bool, runs: int) -> None:
        from django.contrib.auth import get_user_model

        from sagents_django import services
        from sagents_django.scope import Scope

        self.database = database
        self.quick = quick
        self.runs = runs
        self.random = random.Random(42)
        user = get_user_model().objects.create_user(username="bench")
        self.scope = Scope.for_user(user)
        self.services = services
        self.lost = 0
        """Rows the concurrent writers failed to save (SQLite's lock timeouts)."""

    def conversation(self) -> Any:
        return self.services.create_conversation(self.scope, title="bench")

    def report(self) -> None:
        from django.db import connection

        rows_total = 10_000 if self.quick else 100_000
        figures: list[tuple[str, str, str]] = []
        floor = self.commit_floor(200 if self.quick else 500)
        figures.append(("commit_floor", "raw 1-row INSERT + COMMIT (SQL)", rate(floor)))
        one = self.append_one(200 if self.quick else 1_000)
        figures.append(
            ("append_one", "append_display_message, 1 row a call", rate(one))
        )
        many = self.save_message(100 if self.quick else 500)
        figures.append(
            ("save_message", "save_message, 4 rows a message (bulk)", rate(many))
        )
        writers = 8
        together = self.concurrent(writers, 25 if self.quick else 100)
        lost = f", {self.lost:,} lost" if self.lost else ""
        figures.append(
            (
                "concurrent",
                f"save_message, {writers} conversations at once",
                rate(together) + lost,
            )
        )
        batch = self.append_batch(1_000)
        figures.append(
            ("append_batch", "append_display_messages, 1,000 rows", rate(batch))
        )
        moves = self.transitions(100 if self.quick else 500)
        figures.append(
            (
                "transitions",
                "tool-call card pending -> executing -> completed",
                f"{statistics.median(moves):,.0f} moves/s",
            )
        )
        latest, deep, plan = self.reading(rows_total)
        figures.append(
            ("latest_50", f"latest 50 of {rows_total:,} rows", milliseconds(latest))
        )
        figures.append(
            (
                "deep_page",
                f"a page 100 pages deep of {rows_total:,}",
                milliseconds(deep),
            )
        )
        listed = 3_000 if self.quick else 10_000  # at least 51 pages of 50
        figures.append(
            (
                "list_page",
                f"a conversation list page {list_depth(listed)} pages deep of "
                f"{listed:,}",
                milliseconds(self.listing(listed)),
            )
        )
        save, load, decode, size = self.state(1_000)
        figures.append(
            (
                "state_save",
                f"save state, 1,000 messages ({size / 1e6:.2f} MB)",
                milliseconds(save),
            )
        )
        figures.append(("state_load", "load state, 1,000 messages", milliseconds(load)))
        figures.append(
            ("deserialize", "  + deserialize_server_state (core)", milliseconds(decode))
        )

        version = connection.pg_version if self.database == "postgres" else None
        engine = (
            f"PostgreSQL {version // 10000}.{version % 10000}"
            if version
            else f"SQLite {connection.Database.sqlite_version} (file)"
        )
        print(
            f"\n{engine}: medians of {self.runs} runs{' (quick)' if self.quick else ''}"
        )
        width = max(len(label) for _, label, _ in figures)
        cells = max(len(value) for _, _, value in figures)
        print(
            f"| {'measure'.ljust(width)} | {'median':>{cells}} | target (PostgreSQL) |"
        )
        print(f"| {'-' * width} | {'-' * (cells - 1)}: | {'-' * 19} |")
        for key, label, value in figures:
            print(f"| {label.ljust(width)} | {value:>{cells}} | {TARGETS[key]:<19} |")
        if plan:
            print(f"latest-50 plan: {plan}")

    # Writes -----------------------------------------------------------------------
    def commit_floor(self, count: int) -> list[float]:
        """The fastest one-row transactions this server commits, bypassing the ORM:
        with a durable commit (fsync) per transaction, no append can beat it."""
        from django.db import connection, transaction

        with connection.cursor() as cursor:
            cursor.execute("CREATE TABLE bench_commit_floor (id integer, v text)")

        def once() -> float:
            start = time.perf_counter()
            for i in range(count):
                with transaction.atomic(), connection.cursor() as cursor:
                    cursor.execute(
                        "INSERT INTO bench_commit_floor (id, v) VALUES (%s, %s)",
                        [i, "x" * 200],
                    )
            return count / (time.perf_counter() - start)

        try:
            return self.repeat(once)
        finally:
            with connection.cursor() as cursor:
                cursor.execute("DROP TABLE bench_commit_floor")

    def concurrent(self, writers: int, count: int) -> list[float]:
        """Rows per second when ``writers`` conversations save messages at once (the
        server commits them in groups: throughput grows past the one-writer bound)."""
        import threading

        from django.db import connection

        from sagents_django.core.persistence import PersistenceContext
        from sagents_django.persistence import DjangoDisplayMessagePersistence

        persistence = DjangoDisplayMessagePersistence()

        def once() -> float:
            jobs = []
            for _ in range(writers):
                conversation = self.conversation()
                context = PersistenceContext(
                    agent_id=conversation.agent_id,
                    conversation_id=str(conversation.pk),
                )
                jobs.append((context, [self.message(i) for i in range(count)]))
            barrier = threading.Barrier(writers + 1)
            saved: list[int] = []

            def write(context: Any, messages: list[Any]) -> None:
                try:
                    barrier.wait()
                    for message in messages:
                        rows = persistence.save_message(self.scope, message, context)
                        saved.append(len(rows))
                finally:
                    connection.close()  # each thread has its own connection

            threads = [threading.Thread(target=write, args=job) for job in jobs]
            for thread in threads:
                thread.start()
            barrier.wait()
            start = time.perf_counter()
            for thread in threads:
                thread.join()
            elapsed = time.perf_counter() - start
            # A write that failed (SQLite: "database is locked") is logged and
            # answered with []: count it, do not let it pass for a saved row.
            self.lost += writers * count * 4 - sum(saved)
            return sum(saved) / elapsed

        return self.repeat(once)

    def message(self, index: int) -> Any:
        """An assistant message of four display items: thinking, text, two calls."""
        from sagents_django.core.messages import ContentPart, Message, ToolCall

        return Message.assistant(
            [
                ContentPart.thinking(self.text(100, 600)),
                ContentPart.text(self.text(100, 800)),
            ],
            tool_calls=[
                ToolCall(
                    call_id=f"call_{index}_{n}",
                    name="search",
                    arguments={"query": self.text(10, 60)},
                )
                for n in range(2)
            ],
        )

    def append_one(self, count: int) -> list[float]:
        def once() -> float:
            conversation = self.conversation()
            texts = [self.text(40, 400) for _ in range(count)]
            start = time.perf_counter()
            for text in texts:
                self.services.append_display_message(
                    self.scope,
                    conversation.pk,
                    message_type="user",
                    content_type="text",
                    content={"text": text},
                )
            return count / (time.perf_counter() - start)

        return self.repeat(once)

    def save_message(self, count: int) -> list[float]:
        from sagents_django.core.persistence import PersistenceContext
        from sagents_django.persistence import DjangoDisplayMessagePersistence

        persistence = DjangoDisplayMessagePersistence()

        def once() -> float:
            conversation = self.conversation()
            context = PersistenceContext(
                agent_id=conversation.agent_id, conversation_id=str(conversation.pk)
            )
            messages = [self.message(i) for i in range(count)]
            start = time.perf_counter()
            for message in messages:
                saved = persistence.save_message(self.scope, message, context)
                assert len(saved) == 4
            return 4 * count / (time.perf_counter() - start)

        return self.repeat(once)

    def append_batch(self, count: int) -> list[float]:
        def once() -> float:
            conversation = self.conversation()
            items = [
                {
                    "message_type": "assistant",
                    "content_type": "text",
                    "content": {"text": self.text(40, 400)},
                    "sequence": i,
                }
                for i in range(count)
            ]
            start = time.perf_counter()
            self.services.append_display_messages(self.scope, conversation.pk, items)
            return count / (time.perf_counter() - start)

        return self.repeat(once)

    def transitions(self, count: int) -> list[float]:
        """Tool-call card moves per second: ``mark_tool_executing`` then
        ``complete_tool_call`` (with metadata) of ``count`` calls, one at a time."""

        def once() -> float:
            conversation = self.conversation()
            calls = [f"call_{i}" for i in range(count)]
            self.services.append_display_messages(
                self.scope,
                conversation.pk,
                [
                    {
                        "message_type": "assistant",
                        "content_type": "tool_call",
                        "content": {"call_id": call, "name": "search"},
                    }
                    for call in calls
                ],
            )
            start = time.perf_counter()
            for call in calls:
                self.services.mark_tool_executing(
                    self.scope, call, conversation_id=conversation.pk
                )
                self.services.complete_tool_call(
                    self.scope, call, {"ms": 12}, conversation_id=conversation.pk
                )
            return 2 * count / (time.perf_counter() - start)

        return self.repeat(once)

    # Reads ------------------------------------------------------------------------
    def reading(self, total: int) -> tuple[list[float], list[float], str]:
        from django.db import connection

        from sagents_django.models import DisplayMessage

        conversation = self.conversation()
        # A neighbour of the same owner, so the index has to pick one conversation.
        neighbour = self.conversation()
        for target, rows in ((neighbour, total // 10), (conversation, total)):
            done = 0
            while done < rows:
                size = min(5_000, rows - done)
                DisplayMessage.objects.bulk_create(
                    DisplayMessage(
                        conversation_id=target.pk,
                        message_type="user" if (done + i) % 2 else "assistant",
                        content_type="text",
                        content={"text": self.text(40, 400)},
                        sequence=0,
                    )
                    for i in range(size)
                )
                done += size
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE sagents_display_messages")
        load = self.services.load_display_messages
        pk = conversation.pk
        ordered = DisplayMessage.objects.filter(conversation_id=pk).order_by(
            "-inserted_at", "-sequence", "-id"
        )
        cursor_id = ordered.values_list("id", flat=True)[100 * 50 - 1]

        def latest() -> float:
            start = time.perf_counter()
            rows = load(self.scope, pk, limit=50)
            elapsed = time.perf_counter() - start
            assert len(rows) == 50
            return elapsed

        def deep() -> float:
            start = time.perf_counter()
            rows = load(self.scope, pk, limit=50, before=cursor_id)
            elapsed = time.perf_counter() - start
            assert len(rows) == 50
            return elapsed

        for _ in range(5):  # warm the caches and the statement plans
            latest(), deep()
        plan = ""
        if connection.vendor == "postgresql":
            lines = ordered[:50].explain().splitlines()
            plan = lines[1].strip().removeprefix("->").strip() if len(lines) > 1 else ""
        return (
            self.repeat(latest, inner=20, combine=statistics.median),
            self.repeat(deep, inner=20, combine=statistics.median),
            plan,
        )

    def listing(self, total: int) -> list[float]:
        """A cursor page deep in one owner's conversation list (newest first)."""
        from django.contrib.auth import get_user_model
        from django.db import connection

        from sagents_django.scope import Scope

        owner = get_user_model().objects.create_user(username="bench-lister")
        scope = Scope.for_user(owner)
        model = self.services.conversation_model()
        # Batches of 100 share an updated_at (a bulk import does that), so the
        # cursor's tie-break on the id is exercised too.
        for start in range(0, total, 100):
            model.objects.bulk_create(
                model(title=f"c{start + i}", user=owner) for i in range(100)
            )
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(f"ANALYZE {model._meta.db_table}")
        # The last row of the page before the measured one (2,000 rows in --quick
        # hold fewer than 50 pages).
        offset = list_depth(total) * 50 - 1
        [last] = self.services.list_conversations(scope, limit=1, offset=offset)
        cursor = self.services.conversation_cursor(last)

        def page() -> float:
            start = time.perf_counter()
            rows = self.services.list_conversations(scope, limit=50, cursor=cursor)
            elapsed = time.perf_counter() - start
            assert len(rows) == 50
            return elapsed

        for _ in range(5):
            page()
        return self.repeat(page, inner=20, combine=statistics.median)

    def state(self, count: int) -> tuple[list[float], list[float], list[float], int]:
        from sagents_django.core.messages import Message, ToolCall, ToolResult
        from sagents_django.core.serialization import (
            deserialize_server_state,
            serialize_server_state,
        )
        from sagents_django.core.state import State
        from sagents_django.core.todo import Todo

        messages: list[Message] = []
        while len(messages) < count:
            turn = len(messages)
            messages.append(Message.user(self.text(50, 300)))
            if turn % 3 == 0:
                call = ToolCall(
                    call_id=f"call_{turn}",
                    name="read_file",
                    arguments={"path": f"/notes/{turn}.md"},
                )
                messages.append(
                    Message.assistant(self.text(50, 300), tool_calls=[call])
                )
                messages.append(
                    Message.tool(
                        [
                            ToolResult(
                                tool_call_id=call.call_id,
                                name=call.name,
                                content=self.text(200, 4_000),
                            )
                        ]
                    )
                )
            messages.append(Message.assistant(self.text(300, 2_000)))
        state = State(
            messages=messages[:count],
            todos=[Todo(content=self.text(20, 80)) for _ in range(8)],
            metadata={"conversation_title": "A long conversation"},
        )
        data = serialize_server_state(state)
        size = len(__import__("json").dumps(data).encode())
        conversation = self.conversation()
        save = self.services.save_agent_state
        load = self.services.load_agent_state
        save(self.scope, conversation.pk, data)  # the first save inserts

        def saving() -> float:
            start = time.perf_counter()
            save(self.scope, conversation.pk, data)
            return time.perf_counter() - start

        loaded: list[Any] = []

        def loading() -> float:
            start = time.perf_counter()
            loaded.append(load(self.scope, conversation.pk))
            return time.perf_counter() - start

        def decoding() -> float:
            start = time.perf_counter()
            deserialize_server_state("agent", loaded[-1])
            return time.perf_counter() - start

        return (
            self.repeat(saving, inner=3, combine=min),
            self.repeat(loading, inner=3, combine=min),
            self.repeat(decoding, inner=3, combine=min),
            size,
        )

    # Helpers ----------------------------------------------------------------------
    def repeat(
        self,
        measure: Callable[[], float],
        *,
        inner: int = 1,
        combine: Callable[[list[float]], float] = statistics.median,
    ) -> list[float]:
        return [combine([measure() for _ in range(inner)]) for _ in range(self.runs)]

    WORDS = [
        "the",
        "agent",
        "reads",
        "a",
        "file",
        "and",
        "plans",
        "the",
        "next",
        "step",
        "while",
        "the",
        "user",
        "waits",
        "für",
        "die",
        "Antwort",
        "🎉",
        "and",
        "checks",
        "the",
        "todo",
        "list",
        "before",
        "it",
        "writes",
        "notes",
    ]

    def text(self, low: int, high: int) -> str:
        length = self.random.randint(low, high)
        words: list[str] = []
        size = 0
        while size < length:
            word = self.random.choice(self.WORDS)
            words.append(word)
            size += len(word) + 1
        return " ".join(words)[:length]


def list_depth(total: int) -> int:
    """How many pages deep the conversation-list figure reads (at most 50, leaving
    a full page after it)."""
    return min(50, total // 50 - 1)


def rate(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} rows/s"


def milliseconds(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.2f} ms"


if __name__ == "__main__":
    main()
