"""Durable turns under what production does to them, with real processes.

Two Celery workers on a queue of their own, with a short lease (4 s: shorter is
taken for death on a loaded 2-core machine) and sweep (0.5 s) so that takeovers
happen within seconds, and a 1 s broker visibility
timeout so that Celery delivers running turns' tasks again while they run. The
fake provider and the tools (``chaos_agents``) leave traces that show what ran
how many times. Production stack only: the PostgreSQL pass.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from sagents_django.core.journal import LOST_TEXT
from sagents_django.models import (
    AgentRun,
    AgentState,
    AgentStep,
    DisplayMessage,
    ToolCallRecord,
)
from sagents_django.runtime import agent_server
from tests.fakes.openai_server import FakeOpenAIServer, reply, tool_call
from tests.runtime import stacks
from tests.runtime.follow import EMBEDDED, follow, new_conversation, no_active_runs
from tests.support.processes import Daphne, PrivateRedis

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        "production" not in stacks.names(),
        reason="real worker processes: the PostgreSQL pass",
    ),
]

QUEUE = f"{stacks.QUEUE}-durable"
FAST = {
    "FACTORY": "tests.runtime.chaos_agents.build_agent",
    "LEASE_SECONDS": 4,
    "HEARTBEAT_SECONDS": 0.5,
    "SWEEP_SECONDS": 0.5,
}
TEXT = "One two three four five six seven eight nine ten. " * 4


@pytest.fixture(scope="module")
def workers(
    django_db_setup: Any, django_db_blocker: Any, production_llm: FakeOpenAIServer
) -> Iterator[list[stacks.Worker]]:
    stacks.use_redis_broker()
    pair = [
        stacks.Worker(
            production_llm,
            queue=QUEUE,
            overrides=FAST,
            env={"CELERY_VISIBILITY_TIMEOUT": "1"},
        )
        for _ in range(2)
    ]
    for worker in pair:
        worker.start()
    try:
        yield pair
    finally:
        for worker in pair:
            worker.stop()
            worker.log.unlink(missing_ok=True)


class Site:
    def __init__(self, llm: FakeOpenAIServer, workers: list[stacks.Worker]) -> None:
        self.llm = llm
        self.workers = workers

    async def holder(self, run_id: Any, timeout: float = 20) -> stacks.Worker:
        """The worker whose turn holds ``run_id`` now."""
        async with asyncio.timeout(timeout):
            while True:
                run = await AgentRun.objects.aget(pk=run_id)
                if run.status == "running" and run.lease_owner:
                    pid = int(run.lease_owner.split(":")[1])
                    for worker in self.workers:
                        if worker.alive() and worker.pid == pid:
                            return worker
                await asyncio.sleep(0.02)


@pytest.fixture
async def site(
    workers: list[stacks.Worker], production_llm: FakeOpenAIServer, settings: Any
) -> Any:
    from project.celery import app

    production_llm.reset()
    for worker in workers:
        if not worker.alive():
            await asyncio.to_thread(worker.start)
    settings.CHANNEL_LAYERS = {"default": stacks.redis_layer()}
    settings.SAGENTS = {**EMBEDDED, **stacks.sagents_overrides(production_llm), **FAST}
    app.conf.task_default_queue = QUEUE
    try:
        yield Site(production_llm, workers)
        assert await no_active_runs(60), "a turn was still running after the test"
    finally:
        app.conf.task_default_queue = stacks.QUEUE


async def rows(conversation: Any) -> list[DisplayMessage]:
    return [
        r
        async for r in DisplayMessage.objects.filter(
            conversation=conversation
        ).order_by("id")
    ]


async def state_roles(conversation: Any) -> list[str]:
    state = await AgentState.objects.aget(conversation=conversation)
    return [m["role"] for m in state.state_data["state"]["messages"]]


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


async def wait_for(condition: Any, timeout: float = 20) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)


async def next_message_works(scope: Any, conversation: Any, site: Site) -> None:
    site.llm.script(reply("Still here."))
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "still there?")
    finished = await follower.until("run_finished", timeout=30)
    assert finished["data"]["status"] == "completed"
    assert (await rows(conversation))[-1].content["text"] == "Still here."


async def test_a_worker_killed_mid_stream_is_taken_over_with_nothing_lost_or_doubled(
    site: Site,
) -> None:
    site.llm.script(reply(TEXT, chunks=40, delay=0.1), reply(TEXT, chunks=4))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    submission = await agent_server.aadd_message(scope, conversation.pk, "talk")
    # A freshly started worker's first turn, on a loaded CI machine: seen to take
    # over 30 s to stream (litellm's import and the heap's settling beside it).
    await follower.until("llm_deltas", timeout=120)
    first = await site.holder(submission.run_id)

    first.kill()
    finished = await follower.until("run_finished", timeout=60)

    assert finished["data"]["status"] == "completed"
    run = await AgentRun.objects.aget(pk=submission.run_id)
    assert run.attempts == 2
    assert int(run.lease_owner.split(":")[1]) != first.pid
    shown = await rows(conversation)
    assert [(r.message_type, r.content_type) for r in shown] == [
        ("user", "text"),
        ("assistant", "text"),
    ]
    assert shown[1].content["text"] == TEXT
    assert await state_roles(conversation) == ["user", "assistant"]
    assert len(site.llm.requests) == 2  # the cut-off reply was asked for again
    attempts = [
        e["data"]["attempt"] for e in follower.events if e["event"] == "run_started"
    ]
    assert attempts == [1, 2]
    assert not await AgentStep.objects.filter(run=run).aexists()  # folded
    await next_message_works(scope, conversation, site)


async def test_a_worker_killed_mid_tool_never_runs_a_finished_or_unsafe_call_twice(
    site: Site, tmp_path: Path
) -> None:
    slow, quick, safe = tmp_path / "slow", tmp_path / "quick", tmp_path / "safe"
    site.llm.script(
        reply(
            tool_calls=[
                tool_call("note", {"path": str(slow), "seconds": 30}),
                tool_call("note", {"path": str(quick)}),
                tool_call("read_note", {"path": str(safe), "seconds": 2}),
            ]
        ),
        reply("Done."),
    )
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    submission = await agent_server.aadd_message(scope, conversation.pk, "note it")
    first = await site.holder(submission.run_id)
    await wait_for(lambda: lines(slow) == lines(quick) == lines(safe) == 1)
    journal = ToolCallRecord.objects.filter(run_id=submission.run_id)
    async with asyncio.timeout(20):  # the quick call's result is in the journal
        while not await journal.filter(status="completed").aexists():
            await asyncio.sleep(0.02)

    first.kill()
    finished = await follower.until("run_finished", timeout=60)

    assert finished["data"]["status"] == "completed"
    assert (lines(slow), lines(quick), lines(safe)) == (1, 1, 2)
    records = {
        r.name + ":" + str(r.result["content"])[:12]: r.status
        async for r in ToolCallRecord.objects.filter(run_id=submission.run_id)
    }
    assert sorted(records.values()) == ["completed", "completed", "lost"]
    # The model read a result for every call: the journal's, or that one was lost.
    results = [m for m in site.llm.requests[1].messages if m["role"] == "tool"]
    assert len(results) == 3
    assert LOST_TEXT.format(name="note")[:40] in results[0]["content"]
    assert results[1]["content"] == f"noted in {quick}"
    shown = await rows(conversation)
    kinds = [(r.message_type, r.content_type) for r in shown]
    assert kinds.count(("assistant", "tool_call")) == 3
    assert kinds.count(("tool", "tool_result")) == 3
    assert kinds[-1] == ("assistant", "text") and shown[-1].content["text"] == "Done."
    assert await state_roles(conversation) == ["user", "assistant", "tool", "assistant"]
    await next_message_works(scope, conversation, site)


async def test_a_turn_that_kills_every_worker_ends_as_an_error_after_three_attempts(
    site: Site,
) -> None:
    site.llm.script(reply(tool_calls=[tool_call("crash", {})]))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    stop = threading.Event()

    def supervise() -> None:  # restarts the workers the turn kills, as systemd would
        while not stop.is_set():
            for worker in site.workers:
                if not worker.alive():
                    worker.start()
            stop.wait(0.2)

    supervisor = threading.Thread(target=supervise, daemon=True)
    supervisor.start()
    try:
        submission = await agent_server.aadd_message(scope, conversation.pk, "crash")
        finished = await follower.until("run_finished", timeout=120)
    finally:
        stop.set()
        await asyncio.to_thread(supervisor.join, 30)

    assert finished["data"]["status"] == "error"
    assert "stopped 3 times" in finished["data"]["error"]
    run = await AgentRun.objects.aget(pk=submission.run_id)
    assert (run.status, run.attempts) == ("error", 3)
    assert "stopped 3 times" in run.error
    shown = await rows(conversation)
    assert shown[-1].content["error_type"] == "worker_lost"
    assert len(site.llm.requests) == 1  # takeovers went on from the checkpoint
    # The state kept the call, answered, so the history stays well-formed.
    assert await state_roles(conversation) == ["user", "assistant", "tool"]
    for worker in site.workers:
        if not worker.alive():
            await asyncio.to_thread(worker.start)
    await next_message_works(scope, conversation, site)


async def test_a_task_delivered_several_times_at_once_runs_the_turn_once(
    site: Site,
) -> None:
    from sagents_django.tasks import run_agent_turn

    site.llm.script(reply(TEXT, chunks=30, delay=0.1))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    submission = await agent_server.aadd_message(scope, conversation.pk, "talk")
    for _ in range(3):
        await sync_to_async(run_agent_turn.delay)(submission.run_id)

    finished = await follower.until("run_finished", timeout=60)

    assert finished["data"]["status"] == "completed"
    run = await AgentRun.objects.aget(pk=submission.run_id)
    assert run.attempts == 1
    assert len(site.llm.requests) == 1
    shown = await rows(conversation)
    assert [r.message_type for r in shown] == ["user", "assistant"]


async def test_a_worker_stopped_for_a_deploy_hands_its_turn_over_at_once(
    site: Site,
) -> None:
    site.llm.script(reply(TEXT, chunks=40, delay=0.1), reply(TEXT, chunks=4))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    submission = await agent_server.aadd_message(scope, conversation.pk, "talk")
    await follower.until("llm_deltas")
    first = await site.holder(submission.run_id)
    loop = asyncio.get_running_loop()

    first.sigterm()
    started = loop.time()
    await follower.until("run_started", timeout=30)
    handed_over_in = loop.time() - started
    finished = await follower.until("run_finished", timeout=60)

    assert finished["data"]["status"] == "completed"
    # Not after the lease expired: the drained worker gave the run back.
    assert handed_over_in < FAST["LEASE_SECONDS"]
    run = await AgentRun.objects.aget(pk=submission.run_id)
    assert run.attempts == 1  # a handover is not a failed attempt
    assert int(run.lease_owner.split(":")[1]) != first.pid
    shown = await rows(conversation)
    assert [r.message_type for r in shown] == ["user", "assistant"]
    assert shown[1].content["text"] == TEXT
    assert await asyncio.to_thread(first.process.wait, 30) is not None  # type: ignore[union-attr]


@pytest.fixture
def reconnecting() -> Iterator[None]:
    """This thread's connection is killed too: the test database's flush after the
    test needs a live one."""
    yield
    if not connection.is_usable():
        connection.close()


async def test_database_connections_killed_mid_turn_are_replaced_and_the_turn_ends(
    site: Site, tmp_path: Path, reconnecting: None
) -> None:
    site.llm.script(
        reply(
            tool_calls=[tool_call("note", {"path": str(tmp_path / "n"), "seconds": 1})]
        ),
        reply(TEXT, chunks=20, delay=0.1),
    )
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    submission = await agent_server.aadd_message(scope, conversation.pk, "note it")
    await follower.until("llm_deltas")

    def terminate_others() -> int:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            return int(cursor.fetchone()[0])

    assert await sync_to_async(terminate_others)() > 0
    finished = await follower.until("run_finished", timeout=60)

    assert finished["data"]["status"] == "completed"
    run = await AgentRun.objects.aget(pk=submission.run_id)
    assert run.status == "completed"
    shown = await rows(conversation)
    assert [(r.message_type, r.content_type) for r in shown] == [
        ("user", "text"),
        ("assistant", "tool_call"),
        ("tool", "tool_result"),
        ("assistant", "text"),
    ]
    assert shown[-1].content["text"] == TEXT
    await next_message_works(scope, conversation, site)


@pytest.fixture(scope="module")
def daphnes(
    workers: list[stacks.Worker], production_llm: FakeOpenAIServer
) -> Iterator[list[Daphne]]:
    env = stacks.process_env(production_llm, QUEUE, FAST)
    pair = [Daphne(env) for _ in range(2)]
    try:
        yield pair
    finally:
        for daphne in pair:
            daphne.stop()


def signed_in() -> tuple[str, str]:
    """A user's session cookie and a conversation of theirs."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from sagents_django import services
    from sagents_django.scope import Scope

    user = get_user_model().objects.create_user(username="walker")
    conversation = services.create_conversation(Scope.for_user(user))
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value, str(conversation.pk)


