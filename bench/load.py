"""Sustained load on the production stack: nothing lost, latency, flat memory.

The stack (``bench/stack.py``): PostgreSQL, the Redis Pub/Sub channel layer, one
Celery worker (threads pool), one daphne, all on this host. The provider is the test
suite's fake OpenAI server (``tests/fakes/openai_server.py``) in a process of its own,
answering every request from what it asks: a reply of ``--tokens`` words (one word is
counted as a token), ``--chunk-tokens`` per SSE chunk, one chunk every ``--interval``
ms; every ``--tool-every``-th turn first streams a short text and a ``write_todos``
call, whose result the model then answers; a conversation's title request (the
site's ConversationTitle) gets a short title. The agent is the site's own
(``project.agents.factory``), not a test factory.

At the same time, for ``--duration`` seconds:

- ``--steady`` conversations (20) stream without pause: each has its own socket
  (the JSON protocol of docs/protocol.md), which sends the next message as soon as
  the previous turn's ``run_finished`` arrives, and moves to a new conversation every
  ``--turns`` turns (unsubscribe, subscribe), as a person would;
- a burst: ``--burst`` (50) more conversations, each on its own socket opened
  beforehand, send one message each within one second, at a third of the duration;
- ``--idle`` (200) sockets each follow an idle conversation the whole time. One of
  them (in turn) asks for ``history`` every second: the round trip of a control frame
  through a loaded daphne.

Turns running when the time is up finish, then everything is checked:

- lost or duplicated: for every conversation, the display rows its client received
  (``display_message_saved``, updated by ``display_message_updated``, keyed by id as
  docs/protocol.md asks a client to) against the database's rows: rows missing on
  the client, rows received twice, rows whose final content or status differ, rows
  the client has that the database does not. The event frames: ``seq`` gaps and
  repeats, and frames the worker published (seen by the tap, below) that the
  client never received. Per turn: the streamed text (``llm_deltas``) against the
  text of the assistant rows saved in that turn. In the database: every message
  answered exactly once, every run ``completed``. All must be 0. Beside them, not a
  loss: frames that arrived after a higher ``seq`` of their conversation.
- submit → first delta: the ``send`` frame written → the first ``llm_deltas`` frame
  of that turn received, p50 / p95 / p99, for the steady turns and for the burst. The
  provider sends its first chunk at once (no first-byte delay, ``--first-byte``), so
  this is the stack's own time: daphne saving the message and queueing the run, the
  worker claiming it, building the agent, loading the state, the request. It is
  split at the run's ``created_at`` and ``started_at`` (the claim), read from the
  database: the same host's wall clock.
- fan-out lag: an event's arrival at a *tap* → its arrival at the client. The tap is
  a process of its own subscribed to the same conversations' channel-layer groups
  (Redis Pub/Sub, like daphne); events carry no timestamp, so the tap's receipt
  stands for the worker's publish (the layer's own ``group_send`` → ``receive`` is
  0.1-0.3 ms here: ``stream_latency.py``), and the lag is what daphne (the layer
  receive, the consumer, the socket) and the client's reading add. Both stamp
  ``time.monotonic()`` (one clock for the host). The measuring process's own event-loop
  lag is printed beside it: it counts in the figure.
- memory: the resident memory (VmRSS) of the worker and of daphne every ``--sample``
  seconds, as a time series, and its slope (MB/min, least squares) after
  ``--warmup`` seconds and after the burst; with their CPU.

Needs PostgreSQL (database ``load``, dropped and created again) and Redis on
127.0.0.1; the channel-layer prefix and the Celery queue are this run's own, and its
keys are deleted from Redis at the end. Run from the repository root::

    .venv/bin/python bench/load.py            # 10 minutes
    .venv/bin/python bench/load.py --quick    # 30 s

A benchmark, not a test: it prints figures and asserts no thresholds. Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import os
import random
import re
import statistics
import subprocess
import sys
import time
import traceback
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.stack import (
    REDIS_URL,
    ROOT,
    connect,
    cpu_seconds,
    free_port,
    make_conversations,
    make_user,
    percentile,
    prepare_database,
    rss_mb,
    setup_django,
    stack_env,
    start_server,
    start_worker,
    stop,
)

DATABASE = "load"
SESSION = uuid.uuid4().hex[:8]
PREFIX = QUEUE = f"sagents-load-{SESSION}"
MARKER = re.compile(r"<(m[\w.-]+)>")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TEXT = (
    "the stack streams every reply through a worker and a socket while the "
    "database keeps each row so that a client can always read it again later "
    "tokens arrive in small pieces and nothing should be lost on the way"
)


# The provider (a process of its own) ----------------------------------------------
def provider_reply(request: dict[str, Any], options: dict[str, Any]) -> Any:
    """The fake provider's answer to one request, decided from the request alone."""
    from tests.fakes.openai_server import reply, tool_call

    messages = request.get("messages") or []

    def text(message: dict[str, Any]) -> str:
        content = message.get("content") or ""
        if isinstance(content, list):
            return "".join(str(p.get("text", "")) for p in content)
        return str(content)

    if messages and "short title" in text(messages[0]):
        return reply("Load test conversation")
    user = next((text(m) for m in reversed(messages) if m["role"] == "user"), "")
    found = MARKER.search(user)
    marker = found.group(1) if found else "m?"
    pace = {"delay": options["interval"] / 1000}
    if options["first_byte"]:
        pace["gaps"] = {0: options["first_byte"] / 1000}
    if "[tool]" in user and messages[-1]["role"] == "user":
        todos = [
            {"content": "Read the question", "status": "completed"},
            {"content": "Write the answer", "status": "in_progress"},
        ]
        call = tool_call("write_todos", {"todos": todos}, id=f"call-{marker}")
        return reply(
            f"Planning {marker} first. ", chunks=3, tool_calls=[call], args_chunks=4,
            **pace,
        )  # fmt: skip
    rng = random.Random(marker)
    words = rng.randint(*options["tokens"])
    vocabulary = TEXT.split()
    body = " ".join(rng.choice(vocabulary) for _ in range(words))
    chunks = math.ceil(words / options["chunk_tokens"])
    return reply(f"<{marker}> {body}", chunks=chunks, **pace)


