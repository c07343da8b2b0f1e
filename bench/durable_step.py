"""Durable steps: the 20-step tool loop as a real turn, checkpointed on PostgreSQL.

What it measures, at 10 and 1,000 messages of prior history:

- ours: ``bench/core_overhead.py``'s agent (the custom stack: HumanInTheLoop and four
  pass-through middleware, the instant ``ScriptedModel``, the sync ``echo`` tool)
  run by the runtime as a real turn. A conversation whose stored state holds the
  history gets the prompt as a queued run (what ``agent_server.add_message`` makes:
  the user's display row and ``services.begin_run(queued=True)`` with the message in
  its metadata), and ``run_turn(run_id)`` runs it on the runtime loop, as the inline
  executor does, with PostgreSQL under it: it claims the run, loads the state, saves
  the prompt, and for each of the 20 steps saves the display rows, journals the tool
  call and writes a step checkpoint (``runtime/checkpoints.py``), then folds the
  steps into one whole save and ends the run. The wall time of ``run_turn`` / 20 is
  the cost of one durable step, nothing subtracted.
- deepagents: ``create_deep_agent`` with the same fake model, tool and
  ``interrupt_on``, compiled with LangGraph's ``PostgresSaver`` (sync) on the same
  PostgreSQL server (a database of its own), invoked with ``durability="sync"`` on a
  thread whose last checkpoint already holds the same history; wall time / 20. It
  runs in ``.venv-bench`` (a child process that stays up for the whole run), run by
  run in between ours; ``deep/ours`` is the ratio of the medians.
- the checkpoint write alone: ``Checkpoints.write`` of one step (a tool call or its
  result, the messages the real loop adds) inside its transaction, as the runtime's
  ``_write_checkpoint`` calls it, commit included, 40 steps in a row on a state of
  10 and of 1,000 messages: it must not grow with the history. Beside it, the time
  deepagents spends in ``PostgresSaver.put`` and ``put_writes`` per step.
- SQL statements, commits, new database connections and database calls (hops from
  the loop to a database thread) per step, counted on every thread (the runtime's
  database work runs on a pool of threads, each with its own connection): an
  ``execute_wrapper`` on each connection as it is made, Django's ``connect`` and
  ``commit`` timed, the runtime's ``db()`` wrapper counted (instrumentation of this
  script only); a write outside a transaction counts as a commit.
  deepagents' are counted by a cursor class on its connection (its writes run in
  autocommit pipelines: each ``put`` / ``put_writes`` is one transaction).
  ``--detail`` lists our statements of one turn by kind and table, with their time.

The site's settings are used (``project.settings`` with a PostgreSQL
``DATABASE_URL``), with the turn's agent built by this script's factory, the inline
executor and the in-memory channel layer. Ours runs under each ``CONN_MAX_AGE`` of
``--conn-max-age`` (default ``0,None``), turn by turn: 0 is what a site gets from a
``DATABASE_URL`` (Django's default: the runtime's database threads open a new
connection for every database call), None keeps each thread's connection.

Our database is Django's test database ``test_durable_bench`` (of
``BENCH_POSTGRES_URL``, default postgres://postgres@127.0.0.1:5432/durable_bench),
deepagents' is ``durable_bench_langgraph`` on the same server; both are created and
dropped by the run.

Run from the repository root::

    .venv/bin/python bench/durable_step.py --pin 1       # 5 runs per figure
    .venv/bin/python bench/durable_step.py --quick       # smoke run
    .venv/bin/python bench/durable_step.py --detail --conn-max-age None
    .venv/bin/python bench/durable_step.py --profile 10 --conn-max-age None

``--detail`` prints one turn's statements by kind with the wall time spent in each
(and in connecting and committing). ``--profile`` profiles every thread of our turn
(the runtime loop and the database threads, one cProfile each, merged), by each
thread's CPU time (``--profile-clock wall`` for wall time). Both use the first
``--conn-max-age`` value.

(``python3 -m venv .venv-bench && .venv-bench/bin/pip install -r
requirements-bench.txt -e .`` creates the deepagents virtualenv.)

A benchmark, not a test: it prints figures and asserts no thresholds.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from core_overhead import (
    FINAL_TEXT,
    PROMPT,
    STEPS,
    TOOL_CALLS,
    build_deepagents,
    build_ours,
    deepagents_messages,
    deepagents_versions,
    make_history,
    ours_messages,
    tool_calls_since_prompt,
)

REPO = Path(__file__).resolve().parent.parent
POSTGRES_URL = os.environ.get(
    "BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/durable_bench"
)
SERVER_URL = POSTGRES_URL.rsplit("/", 1)[0]
LANGGRAPH_DATABASE = "durable_bench_langgraph"
STACK = "custom"
CHECKPOINT_STEPS = 40


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fast smoke run")
    parser.add_argument("--runs", type=int, default=None, help="default 5 (quick 2)")
    parser.add_argument("--sizes", default="10,1000", help="default 10,1000")
    parser.add_argument(
        "--pin",
        type=int,
        metavar="CPU",
        help="pin this process and the deepagents child to one CPU",
    )
    parser.add_argument(
        "--conn-max-age",
        default="0,None",
        metavar="VALUES",
        help="CONN_MAX_AGE values to run ours under, comma-separated (default "
        "0,None: the site's, Django's default, then persistent connections)",
    )
    parser.add_argument(
        "--no-deepagents", action="store_true", help="skip the comparison"
    )
    parser.add_argument(
        "--detail", action="store_true", help="our statements of a turn by kind"
    )
    parser.add_argument(
        "--profile", type=int, metavar="HISTORY", help="cProfile ours at HISTORY"
    )
    parser.add_argument(
        "--profile-clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="what --profile counts: each thread's CPU time (default) or wall time",
    )
    parser.add_argument(
        "--budgets",
        action="store_true",
        help="turn spend budgets on (a user and a site limit): each model call is "
        "reserved before it and settled in its reply's transaction",
    )
    parser.add_argument(
        "--deepagents-child", action="store_true", help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.pin is not None:
        # Before any thread starts: every thread (the runtime loop, the database
        # threads) and the child inherit it.
        os.sched_setaffinity(0, {args.pin})
    if args.deepagents_child:
        deepagents_child()
        return
    runs = args.runs or (2 if args.quick else 5)
    sizes = [int(s) for s in args.sizes.split(",")]
    ages = [
        None if a.strip() == "None" else float(a) for a in args.conn_max_age.split(",")
    ]

    setup_django(budgets=args.budgets)
    from django.test.utils import setup_databases, teardown_databases

    old = setup_databases(verbosity=0, interactive=False)
    try:
        ours = Ours()
        if args.profile is not None or args.detail:
            use_conn_max_age(ages[0])
            if args.profile is not None:
                ours.profile(
                    args.profile,
                    turns=2 if args.quick else 5,
                    clock=args.profile_clock,
                )
            else:
                ours.detail(sizes[-1])
            return
        print(header(args))
        deep = None if args.no_deepagents else DeepAgentsChild.start(args.pin)
        try:
            results = measure(ours, deep, sizes, runs, ages)
            writes = {size: ours.checkpoint_writes(size) for size in sizes}
            floor = commit_floor()
        finally:
            if deep is not None:
                deep.close()
        report(results, writes, floor, sizes, runs, ages, deep)
    finally:
        close_database_threads()
        teardown_databases(old, verbosity=0)


def header(args: argparse.Namespace) -> str:
    from django.db import connection

    return (
        f"Python {sys.version.split()[0]}, {os.cpu_count()} cores, PostgreSQL "
        f"{pg_version()} on {connection.settings_dict['HOST']}; load average "
        f"{os.getloadavg()[0]:.2f} before the run; "
        + (f"pinned to CPU {args.pin}" if args.pin is not None else "not pinned")
    )


def pg_version() -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        return str(cursor.fetchone()[0]).split()[0]


# Django ------------------------------------------------------------------------------
BUDGETS = {
    "DEFAULTS": [
        {"scope": "site", "period": "month", "limit": "100000"},
        {"scope": "user", "period": "day", "limit": "1000"},
    ],
    # The scripted model has no price in litellm's map: a site rate prices it.
    "UNPRICED": {"input": "0.15", "output": "0.6"},
}
"""``--budgets``: two limits on every call."""


def setup_django(*, budgets: bool = False) -> None:
    sys.path.insert(0, str(REPO))
    os.environ["DJANGO_SETTINGS_MODULE"] = "project.settings"
    os.environ["DATABASE_URL"] = POSTGRES_URL
    import django
    from django.conf import settings

    database = settings.DATABASES["default"]
    database.setdefault("TEST", {})["NAME"] = f"test_{database['NAME']}"
    settings.DEBUG = False  # no query log
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}
    }
    settings.SAGENTS = {
        **settings.SAGENTS,
        "FACTORY": f"{__name__}.build_agent",
        "EXECUTOR": "inline",
        "BUDGETS": BUDGETS if budgets else None,
    }
    django.setup()
    SQL.install()


_factory: Any = None


def build_agent(*, agent_id: str, scope: Any, filesystem_scope: Any = None) -> Any:
    """The site's agent factory for this run (``SAGENTS["FACTORY"]``)."""
    global _factory
    if _factory is None:
        _factory = build_ours(STACK)[0]
    return _factory(agent_id=agent_id)


