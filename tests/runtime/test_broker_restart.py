"""The Celery broker's Redis restarted while a worker runs a turn.

A Redis server of this module's own is the broker (restarting the shared one would
break every other test session on the machine); the channel layer stays on the
shared Redis, so only the broker goes away. One real worker (threads pool), set up
by project/settings.py like a site's (``sagents_django.redis_broker``'s transport),
runs the turns; with kombu's own Redis transport it shut down here. Production
stack only: the PostgreSQL pass.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from sagents_django.models import AgentRun, DisplayMessage
from sagents_django.runtime import agent_server
from tests.fakes.openai_server import FakeOpenAIServer, reply
from tests.runtime import stacks
from tests.runtime.follow import EMBEDDED, follow, new_conversation, no_active_runs
from tests.support.processes import PrivateRedis

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        "production" not in stacks.names(),
        reason="a real worker process: the PostgreSQL pass",
    ),
]

QUEUE = f"{stacks.QUEUE}-broker"
TEXT = "One two three four five six seven eight nine ten. " * 4
TRANSPORT = "sagents_django.redis_broker:Transport"


def send_turns_to(url: str, queue: str, transport: str | None = None) -> None:
    """This process's Celery app publishes to ``url``'s ``queue`` from now on (its
    connection and producer pools were made for the broker it had)."""
    from kombu import pools

    from project.celery import app

    # Closed and forgotten: kombu keeps its pools by connection, and a closed one
    # left there is what the next task sent to that broker would get.
    pools.reset()
    app._pool = None
    app.amqp._producer_pool = None
    app.conf.broker_url = url
    app.conf.broker_transport = transport
    app.conf.task_default_queue = queue


@pytest.fixture(scope="module")
def broker() -> Iterator[PrivateRedis]:
    server = PrivateRedis().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def worker(
    django_db_setup: Any,
    django_db_blocker: Any,
    production_llm: FakeOpenAIServer,
    broker: PrivateRedis,
) -> Iterator[stacks.Worker]:
    one = stacks.Worker(
        production_llm,
        concurrency=4,
        queue=QUEUE,
        env={"CELERY_BROKER_URL": broker.url},
    ).start()
    try:
        yield one
    finally:
        one.stop()
        one.log.unlink(missing_ok=True)


@pytest.fixture
async def llm(
    worker: stacks.Worker,
    broker: PrivateRedis,
    production_llm: FakeOpenAIServer,
    settings: Any,
) -> Any:
    production_llm.reset()
    settings.CHANNEL_LAYERS = {"default": stacks.redis_layer()}
    settings.SAGENTS = {**EMBEDDED, **stacks.sagents_overrides(production_llm)}
    # As a web process configured like the worker (project/settings.py) sends them.
    send_turns_to(broker.url, QUEUE, TRANSPORT)
    try:
        yield production_llm
        assert await no_active_runs(60), "a turn was still running after the test"
    finally:
        send_turns_to(stacks.REDIS_URL, stacks.QUEUE)


def answers_ping(worker: stacks.Worker) -> bool:
    """Whether the worker answers a ping over the broker (the only worker on it)."""
    from project.celery import app

    return worker.alive() and bool(app.control.ping(timeout=5))


async def wait_for(condition: Any, timeout: float = 60) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)


async def logged(worker: stacks.Worker, line: str, since: int) -> None:
    """Wait for ``line`` in the worker's log after offset ``since``, or its exit."""
    await wait_for(lambda: line in worker.output()[since:] or not worker.alive())


async def test_a_broker_restarted_mid_turn_leaves_the_worker_running_turns(
    llm: FakeOpenAIServer, worker: stacks.Worker, broker: PrivateRedis
) -> None:
    """The broker's Redis dies while the worker holds the turn's unacknowledged
    task and comes back empty: the turn still ends with its whole reply, and the
    worker answers pings and runs the next turn."""
    llm.script(reply(TEXT, chunks=40, delay=0.1))
    scope, conversation = await new_conversation()
    since = len(worker.output())
    try:
        submission = await agent_server.aadd_message(scope, conversation.pk, "talk")
        await wait_for(lambda: len(llm.requests) == 1)

        await asyncio.to_thread(broker.stop)
        await logged(worker, "Connection to broker lost", since)
        run = await AgentRun.objects.aget(pk=submission.run_id)
        assert run.status == "running"  # the worker holds the turn's unacked task
        await asyncio.to_thread(broker.start)
        async with asyncio.timeout(60):
            while run.status not in ("completed", "error", "cancelled"):
                await asyncio.sleep(0.1)
                await run.arefresh_from_db()

        assert run.status == "completed"
        shown = [
            r
            async for r in DisplayMessage.objects.filter(
                conversation=conversation
            ).order_by("id")
        ]
        assert [r.message_type for r in shown] == ["user", "assistant"]
        assert shown[1].content["text"] == TEXT
        # The task's late ack, on the connection that died, comes after the run
        # ended: the worker must outlive it too.
        await logged(worker, " succeeded in ", since)
        assert await asyncio.to_thread(answers_ping, worker)

        llm.script(reply("Still here."))
        follower = await follow(scope, conversation.pk)
        await agent_server.aadd_message(scope, conversation.pk, "still there?")
        finished = await follower.until("run_finished", timeout=60)
        assert finished["data"]["status"] == "completed"
        assert worker.alive()
    finally:
        print(worker.output()[since:])  # shown when the test fails