def serve_provider(options: dict[str, Any]) -> None:
    """Serve until stdin closes; print the port first. Recorded requests are
    dropped every second (a long run would keep every request body)."""
    import select

    from tests.fakes.openai_server import FakeOpenAIServer

    server = FakeOpenAIServer(default=lambda r: provider_reply(r, options)).start()
    print(f"port {server.port}", flush=True)
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], 1.0)
        if ready and not sys.stdin.readline():
            break
        server.requests.clear()
    server.stop()


# The tap (a process of its own) ----------------------------------------------------
def serve_tap(out: str) -> None:
    """Join conversations' groups (``watch <id>`` on stdin, answered ``ok <id>``)
    and stamp each event's arrival; on ``end``, write them to ``out`` as JSON."""
    import threading

    import django

    django.setup()
    from channels.layers import get_channel_layer

    from sagents_django.runtime.groups import conversation_group

    seen: dict[str, list[tuple[int, str, float]]] = {}

    async def main() -> None:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        loop = asyncio.get_running_loop()
        lines: asyncio.Queue[str] = asyncio.Queue()

        def read() -> None:
            for line in itertools.chain(iter(sys.stdin.readline, ""), ["end"]):
                loop.call_soon_threadsafe(lines.put_nowait, line)

        threading.Thread(target=read, daemon=True).start()

        async def receive() -> None:
            while True:
                message = await layer.receive(channel)
                now = time.monotonic()
                cid = message["conversation"]
                seen.setdefault(cid, []).append((message["seq"], message["event"], now))

        receiving = asyncio.ensure_future(receive())
        await asyncio.sleep(0.05)  # the Pub/Sub layer subscribes on first receive
        while (line := (await lines.get()).strip()) != "end":
            cid = line.split()[1]
            await layer.group_add(conversation_group(cid), channel)
            print(f"ok {cid}", flush=True)
        if receiving.done():  # it failed: say why
            receiving.result()
        Path(out).write_text(json.dumps(seen))
        os._exit(0)  # no clean-up of the subscriptions: nothing is left to read

    asyncio.run(main())