def use_conn_max_age(age: float | None) -> None:
    """Our connections from now on live ``age`` seconds (None: for ever; 0: one
    request, which for the runtime means one database call)."""
    from django.db import connections

    close_database_threads()  # the open ones were opened under the old value
    # Every thread's connection reads this one dict (the test database's name
    # reaches them the same way).
    connections["default"].settings_dict["CONN_MAX_AGE"] = age
    # Connected again now, not in the next turn.
    on_each_database_thread(lambda: connections["default"].ensure_connection())


def on_each_database_thread(work: Any) -> None:
    """Run ``work`` once on each thread of the runtime's database pool."""
    from sagents_django.runtime.database import _executor

    pool = _executor()
    if pool is None:
        return
    size = pool._max_workers
    barrier = threading.Barrier(size)

    def each() -> None:
        barrier.wait(10)  # each task holds its thread until all have one
        work()

    for future in [pool.submit(each) for _ in range(size)]:
        future.result(15)


def close_database_threads() -> None:
    from django.db import connections

    from sagents_django.runtime.database import close_connections

    close_connections()
    connections.close_all()


_TABLES = re.compile(r'(?:INSERT INTO|UPDATE|FROM)\s+"(\w+)"', re.IGNORECASE)
_WRITES = ("INSERT", "UPDATE", "DELETE", "WITH")
IDLE = 0
"""psycopg's ``TransactionStatus.IDLE``: no transaction open."""