class Client:
    """A JSON-socket client that shows what a chat client would: the text streamed
    since the run (re)started, and the messages saved."""

    def __init__(self, socket: Any) -> None:
        self.socket = socket
        self.text = ""
        self.saved: list[dict[str, Any]] = []
        self.attempts: list[int] = []

    async def until_finished(self, timeout: float = 60) -> dict[str, Any]:
        import json

        async with asyncio.timeout(timeout):
            async for raw in self.socket:
                frame = json.loads(raw)
                event, data = frame.get("event"), frame.get("data") or {}
                if event == "run_started":
                    self.text = ""  # a takeover streams the reply again
                    self.attempts.append(data["attempt"])
                elif event == "llm_deltas" and "subagent" not in frame:
                    self.text += "".join(d.get("content") or "" for d in data["deltas"])
                elif event == "display_message_saved":
                    self.saved.append(data["display_message"])
                elif event == "run_finished":
                    return data
        raise AssertionError("the socket closed before the run finished")


async def test_a_client_on_one_daphne_sees_a_turn_another_worker_finished_once(
    site: Site, daphnes: list[Daphne]
) -> None:
    import json

    import websockets

    site.llm.script(reply(TEXT, chunks=40, delay=0.1), reply(TEXT, chunks=4))
    session, conversation = await sync_to_async(signed_in)()
    a, b = daphnes
    headers = {"Cookie": f"sessionid={session}"}

    async with (
        websockets.connect(
            a.socket_url,
            origin=f"http://127.0.0.1:{a.port}",
            additional_headers=headers,
        ) as on_a,
        websockets.connect(
            b.socket_url,
            origin=f"http://127.0.0.1:{b.port}",
            additional_headers=headers,
        ) as on_b,
    ):
        watcher = Client(on_a)
        frame = {"action": "subscribe", "id": "s", "conversation": conversation}
        await on_a.send(json.dumps(frame))
        assert json.loads(await on_a.recv())["ok"] is True
        send = {"action": "send", "id": "m", "conversation": conversation}
        await on_b.send(json.dumps({**send, "text": "talk"}))  # sent through B
        answer = json.loads(await on_b.recv())
        assert answer["ok"] is True, answer
        run_id = answer["run_id"]
        first = await site.holder(run_id)
        await wait_for(lambda: len(site.llm.requests) == 1)
        await asyncio.sleep(0.5)  # mid-stream

        first.kill()
        finished = await watcher.until_finished()

    assert finished["status"] == "completed"
    assert watcher.text == TEXT  # the whole reply, once
    assert watcher.attempts == [1, 2]
    replies = [m for m in watcher.saved if m["message_type"] == "assistant"]
    assert len(replies) == 1 and replies[0]["content"]["text"] == TEXT
    stored = await rows(conversation)
    assert [r.message_type for r in stored] == ["user", "assistant"]