class Tap:
    """The parent's side of the tap process."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.out = logs / "tap.json"
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--role", "tap", "--tap-out", str(self.out)],
            cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=(logs / "tap.log").open("wb"), text=True,
        )  # fmt: skip
        self.lock = asyncio.Lock()

    async def watch(self, cid: str) -> None:
        async with self.lock:  # one request at a time: answers come in order
            await asyncio.to_thread(self._watch, cid)

    def _watch(self, cid: str) -> None:
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(f"watch {cid}\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline().strip()
        if answer != f"ok {cid}":
            raise RuntimeError(f"the tap answered {answer!r}")

    def finish(self) -> dict[str, dict[int, tuple[str, float]]]:
        assert self.process.stdin
        self.process.stdin.close()
        self.process.wait(60)
        seen = json.loads(self.out.read_text())
        return {c: {s: (e, t) for s, e, t in events} for c, events in seen.items()}


# Clients ---------------------------------------------------------------------------
Kind = Literal["steady", "burst", "idle"]


@dataclass(kw_only=True)
class Turn:
    """One message and the turn it started, as its client saw them."""

    marker: str
    submitted: float
    submitted_wall: float = field(default_factory=time.time)
    """For the database's timestamps (one host, one wall clock)."""
    run_id: str = ""
    first_delta: float = 0.0
    finished: float = 0.0
    status: str = ""
    streamed: list[str] = field(default_factory=list)
    """Text of the turn's ``llm_deltas``."""
    rows: list[str] = field(default_factory=list)
    """Ids of the assistant text rows saved during the turn."""
    done: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass(kw_only=True)
class Watch:
    """One conversation as its client saw it."""

    conversation: str
    kind: Kind
    frames: list[tuple[int, str, float]] = field(default_factory=list)
    """(seq, event, monotonic arrival) of every event frame."""
    saved: Counter[str] = field(default_factory=Counter)
    """How many times each display row id came in ``display_message_saved``."""
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The client's copy of each row (saved, then replaced by updates)."""
    turns: list[Turn] = field(default_factory=list)
    current: Turn | None = None
    left: float = math.inf
    """When the client unsubscribed."""
    unsettled: int = 0
    """Turns whose closing ``status_changed`` did not come within 10 s."""
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    """The last turn's closing ``status_changed`` arrived (the client leaves a
    conversation only then: a frame on its way when it unsubscribes is dropped)."""


class Client:
    """One socket: sends frames, matches replies, files event frames by conversation."""

    def __init__(self, socket: Any) -> None:
        self.socket = socket
        self.watches: dict[str, Watch] = {}
        self.replies: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.ids = itertools.count()
        self.closed: Any = None
        self.reading = asyncio.ensure_future(self._read())

    async def request(self, action: str, **fields: Any) -> dict[str, Any]:
        rid = str(next(self.ids))
        future = self.replies[rid] = asyncio.get_running_loop().create_future()
        await self.socket.send(json.dumps({"action": action, "id": rid, **fields}))
        async with asyncio.timeout(60):
            answer = await future
        if not answer.get("ok"):
            raise RuntimeError(f"{action} failed: {answer}")
        return answer

    async def follow(self, cid: str, kind: Kind) -> Watch:
        watch = self.watches[cid] = Watch(conversation=cid, kind=kind)
        await self.request("subscribe", conversation=cid)
        return watch

    async def leave(self, watch: Watch) -> None:
        watch.left = time.monotonic()
        await self.request("unsubscribe", conversation=watch.conversation)

    async def submit(self, watch: Watch, marker: str, *, tool: bool) -> Turn:
        text = f"Message <{marker}>" + (" [tool]" if tool else "")
        turn = Turn(marker=marker, submitted=time.monotonic())
        watch.turns.append(turn)
        watch.settled.clear()
        try:
            answer = await self.request(
                "send", conversation=watch.conversation, text=text
            )
        except Exception as exc:  # counted as a turn not completed
            turn.status = f"send failed: {exc}"
            turn.done.set()
        else:
            turn.run_id = turn.run_id or answer["run_id"]
        return turn

    async def _read(self) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            async for raw in self.socket:
                now = time.monotonic()
                frame = json.loads(raw)
                if "reply" in frame:
                    future = self.replies.pop(str(frame.get("id")), None)
                    if future is not None and not future.done():
                        future.set_result(frame)
                elif (watch := self.watches.get(frame.get("conversation"))) is not None:
                    on_event(watch, frame, now)
        except ConnectionClosed as exc:  # reported, not raised
            self.closed = exc
        except Exception as exc:  # a bug of this script: say it at once
            traceback.print_exc()
            self.closed = exc
        self.closed = self.closed or getattr(self.socket, "close_code", "closed")