class SqlCounter:
    """Statements, commits and new connections of every thread while ``on``."""

    def __init__(self) -> None:
        self.on = False
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.statements = 0
        self.commits = 0
        self.connections = 0
        self.calls = 0
        self.kinds: Counter[str] = Counter()
        self.seconds: Counter[str] = Counter()

    def install(self) -> None:
        """Count on every connection of every thread: an ``execute_wrapper`` on
        each connection as it is made, and Django's ``connect`` and ``commit``
        timed (bench instrumentation only)."""
        from django.db.backends.base.base import BaseDatabaseWrapper
        from django.db.backends.signals import connection_created

        connection_created.connect(self.attach, weak=False)
        connect, commit = BaseDatabaseWrapper.connect, BaseDatabaseWrapper.commit

        def timed_connect(connection: Any) -> None:
            started = time.perf_counter()
            connect(connection)
            self.add("CONNECT", time.perf_counter() - started, connection=True)

        def timed_commit(connection: Any) -> None:
            # An atomic block that ran no statement commits nothing on the server.
            idle = connection.connection.info.transaction_status == IDLE
            started = time.perf_counter()
            commit(connection)
            if not idle:
                self.add("COMMIT", time.perf_counter() - started, commit=True)

        BaseDatabaseWrapper.connect = timed_connect  # type: ignore[method-assign]
        BaseDatabaseWrapper.commit = timed_commit  # type: ignore[method-assign]

        # The runtime's database calls (each a hop to a database thread and back):
        # ``db()`` wraps every function it is given with ``_reconnecting``.
        from sagents_django.runtime import database

        reconnecting = database._reconnecting

        def counted(function: Any) -> Any:
            call = reconnecting(function)

            def counted_call(*args: Any, **kwargs: Any) -> Any:
                if self.on:
                    with self.lock:
                        self.calls += 1
                return call(*args, **kwargs)

            return counted_call

        database._reconnecting = counted

    def attach(self, sender: Any, connection: Any, **kwargs: Any) -> None:
        if self not in connection.execute_wrappers:
            connection.execute_wrappers.append(self)

    def add(
        self,
        kind: str,
        seconds: float,
        *,
        statements: int = 0,
        commit: bool = False,
        connection: bool = False,
    ) -> None:
        if not self.on:
            return
        with self.lock:
            self.kinds[kind] += 1
            self.seconds[kind] += seconds
            self.statements += statements
            self.commits += commit
            self.connections += connection

    def __call__(
        self, execute: Any, sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        if not self.on:
            return execute(sql, params, many, context)
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            kind = statement_kind(sql)
            autocommit = not context["connection"].in_atomic_block
            self.add(
                kind,
                time.perf_counter() - started,
                statements=len(params) if many else 1,
                commit=autocommit and kind.startswith(_WRITES),
            )

    @contextmanager
    def counting(self) -> Iterator[SqlCounter]:
        with self.lock:
            self.reset()
            self.on = True
        try:
            yield self
        finally:
            self.on = False


def statement_kind(sql: str) -> str:
    """``VERB table, table`` (the tables in the order the statement names them)."""
    verb = sql.split(None, 1)[0].upper()
    if verb in ("SAVEPOINT", "RELEASE", "ROLLBACK"):
        return f"{verb} (savepoint)" if verb != "SAVEPOINT" else verb
    tables = dict.fromkeys(_TABLES.findall(sql))
    return f"{verb} {', '.join(tables)}".strip()


SQL = SqlCounter()


def commit_floor(count: int = 200) -> float:
    """Median seconds of one raw INSERT + COMMIT on our database: the server's
    (the disk's) price of one durable write, the floor of a durable step."""
    from django.db import connection, transaction

    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE durable_floor (n integer, text text)")
    times = []
    for n in range(count):
        started = time.perf_counter()
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("INSERT INTO durable_floor VALUES (%s, %s)", [n, "x" * 200])
        times.append(time.perf_counter() - started)
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE durable_floor")
    return statistics.median(times)


# Ours --------------------------------------------------------------------------------
class Ours:
    def __init__(self) -> None:
        from django.contrib.auth import get_user_model

        from sagents_django.scope import Scope

        user = get_user_model().objects.create_user(username="bench")
        self.scope = Scope.for_user(user)
        self.data: dict[int, dict[str, Any]] = {}

    def state_data(self, size: int) -> dict[str, Any]:
        from sagents_django.core import State
        from sagents_django.core.serialization import serialize_server_state

        if size not in self.data:
            state = State(messages=ours_messages(make_history(size)))
            self.data[size] = serialize_server_state(state)
        return self.data[size]

    def conversation(self, size: int) -> Any:
        """A conversation whose stored state holds ``size`` messages."""
        from sagents_django import services

        conversation = services.create_conversation(self.scope, title="bench")
        services.save_agent_state(self.scope, conversation.pk, self.state_data(size))
        return conversation

    def queue_turn(self, size: int) -> str:
        """A run of the prompt, queued as ``add_message`` queues one."""
        from sagents_django import services

        conversation = self.conversation(size)
        row = services.append_text_message(
            self.scope, conversation.pk, "user", PROMPT, metadata={"queued": False}
        )
        meta = {
            "scope": self.scope.to_dict(),
            "filesystem_scope": None,
            "messages": [{"text": PROMPT, "metadata": {}, "display_ids": [row.pk]}],
        }
        run = services.begin_run(
            self.scope, conversation.pk, trigger="message", queued=True, metadata=meta
        )
        return str(run.pk)

    def turn(self, size: int, *, profilers: Any = None) -> dict[str, Any]:
        """One timed turn: per-step wall and CPU seconds, and its SQL counts."""
        from sagents_django.runtime.loop import submit
        from sagents_django.runtime.runner import run_turn

        run_id = self.queue_turn(size)
        gc.collect()

        async def timed() -> tuple[str | None, float, float]:
            if profilers is not None:
                profilers.enable_here()
            started, cpu = time.perf_counter(), time.process_time()
            status = await run_turn(run_id)
            elapsed = time.perf_counter() - started
            cpu = time.process_time() - cpu
            if profilers is not None:
                profilers.disable_here()
            return status, elapsed, cpu

        with SQL.counting() as sql:
            status, elapsed, cpu = submit(timed()).result()
        if status != "completed":
            raise RuntimeError(f"our turn ended {status!r}")
        self.check(run_id, size)
        return {
            "wall": elapsed / STEPS,
            "cpu": cpu / STEPS,
            "statements": sql.statements,
            "commits": sql.commits,
            "connections": sql.connections,
            "calls": sql.calls,
            "kinds": dict(sql.kinds),
            "seconds": dict(sql.seconds),
        }

    def check(self, run_id: str, size: int) -> None:
        """The turn ran the 20 scripted steps and its state was saved."""
        from sagents_django.core import Message
        from sagents_django.models import AgentRun, AgentState, AgentStep

        run = AgentRun.objects.get(pk=run_id)
        state = AgentState.objects.get(conversation_id=run.conversation_id)
        messages = [Message.from_dict(m) for m in state.state_data["state"]["messages"]]
        calls = tool_calls_since_prompt(m.role for m in reversed(messages))
        if (
            len(messages) != size + 1 + 2 * TOOL_CALLS + 1
            or messages[-1].text != FINAL_TEXT
            or calls != TOOL_CALLS
            or AgentStep.objects.filter(run_id=run_id).exists()
        ):
            raise RuntimeError("our turn did not run and save the 20 scripted steps")

    def checkpoint_writes(self, size: int) -> dict[str, Any]:
        """``Checkpoints.write`` of one step, in its transaction as the runtime
        calls it (commit included), ``CHECKPOINT_STEPS`` steps in a row on a state
        of ``size`` messages: per-write seconds and SQL counts."""
        from django.db import transaction

        from sagents_django import services
        from sagents_django.core import Message, ToolCall, ToolResult
        from sagents_django.core.serialization import deserialize_server_state
        from sagents_django.runtime import runs
        from sagents_django.runtime.checkpoints import Checkpoints
        from sagents_django.runtime.tenure import worker_name

        conversation = self.conversation(size)
        run = services.begin_run(self.scope, conversation.pk, queued=True, metadata={})
        run = runs.claim_run(
            run.pk, owner=worker_name(), lease_seconds=30, max_attempts=3
        )
        assert run is not None
        state = deserialize_server_state("", self.state_data(size))
        state = state.add_message(Message.user(PROMPT))
        revision = services.state_revision(self.scope, conversation.pk)
        points = Checkpoints(
            lease=runs.lease_of(run), base_revision=revision, state=state
        )
        times = []
        with SQL.counting() as sql:
            for i in range(CHECKPOINT_STEPS):
                # What a step of the loop adds: the reply with its tool call, then
                # the tool's result.
                call = ToolCall(
                    call_id=f"call_{i}", name="echo", arguments={"text": f"step {i}"}
                )
                reply = Message.assistant(tool_calls=[call])
                result = Message.tool(
                    [
                        ToolResult(
                            tool_call_id=call.call_id, name="echo", content=f"echo: {i}"
                        )
                    ]
                )
                state = state.add_message(reply if i % 2 == 0 else result)
                started = time.perf_counter()
                with transaction.atomic():  # as Turn._write_checkpoint
                    points.write(state)
                times.append(time.perf_counter() - started)
        services.finish_run(self.scope, run.pk, status="completed")
        return {
            "median": statistics.median(times),
            "max": max(times),
            "statements": sql.statements / CHECKPOINT_STEPS,
            "commits": sql.commits / CHECKPOINT_STEPS,
            "kinds": {k: v / CHECKPOINT_STEPS for k, v in sql.kinds.items()},
        }

    def detail(self, size: int) -> None:
        """Our statements of one turn by kind, with the time spent in each."""
        self.turn(size)  # warm
        data = self.turn(size)
        turn = data["wall"] * STEPS
        print(
            f"\n== one turn of ours at history {size}: {turn * 1000:.1f} ms, "
            f"{data['statements']} statements, {data['commits']} commits, "
            f"{data['connections']} new connections, {data['calls']} database calls"
        )
        print(f"{'count':>6} {'per step':>9} {'ms':>8}  statement (wall time)")
        seconds = data["seconds"]
        for kind in sorted(seconds, key=lambda k: -seconds[k]):
            count = data["kinds"][kind]
            print(
                f"{count:>6} {count / STEPS:>9.2f} {seconds[kind] * 1000:>8.2f}  {kind}"
            )
        in_sql = sum(seconds.values())
        print(
            f"   in the database: {in_sql * 1000:.1f} ms (connects, statements, "
            f"commits); the rest of the turn: {(turn - in_sql) * 1000:.1f} ms"
        )

    def profile(self, size: int, *, turns: int, clock: str) -> None:
        self.turn(size)  # warm-up
        profilers = ThreadProfiles(clock)
        profilers.enable_on_database_threads()
        walls = []
        for _ in range(turns):
            walls.append(self.turn(size, profilers=profilers)["wall"])
        profilers.disable_on_database_threads()
        print(
            f"\n== cProfile of our turn: history {size}, {turns} turns "
            f"({ms(statistics.median(walls))} ms per step under the profiler), every "
            "thread (the runtime loop and the database threads) merged; "
            + (
                "each thread's CPU time (time.thread_time)"
                if clock == "cpu"
                else "wall time, idle waits (the pool's queue, the loop's epoll) "
                "left out"
            )
        )
        stats = profilers.stats()
        stats.sort_stats("tottime").print_stats(30)
        stats.sort_stats("cumulative").print_stats(60)


IDLE_WAITS = (
    "<method 'get' of '_queue.SimpleQueue' objects>",
    "<method 'poll' of 'select.epoll' objects>",
)


class ThreadProfiles:
    """One cProfile per thread: the runtime loop's and each database thread's."""

    def __init__(self, clock: str) -> None:
        self.profiles: list[Any] = []
        self.local = threading.local()
        self.timer = time.thread_time if clock == "cpu" else time.perf_counter

    def enable_here(self) -> None:
        import cProfile

        profile = getattr(self.local, "profile", None)
        if profile is None:
            profile = self.local.profile = cProfile.Profile(self.timer)
            self.profiles.append(profile)
        profile.enable()

    def disable_here(self) -> None:
        self.local.profile.disable()

    def enable_on_database_threads(self) -> None:
        on_each_database_thread(self.enable_here)

    def disable_on_database_threads(self) -> None:
        on_each_database_thread(self.disable_here)

    def stats(self) -> Any:
        import pstats

        stats = pstats.Stats(self.profiles[0])
        for profile in self.profiles[1:]:
            stats.add(profile)
        # Idle: a pool thread waiting for work, the loop waiting for events.
        for key in list(stats.stats):  # type: ignore[attr-defined]
            if key[2] in IDLE_WAITS:
                del stats.stats[key]  # type: ignore[attr-defined]
        stats.total_tt = sum(v[2] for v in stats.stats.values())  # type: ignore[attr-defined]
        return stats.strip_dirs()


# deepagents --------------------------------------------------------------------------
class DeepAgentsChild:
    """deepagents + PostgresSaver in a ``.venv-bench`` process, one turn per
    request, so its runs interleave with ours."""

    def __init__(self, process: subprocess.Popen[str], versions: str) -> None:
        self.process = process
        self.versions = versions

    @classmethod
    def start(cls, pin: int | None) -> DeepAgentsChild | None:
        python = REPO / ".venv-bench" / "bin" / "python"
        if not python.exists():
            print(
                "deepagents comparison missing: .venv-bench does not exist (python3 "
                "-m venv .venv-bench && .venv-bench/bin/pip install -r "
                "requirements-bench.txt -e .)"
            )
            return None
        command = [str(python), __file__, "--deepagents-child"]
        if pin is not None:
            command += ["--pin", str(pin)]
        process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            process.wait()
            print("deepagents comparison missing: the .venv-bench child failed")
            return None
        return cls(process, json.loads(line)["versions"])

    def turn(self, size: int) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps({"size": size}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the deepagents child died")
        data: dict[str, Any] = json.loads(line)
        if "error" in data:
            raise RuntimeError(f"deepagents: {data['error']}")
        return data

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(60)


def deepagents_child() -> None:
    """The ``.venv-bench`` side: JSON requests on stdin, one result line each."""
    import psycopg
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    counts: Counter[str] = Counter()

    class CountingCursor(psycopg.Cursor):  # type: ignore[type-arg]
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            counts["statements"] += 1
            return super().execute(query, params, **kwargs)

        def executemany(self, query: Any, params_seq: Any, **kwargs: Any) -> Any:
            params_seq = list(params_seq)
            counts["statements"] += len(params_seq)
            return super().executemany(query, params_seq, **kwargs)

    with psycopg.connect(f"{SERVER_URL}/postgres", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {LANGGRAPH_DATABASE}")
        admin.execute(f"CREATE DATABASE {LANGGRAPH_DATABASE}")
    try:
        # As PostgresSaver.from_conn_string connects, plus the counting cursor.
        with psycopg.Connection.connect(
            f"{SERVER_URL}/{LANGGRAPH_DATABASE}",
            autocommit=True,
            prepare_threshold=0,
            row_factory=dict_row,  # type: ignore[arg-type]
            cursor_factory=CountingCursor,
        ) as conn:
            saver = PostgresSaver(conn)
            saver.setup()
            for name in ("put", "put_writes"):
                timed_method(saver, name, counts)
            graph = build_deepagents(checkpointer=saver)
            print(json.dumps({"versions": deepagents_versions()}), flush=True)
            histories: dict[int, list[Any]] = {}
            gc.collect()
            gc.freeze()
            for line in sys.stdin:
                size = json.loads(line)["size"]
                if size not in histories:
                    histories[size] = deepagents_messages(make_history(size))
                try:
                    result = deepagents_turn(
                        graph, histories[size], HumanMessage(content=PROMPT), counts
                    )
                except Exception as exc:
                    result = {"error": repr(exc)}
                print(json.dumps(result), flush=True)
    finally:
        with psycopg.connect(f"{SERVER_URL}/postgres", autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {LANGGRAPH_DATABASE}")


def timed_method(saver: Any, name: str, counts: Counter[Any]) -> None:
    """Count and time ``saver.<name>`` (each call is one autocommit pipeline)."""
    method = getattr(saver, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            counts["checkpoint_seconds"] += time.perf_counter() - started
            counts["commits"] += 1

    setattr(saver, name, timed)


def deepagents_turn(
    graph: Any, history: list[Any], prompt: Any, counts: Counter[Any]
) -> dict[str, Any]:
    config = {
        "configurable": {"thread_id": str(uuid.uuid4())},
        "recursion_limit": 1000,
    }
    # The thread's history, as a finished earlier turn leaves it (next is empty).
    graph.update_state(
        config, {"messages": history}, as_node="_ParentNotifierMiddleware.after_agent"
    )
    gc.collect()
    counts.clear()
    started, cpu = time.perf_counter(), time.process_time()
    result = graph.invoke({"messages": [prompt]}, config, durability="sync")
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu
    messages = result["messages"]
    tools = sum(1 for m in messages if m.type == "tool")
    if (
        messages[-1].content != FINAL_TEXT
        or tools != TOOL_CALLS
        or len(messages) != len(history) + 2 * STEPS
    ):
        raise RuntimeError("the deepagents turn did not run the scripted 20 steps")
    return {
        "wall": elapsed / STEPS,
        "cpu": cpu / STEPS,
        "statements": counts["statements"],
        "commits": counts["commits"],
        "checkpoint": counts["checkpoint_seconds"] / STEPS,
    }


# Driving -----------------------------------------------------------------------------
Results = dict[Any, dict[int, list[dict[str, Any]]]]
"""Every run's figures, by engine (a CONN_MAX_AGE for ours, "deepagents") and size."""


def measure(
    ours: Ours,
    deep: DeepAgentsChild | None,
    sizes: list[int],
    runs: int,
    ages: list[float | None],
) -> Results:
    """Every run of each, by history size, interleaved run by run."""
    out: Results = {age: {} for age in ages}
    out["deepagents"] = {}
    ours.turn(sizes[0])  # imports, first connections: not counted
    gc.collect()
    gc.freeze()
    for size in sizes:
        for age in ages:  # one warm-up turn each
            use_conn_max_age(age)
            ours.turn(size)
            out[age][size] = []
        if deep is not None:
            deep.turn(size)
        out["deepagents"][size] = []
        for _ in range(runs):
            for age in ages:
                use_conn_max_age(age)
                out[age][size].append(ours.turn(size))
            if deep is not None:
                out["deepagents"][size].append(deep.turn(size))
    return out


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def label(age: float | None) -> str:
    return "None" if age is None else f"{age:g}"


def med(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.median(row[key] for row in rows)


def report(
    results: Results,
    writes: dict[int, dict[str, Any]],
    floor: float,
    sizes: list[int],
    runs: int,
    ages: list[float | None],
    deep: DeepAgentsChild | None,
) -> None:
    print(
        f"\n== durable steps: {STEPS}-step tool loop, a checkpoint on PostgreSQL at "
        f"every step; ms per step, median of {runs} runs (process CPU in brackets)"
    )
    print(
        "   ours: run_turn on the runtime loop, under each CONN_MAX_AGE (0: the "
        "site's, Django's default; None: persistent connections)"
    )
    if deep is not None:
        print(
            f"   deepagents: {deep.versions}; PostgresSaver, durability='sync' "
            "(.venv-bench child, interleaved run by run)"
        )
    print(
        f"{'history':>8} {'CONN_MAX_AGE':>13} {'ours':>7} {'(CPU)':>7} "
        f"{'deepagents':>11} {'(CPU)':>7} {'deep/ours':>10}"
    )
    for size in sizes:
        theirs = results["deepagents"][size]
        for age in ages:
            ours = results[age][size]
            wall, cpu = med(ours, "wall"), med(ours, "cpu")
            line = f"{size:>8} {label(age):>13} {ms(wall):>7} {ms(cpu):>7}"
            if theirs:
                deep_wall, deep_cpu = med(theirs, "wall"), med(theirs, "cpu")
                line += (
                    f" {ms(deep_wall):>11} {ms(deep_cpu):>7} {deep_wall / wall:>9.1f}x"
                )
            print(line)

    print(
        f"\n   the checkpoint write alone, ms (median and max of {CHECKPOINT_STEPS} "
        "steps in a row)"
    )
    print(
        f"{'history':>8} {'Checkpoints.write':>18} {'(max)':>7} {'stmts':>6} "
        f"{'deepagents put+put_writes per step':>35}"
    )
    for size in sizes:
        write = writes[size]
        theirs = results["deepagents"][size]
        line = (
            f"{size:>8} {ms(write['median']):>18} {ms(write['max']):>7} "
            f"{write['statements']:>6.1f}"
        )
        if theirs:
            line += f" {ms(med(theirs, 'checkpoint')):>35}"
        print(line)
    kinds = ", ".join(
        f"{k} {v:g}" for k, v in sorted(writes[sizes[0]]["kinds"].items())
    )
    print(f"   one Checkpoints.write: {kinds}")
    print(
        f"   the server's floor, one raw INSERT + COMMIT: {ms(floor)} ms "
        "(median of 200)"
    )

    print("\n   SQL per step (a turn's count / 20, median of the runs)")
    print(
        f"{'history':>8} {'CONN_MAX_AGE':>13} {'statements':>11} {'commits':>8} "
        f"{'connects':>9} {'db calls':>9}"
    )
    for size in sizes:
        for age in ages:
            ours = results[age][size]
            print(
                f"{size:>8} {label(age):>13} {med(ours, 'statements') / STEPS:>11.2f} "
                f"{med(ours, 'commits') / STEPS:>8.2f} "
                f"{med(ours, 'connections') / STEPS:>9.2f} "
                f"{med(ours, 'calls') / STEPS:>9.2f}"
            )
        theirs = results["deepagents"][size]
        if theirs:
            print(
                f"{size:>8} {'deepagents':>13} "
                f"{med(theirs, 'statements') / STEPS:>11.2f} "
                f"{med(theirs, 'commits') / STEPS:>8.2f} {'':>9}"
            )


if __name__ == "__main__":
    main()