@pytest.fixture(scope="module")
def private_redis() -> Iterator[PrivateRedis]:
    server = PrivateRedis().start()
    try:
        yield server
    finally:
        server.stop()


async def test_the_channel_layer_restarted_mid_turn_loses_nothing_stored(
    site: Site, private_redis: PrivateRedis, settings: Any
) -> None:
    """Redis under the channel layer goes away mid-stream and comes back: the turn
    still ends, the database holds the reply once, and the next turn streams."""
    layered = [
        stacks.Worker(
            site.llm, queue=QUEUE, overrides=FAST, env={"REDIS_URL": private_redis.url}
        )
    ]
    for worker in site.workers:  # only workers on the private layer take this turn
        await asyncio.to_thread(worker.stop)
    for worker in layered:
        await asyncio.to_thread(worker.start)
    settings.CHANNEL_LAYERS = {
        "default": {
            **stacks.redis_layer(),
            "CONFIG": {"hosts": [private_redis.url], "prefix": stacks.PREFIX},
        }
    }
    try:
        site.llm.script(reply(TEXT, chunks=40, delay=0.1))
        scope, conversation = await new_conversation()
        submission = await agent_server.aadd_message(scope, conversation.pk, "talk")
        await wait_for(lambda: len(site.llm.requests) == 1)
        await asyncio.sleep(0.5)  # mid-stream

        await asyncio.to_thread(private_redis.stop)
        await asyncio.sleep(1)
        await asyncio.to_thread(private_redis.start)
        run = await AgentRun.objects.aget(pk=submission.run_id)
        async with asyncio.timeout(60):
            while run.status not in ("completed", "error", "cancelled"):
                await asyncio.sleep(0.1)
                await run.arefresh_from_db()

        assert run.status == "completed"
        shown = await rows(conversation)
        assert [r.message_type for r in shown] == ["user", "assistant"]
        assert shown[1].content["text"] == TEXT
        await stacks.layer_works_again()
        await next_message_works(scope, conversation, site)
    finally:
        for worker in layered:
            await asyncio.to_thread(worker.stop)
            print(worker.output()[-6000:])  # shown when the test fails
            worker.log.unlink(missing_ok=True)