def on_event(watch: Watch, frame: dict[str, Any], now: float) -> None:
    if "seq" not in frame or frame.get("event") == "in_flight":
        return  # run_alive: not numbered; in_flight: a snapshot, not an event
    event, data = frame["event"], frame.get("data") or {}
    watch.frames.append((frame["seq"], event, now))
    turn = watch.current
    if event == "run_started" and watch.turns:
        turn = watch.current = watch.turns[-1]
        turn.run_id = turn.run_id or data["run_id"]
    elif event == "llm_deltas" and turn is not None and not frame.get("subagent"):
        turn.first_delta = turn.first_delta or now
        turn.streamed += [d["content"] for d in data["deltas"] if d.get("content")]
    elif event in ("display_message_saved", "display_message_updated"):
        row = data["display_message"]
        watch.rows[row["id"]] = row
        if event == "display_message_saved":
            watch.saved[row["id"]] += 1
            if turn is not None and is_text(row):
                turn.rows.append(row["id"])
    elif event == "run_finished":
        ended = next((t for t in watch.turns if t.run_id == data["run_id"]), turn)
        if ended is not None:
            ended.finished, ended.status = now, data["status"]
            ended.done.set()
        watch.current = None
    elif (
        event == "status_changed"
        and data.get("status") != "running"
        # The closing frame of the last turn (the one of the turn before may come
        # as late as this: see "Order" in the report).
        and watch.turns
        and data.get("run_id") == watch.turns[-1].run_id
    ):
        watch.settled.set()


def is_text(row: dict[str, Any]) -> bool:
    return row["message_type"] == "assistant" and row["content_type"] == "text"


# The run ---------------------------------------------------------------------------
@dataclass(kw_only=True)
class Load:
    args: argparse.Namespace
    port: int
    cookie: str
    user: Any
    tap: Tap
    clients: list[Client] = field(default_factory=list)
    samples: list[tuple[float, float, float]] = field(default_factory=list)
    loop_lag: list[float] = field(default_factory=list)
    probes: list[float] = field(default_factory=list)
    probe_errors: int = 0
    created: set[str] = field(default_factory=set)
    t0: float = 0.0

    async def client(self) -> Client:
        client = Client(await connect(self.port, self.cookie))
        self.clients.append(client)
        return client

    async def conversation(self, kind: Kind, client: Client) -> Watch:
        from asgiref.sync import sync_to_async

        [cid] = await sync_to_async(make_conversations)(self.user, 1)
        self.created.add(cid)
        if kind != "idle":
            await self.tap.watch(cid)
        return await client.follow(cid, kind)

    async def steady(self, index: int, deadline: float) -> None:
        client = await self.client()
        watch: Watch | None = None
        for k in itertools.count():
            if time.monotonic() >= deadline:
                break
            if k % self.args.turns == 0:
                if watch is not None:
                    await wait_settled(watch)
                    await client.leave(watch)
                watch = await self.conversation("steady", client)
            assert watch is not None
            tool = k % self.args.tool_every == self.args.tool_every - 1
            turn = await client.submit(watch, f"m{index}.{k}", tool=tool)
            await finish(turn)
        if watch is not None:
            await wait_settled(watch)

    async def burst(self) -> None:
        watches = []
        for _ in range(self.args.burst):
            client = await self.client()
            watches.append((client, await self.conversation("burst", client)))
        await asyncio.sleep(self.args.duration / 3 - (time.monotonic() - self.t0))
        turns = []
        for i, (client, watch) in enumerate(watches):
            turns.append(
                asyncio.ensure_future(client.submit(watch, f"m-burst.{i}", tool=False))
            )
            await asyncio.sleep(1 / len(watches))
        for task in turns:
            await finish(await task)
        for _, watch in watches:
            await wait_settled(watch)

    async def idle(self) -> None:
        """Idle sockets; one asks for its history every second (a probe)."""
        watches = []
        for _ in range(self.args.idle):
            client = await self.client()
            watches.append((client, await self.conversation("idle", client)))
        for client, watch in itertools.cycle(watches):
            await asyncio.sleep(1)
            start = time.monotonic()
            try:
                await client.request(
                    "history", conversation=watch.conversation, limit=1
                )
            except Exception:  # a closed socket, a timeout: counted, not raised
                self.probe_errors += 1
            else:
                self.probes.append(time.monotonic() - start)

    async def sample(self, worker: int, daphne: int) -> None:
        while True:
            now = time.monotonic() - self.t0
            self.samples.append((now, rss_mb(worker), rss_mb(daphne)))
            await asyncio.sleep(self.args.sample)

    async def lag(self) -> None:
        """The measuring process's own event-loop lag (a 100 ms sleep's overshoot)."""
        while True:
            start = time.monotonic()
            await asyncio.sleep(0.1)
            self.loop_lag.append(time.monotonic() - start - 0.1)


async def finish(turn: Turn) -> None:
    try:
        async with asyncio.timeout(300):
            await turn.done.wait()
    except TimeoutError:
        turn.status = "no run_finished in 300 s"


async def wait_settled(watch: Watch) -> None:
    """Wait (up to 10 s) for the turn's closing status frame before leaving."""
    try:
        async with asyncio.timeout(10):
            await watch.settled.wait()
    except TimeoutError:
        watch.unsettled += 1


async def run_load(args: argparse.Namespace) -> None:
    from asgiref.sync import sync_to_async

    logs = Path(f"/tmp/sagents-load-{SESSION}")
    logs.mkdir()
    options = {k: getattr(args, k) for k in
               ("tokens", "chunk_tokens", "interval", "first_byte")}  # fmt: skip
    provider = subprocess.Popen(
        [sys.executable, __file__, "--role", "provider", "--options",
         json.dumps(options)],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=(logs / "provider.log").open("wb"), text=True,
    )  # fmt: skip
    assert provider.stdout
    provider_port = int(provider.stdout.readline().split()[1])
    overrides = {
        "FACTORY": args.factory,
        "EXECUTOR": "celery",
        "MODEL": "openai/load",
        "MODEL_PARAMS": {
            "api_base": f"http://127.0.0.1:{provider_port}/v1",
            "api_key": "load",
        },
    }
    env = stack_env(database=DATABASE, prefix=PREFIX, queue=QUEUE, overrides=overrides)
    prepare_database(DATABASE)
    setup_django(env)
    user, cookie = await sync_to_async(make_user)(f"load-{SESSION}")
    port = free_port()
    concurrency = args.steady + args.burst + 10
    worker = start_worker(env, queue=QUEUE, concurrency=concurrency,
                          log=logs / "worker.log")  # fmt: skip
    daphne = start_server(env, port=port, log=logs / "daphne.log")
    tap = Tap(env, logs)
    load = Load(args=args, port=port, cookie=cookie, user=user, tap=tap)
    try:
        # Warm-up (not counted): the worker's first turn imports and connects.
        warm = await load.client()
        watch = await load.conversation("idle", warm)
        await finish(await warm.submit(watch, "m-warm.0", tool=True))
        del warm.watches[watch.conversation]
        idle_before = rss_mb(worker.pid), rss_mb(daphne.pid)
        background = [asyncio.ensure_future(load.idle())]
        while len(load.clients) < args.idle + 1:  # the idle sockets come first
            await asyncio.sleep(0.1)
        loadavg = os.getloadavg()
        cpu = Cpu(
            worker=worker.pid, daphne=daphne.pid, clients=os.getpid(),
            provider=provider.pid, tap=tap.process.pid,
        )  # fmt: skip
        load.t0 = time.monotonic()
        deadline = load.t0 + args.duration
        background += [
            asyncio.ensure_future(load.sample(worker.pid, daphne.pid)),
            asyncio.ensure_future(load.lag()),
        ]
        await asyncio.gather(
            asyncio.sleep(args.duration),
            load.burst(),
            *(load.steady(i, deadline) for i in range(args.steady)),
        )
        for task in background:
            task.cancel()
        cpu.stop()
        load.samples.append((cpu.elapsed, rss_mb(worker.pid), rss_mb(daphne.pid)))
        await asyncio.sleep(1)  # frames still on their way
        published = await asyncio.to_thread(tap.finish)
        found = await sync_to_async(check_database)(load)
        report(load, published, found, cpu, idle_before, loadavg)
        print(f"\n{log_errors(logs)}")
    finally:
        for client in load.clients:
            await client.socket.close()
        stop(daphne, worker)
        if tap.process.poll() is None:
            tap.process.kill()
        assert provider.stdin
        provider.stdin.close()
        provider.wait(30)
        tidy_redis(load.created)


def tidy_redis(conversations: set[str]) -> None:
    """Delete this run's keys from the shared Redis: its queue and layer keys, and
    its conversations' counters, viewers and activity (kept for days otherwise)."""
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    ours = []
    for key in client.scan_iter(count=1000):
        name = key.decode(errors="replace")
        found = UUID.search(name)
        if PREFIX in name or (
            name.startswith("sagents:") and found and found.group(0) in conversations
        ):
            ours.append(key)
    for i in range(0, len(ours), 500):
        client.delete(*ours[i : i + 500])


# Checks ----------------------------------------------------------------------------
def check_database(load: Load) -> dict[str, Any]:
    """What the database holds of every conversation: rows and runs."""
    from sagents_django.models import AgentRun, DisplayMessage
    from sagents_django.runtime.publisher import display_message_json

    cids = [c for client in load.clients for c in client.watches]
    rows: dict[str, list[dict[str, Any]]] = {c: [] for c in cids}
    for row in DisplayMessage.objects.filter(conversation_id__in=cids).order_by(
        "inserted_at", "sequence", "id"
    ):
        rows[str(row.conversation_id)].append(display_message_json(row))
    runs: dict[str, list[tuple[str, str]]] = {c: [] for c in cids}
    times: dict[str, tuple[float, float]] = {}
    for cid, run_id, status, created, started in AgentRun.objects.filter(
        conversation_id__in=cids
    ).values_list("conversation_id", "id", "status", "created_at", "started_at"):
        runs[str(cid)].append((str(run_id), status))
        if started is not None:
            times[str(run_id)] = (created.timestamp(), started.timestamp())
    return {"rows": rows, "runs": runs, "times": times}


def check(
    watch: Watch,
    db_rows: list[dict[str, Any]],
    db_runs: list[tuple[str, str]],
    published: dict[int, tuple[str, float]],
) -> tuple[Counter[str], list[float], list[tuple[str, str]]]:
    """Every discrepancy between what the client saw and what the database holds
    (counted by kind), the fan-out lag of each event frame, and the frames that
    arrived after a frame with a higher seq (as (late event, overtaking event))."""
    bad: Counter[str] = Counter()
    by_id = {r["id"]: r for r in db_rows}
    bad["rows missing on the client"] = len(by_id.keys() - watch.saved.keys())
    bad["rows on the client, not in the database"] = len(watch.rows.keys() - by_id)
    bad["rows received twice"] = sum(n - 1 for n in watch.saved.values())
    bad["rows differing (content, status)"] = sum(
        1
        for i, row in watch.rows.items()
        if i in by_id
        and (row["content"], row["status"]) != (by_id[i]["content"], by_id[i]["status"])
    )
    seqs = [s for s, _, _ in watch.frames]
    bad["event frames received twice"] = len(seqs) - len(set(seqs))
    bad["seq gaps"] = (max(seqs) - len(set(seqs))) if seqs else 0
    late, highest = [], (0, "")
    for seq, event, _ in watch.frames:
        if seq < highest[0]:
            late.append((event, highest[1]))
        highest = max(highest, (seq, event))
    arrived = {s: t for s, _, t in watch.frames}
    bad["events published, never received"] = sum(
        1
        for s, (event, t) in published.items()
        if s not in arrived and event != "agent_shutdown" and t < watch.left
    )
    lags = [arrived[s] - t for s, (_, t) in published.items() if s in arrived]
    # Each message answered once, in the database and on the socket.
    for turn in watch.turns:
        finals = [
            r for r in db_rows
            if is_text(r) and r["content"].get("text", "").startswith(f"<{turn.marker}>")
        ]  # fmt: skip
        bad["messages unanswered"] += not finals
        bad["messages answered twice"] += len(finals) > 1
        saved = "".join(watch.rows[i]["content"]["text"] for i in turn.rows)
        bad["turns whose streamed text differs from the saved"] += (
            "".join(turn.streamed) != saved
        )
        bad["turns not completed (per the client)"] += turn.status != "completed"
        bad["turns with no text streamed"] += not turn.streamed
    bad["runs not completed (in the database)"] = sum(
        1 for _, status in db_runs if status != "completed"
    )
    bad["runs other than one per message"] = abs(len(db_runs) - len(watch.turns))
    bad["turns whose closing status_changed did not come"] = watch.unsettled
    if watch.kind == "idle":
        bad["event frames on idle sockets"] = len(watch.frames)
    return bad, lags, late


# Report ----------------------------------------------------------------------------
def report(
    load: Load,
    published: dict[str, dict[int, tuple[str, float]]],
    found: dict[str, Any],
    cpu: Cpu,
    idle_before: tuple[float, float],
    loadavg: tuple[float, float, float],
) -> None:
    args = load.args
    print(
        f"\n# bench/load.py: {cpu.elapsed:.0f} s on {os.cpu_count()} cores "
        f"(load average {loadavg[0]:.1f} at the start, {os.getloadavg()[0]:.1f} "
        f"at the end)\n\nProvider: {args.tokens[0]}-{args.tokens[1]} tokens per "
        f"reply, {args.chunk_tokens} per chunk, one chunk every {args.interval:g} ms, "
        f"first byte after {args.first_byte:g} ms; every {args.tool_every}th turn "
        f"calls write_todos first.\nSockets: {args.steady} steady conversations (a "
        f"new one every {args.turns} turns), {args.burst} sends within one second at "
        f"{args.duration / 3:.0f} s, {args.idle} idle sockets."
    )
    lags = report_losses(load, published, found)
    report_latency(load, found, lags)
    report_memory(load, idle_before)
    print(
        f"CPU over the run, in cores: {cpu.used()}; the whole machine (every "
        f"process, other sessions' included) {cpu.busy:.2f} of {os.cpu_count()}."
    )


def report_losses(
    load: Load,
    published: dict[str, dict[int, tuple[str, float]]],
    found: dict[str, Any],
) -> list[float]:
    """The table of what was lost or duplicated; the fan-out lags."""
    kinds: tuple[Kind, ...] = ("steady", "burst", "idle")
    bad: dict[Kind, Counter[str]] = {k: Counter() for k in kinds}
    seen: dict[Kind, Counter[str]] = {k: Counter() for k in kinds}
    lags: list[float] = []
    late: Counter[tuple[str, str]] = Counter()
    for w in (w for c in load.clients for w in c.watches.values()):
        counts, lag, overtaken = check(
            w,
            found["rows"][w.conversation],
            found["runs"][w.conversation],
            {int(s): v for s, v in published.get(w.conversation, {}).items()},
        )
        bad[w.kind].update(counts)
        lags += lag
        late.update(overtaken)
        seen[w.kind].update(
            {
                "conversations": 1,
                "turns": len(w.turns),
                "event frames received": len(w.frames),
                "display rows in the database": len(found["rows"][w.conversation]),
            }
        )
    bad["idle"]["history probes failed"] = load.probe_errors
    print("\n## Lost or duplicated (all must be 0)\n")
    print("| | steady | burst | idle |\n|---|---:|---:|---:|")
    for table in (seen, bad):
        for name in sorted({name for c in table.values() for name in c}):
            print(f"| {name} | {' | '.join(str(table[k][name]) for k in kinds)} |")
    print(
        f"\nOrder: {late.total()} event frames arrived after a higher seq of their "
        "conversation (none lost: a client of docs/protocol.md would resync on the "
        "gap, then see the seq go back)"
        + "".join(f"; {n} x {a} after {b}" for (a, b), n in late.most_common())
        + "."
    )
    closed = sum(1 for c in load.clients if c.closed is not None)
    print(f"Sockets closed by the server during the run: {closed} of "
          f"{len(load.clients)}.")  # fmt: skip
    return lags


def report_latency(load: Load, found: dict[str, Any], lags: list[float]) -> None:
    turns = {
        kind: [t for c in load.clients for w in c.watches.values()
               if w.kind == kind for t in w.turns]
        for kind in ("steady", "burst")
    }  # fmt: skip
    print("\n## Latency (ms)\n")
    print("| | n | p50 | p95 | p99 | max |\n|---|---:|---:|---:|---:|---:|")
    for kind, kind_turns in turns.items():
        started = [t for t in kind_turns if t.first_delta]
        latency_row(
            f"submit -> first delta, {kind}",
            [t.first_delta - t.submitted for t in started],
        )
        # Where it went: daphne, the queue and the claim, the turn's start. The
        # run's timestamps are the database's (wall clock of the same host).
        parts: list[list[float]] = [[], [], []]
        for t in started:
            if t.run_id in found["times"]:
                created, claimed = found["times"][t.run_id]
                first = t.submitted_wall + t.first_delta - t.submitted
                steps = (created - t.submitted_wall, claimed - created, first - claimed)
                for part, value in zip(parts, steps, strict=True):
                    part.append(value)
        latency_row("  of which submit -> run created (daphne)", parts[0])
        latency_row("  run created -> claimed by the worker", parts[1])
        latency_row("  claimed -> first delta received", parts[2])
    latency_row(
        "turn, submit -> run_finished, steady",
        [t.finished - t.submitted for t in turns["steady"] if t.finished],
    )
    latency_row("fan-out lag: tap -> client, every event frame", lags)
    latency_row("history round trip on an idle socket (1/s)", load.probes)
    latency_row("the measuring process's loop lag", load.loop_lag)


def latency_row(name: str, values: list[float]) -> None:
    v = sorted(values)
    figures = [percentile(v, p) for p in (50, 95, 99)] + [v[-1] if v else math.nan]
    print(
        f"| {name} | {len(v)} | "
        + " | ".join(f"{x * 1000:.1f}" for x in figures)
        + " |"
    )


def report_memory(load: Load, idle_before: tuple[float, float]) -> None:
    samples = load.samples
    print("\n## Memory (RSS, MB) and CPU\n")
    print("| t (s) | worker | daphne |\n|---:|---:|---:|")
    step = max(1, math.ceil(len(samples) / 20))
    shown = samples[::step]
    if shown[-1] is not samples[-1]:
        shown.append(samples[-1])
    for t, worker, daphne in shown:
        print(f"| {t:.0f} | {worker:.1f} | {daphne:.1f} |")
    since = [(f"after the {load.args.warmup:g} s warm-up", load.args.warmup)]
    ends = [
        t.finished - load.t0
        for c in load.clients
        for w in c.watches.values()
        if w.kind == "burst"
        for t in w.turns
        if t.finished
    ]
    if ends:
        since.append(
            (f"from 5 s after the burst ({max(ends) + 5:.0f} s)", max(ends) + 5)
        )
    print()
    for name, start in since:
        part = [s for s in samples if s[0] >= start]
        print(
            f"Slope {name}, {len(part)} samples: worker {slope(part, 1):+.2f} MB/min, "
            f"daphne {slope(part, 2):+.2f} MB/min."
        )
    print(
        f"After one warm-up turn, before the sockets opened: worker "
        f"{idle_before[0]:.0f} MB, "
        f"daphne {idle_before[1]:.0f} MB."
    )


class Cpu:
    """CPU time of named processes, and of the whole machine, from now to stop()."""

    def __init__(self, **pids: int) -> None:
        self.pids = pids
        self.before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        self.machine = machine_ticks()
        self.start = time.monotonic()
        self.cores: dict[str, float] = {}
        self.busy = 0.0
        self.elapsed = 0.0

    def stop(self) -> None:
        self.elapsed = elapsed = time.monotonic() - self.start
        for name, pid in self.pids.items():
            self.cores[name] = (cpu_seconds(pid) - self.before[name]) / elapsed
        (busy, total), (busy0, total0) = machine_ticks(), self.machine
        self.busy = (os.cpu_count() or 1) * (busy - busy0) / (total - total0)

    def used(self) -> str:
        return ", ".join(f"{name} {cores:.2f}" for name, cores in self.cores.items())


def machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all cores, from /proc/stat."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = ticks[3] + ticks[4]  # idle, iowait
    total = sum(ticks[:8])  # guest time is already counted in user
    return total - idle, total


def log_errors(logs: Path) -> str:
    """Errors the worker and daphne logged (ERROR or CRITICAL lines, tracebacks)."""
    counts = []
    for name in ("worker", "daphne"):
        text = (logs / f"{name}.log").read_text(errors="replace")
        found = len(re.findall(r"\b(ERROR|CRITICAL)\b|^Traceback", text, re.M))
        counts.append(f"{name} {found}")
    return f"Errors logged: {', '.join(counts)} (logs in {logs})."


def slope(samples: list[tuple[float, float, float]], column: int) -> float:
    """Least-squares slope of a column against time, in MB per minute."""
    if len(samples) < 3:
        return math.nan
    ts = [s[0] for s in samples]
    ys = [s[column] for s in samples]
    mt, my = statistics.fmean(ts), statistics.fmean(ys)
    var = sum((t - mt) ** 2 for t in ts)
    return 60 * sum((t - mt) * (y - my) for t, y in zip(ts, ys, strict=True)) / var


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--quick", action="store_true", help="30 s, warm-up 10 s, a sample every 2 s")
    add("--duration", type=float, default=600.0, help="seconds")
    add("--steady", type=int, default=20)
    add("--burst", type=int, default=50)
    add("--idle", type=int, default=200)
    add("--turns", type=int, default=10, help="turns per steady conversation")
    add("--tool-every", type=int, default=4)
    add("--tokens", type=int, nargs=2, default=[200, 400], metavar=("MIN", "MAX"))
    add("--chunk-tokens", type=int, default=4)
    add("--interval", type=float, default=40.0, help="ms between chunks")
    add("--first-byte", type=float, default=0.0, help="ms before the first chunk")
    add("--factory", default="project.agents.factory.build_agent",
        help="the agent factory (default: the site's)")  # fmt: skip
    add("--sample", type=float, default=5.0, help="seconds between memory samples")
    add("--warmup", type=float, default=60.0, help="seconds left out of the slope")
    add("--role", choices=["load", "provider", "tap"], default="load",
        help=argparse.SUPPRESS)  # fmt: skip
    add("--options", help=argparse.SUPPRESS)
    add("--tap-out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.duration, args.warmup, args.sample = 30.0, 10.0, 2.0
    return args


if __name__ == "__main__":
    arguments = parse()
    if arguments.role == "provider":
        serve_provider(json.loads(arguments.options))
    elif arguments.role == "tap":
        serve_tap(arguments.tap_out)
    else:
        asyncio.run(run_load(arguments))
