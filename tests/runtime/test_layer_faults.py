"""The channel layer's Redis going away under turns and events (issue 16, 7 and 8).

A turn must not depend on the layer: one that starts while the layer's Redis is down,
or just after it restarted (its connections are stale), runs to its end on its first
attempt, without waiting for the sweeper. And an event the layer loses must leave a
gap in ``seq`` that a client following docs/protocol.md sees: whether its number
could not be taken (the counter's Redis is down) or its send failed after it was
numbered.

A private ``redis-server`` (``PrivateRedis``) is the layer, so it can be
stopped and restarted; turns run inline, on this process's runtime loop.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from channels.layers import get_channel_layer
from channels_redis.utils import _consistent_hash

from sagents_django.models import AgentRun
from sagents_django.runtime import agent_server, groups, inflight, loop
from sagents_django.runtime.executors import wait_inline
from sagents_django.runtime.publisher import Publisher
from tests.fakes.openai_server import reply
from tests.runtime import stacks
from tests.runtime.follow import EMBEDDED, new_conversation, no_active_runs
from tests.support.processes import PrivateRedis

pytestmark = [
    pytest.mark.django_db(transaction=True),
    # Now and then (1 run in 4) a connection the restarted server reset is dropped
    # without its writer being closed, inside redis-py's handling of "Connection
    # lost"; which client it belongs to is not yet known.
    pytest.mark.filterwarnings("ignore:unclosed <StreamWriter:ResourceWarning"),
]


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    """The layer's Redis. It keeps its data across a restart: one that comes back
    empty resets the counters, which a client sees as ``seq`` going backwards."""
    server = PrivateRedis(tmp_path).start()
    try:
        yield server
    finally:
        server.stop()


def layer_on(*servers: PrivateRedis) -> dict[str, Any]:
    return {
        "default": {
            **stacks.redis_layer(),
            "CONFIG": {"hosts": [s.url for s in servers], "prefix": stacks.PREFIX},
        }
    }


@pytest.fixture
async def layered(private_redis: PrivateRedis, settings: Any, fake_llm: Any) -> Any:
    """The fake provider of a site whose channel layer is ``private_redis``."""
    settings.CHANNEL_LAYERS = layer_on(private_redis)
    settings.SAGENTS = {
        **EMBEDDED,
        "MODEL": fake_llm.model,
        "MODEL_PARAMS": dict(fake_llm.model_params),
    }
    yield fake_llm
    assert await asyncio.to_thread(wait_inline, 30)
    assert await no_active_runs(30), "a turn was still running after the test"
    # Close the layer's connections on both loops: its receive tasks would go on
    # reconnecting to this test's Redis after it stops.
    await get_channel_layer().flush()
    await asyncio.wrap_future(loop.submit(get_channel_layer().flush()))


async def turn(scope: Any, conversation: Any, text: str) -> tuple[Any, AgentRun]:
    """Send ``text``; how its run ended, and the run's row. The timeout is far
    above a turn's (a second or so): reaching it means the turn was stuck."""
    submission = await agent_server.aadd_message(scope, conversation.pk, text)
    outcome = await agent_server.await_run(
        scope, conversation.pk, submission.run_id, timeout=90
    )
    return outcome, await AgentRun.objects.aget(pk=submission.run_id)


async def test_a_turn_sent_after_the_layers_redis_restarted_ends_on_its_first_attempt(
    layered: Any, private_redis: PrivateRedis
) -> None:
    layered.script(reply("First."), reply("Second."))
    scope, conversation = await new_conversation()
    first, _ = await turn(scope, conversation, "one")
    assert first.status == "completed"  # the runtime's layer has connected

    await asyncio.to_thread(private_redis.stop)
    await asyncio.to_thread(private_redis.start)
    outcome, run = await turn(scope, conversation, "two")

    assert (outcome.status, outcome.text) == ("completed", "Second.")
    assert run.attempts == 1  # not taken over by a sweeper


async def test_a_turn_sent_while_the_layers_redis_is_down_ends_on_its_first_attempt(
    layered: Any, private_redis: PrivateRedis
) -> None:
    layered.script(reply("First."), reply("Second."), reply("Third."))
    scope, conversation = await new_conversation()
    first, _ = await turn(scope, conversation, "one")
    assert first.status == "completed"

    await asyncio.to_thread(private_redis.stop)
    try:
        outcome, run = await turn(scope, conversation, "two")
    finally:
        await asyncio.to_thread(private_redis.start)

    assert (outcome.status, outcome.text) == ("completed", "Second.")
    assert run.attempts == 1
    # The layer (its Redis back) serves turns again.
    third, _ = await turn(scope, conversation, "three")
    assert (third.status, third.text) == ("completed", "Third.")


# Every lost event leaves a gap ---------------------------------------------------------
class Subscriber:
    """A socket's view of one conversation's group: the frames that reach it."""

    def __init__(self, conversation_id: str) -> None:
        self.group = groups.conversation_group(conversation_id)
        self.channel = ""
        self.frames: list[dict[str, Any]] = []

    async def join(self) -> Subscriber:
        layer = get_channel_layer()
        self.channel = await layer.new_channel()
        await layer.group_add(self.group, self.channel)
        return self

    async def until(self, name: str, timeout: float = 30) -> bool:
        """Receive frames until ``name``'s; False if it has not come in time."""
        layer = get_channel_layer()
        try:
            async with asyncio.timeout(timeout):
                while not self.frames or self.frames[-1]["data"]["name"] != name:
                    self.frames.append(await layer.receive(self.channel))
        except TimeoutError:
            return False
        return True


async def publish(publisher: Publisher, published: list[str], name: str) -> None:
    # On the runtime loop, as a turn's events are.
    published.append(name)
    await asyncio.wrap_future(loop.submit(publisher.publish("probe", {"name": name})))


async def until_delivered(
    publisher: Publisher, subscriber: Subscriber, published: list[str]
) -> None:
    """Publish probes until one reaches ``subscriber`` (the layer has reconnected
    its subscription to a restarted server)."""
    for n in range(60):
        await publish(publisher, published, f"probe{n}")
        if await subscriber.until(f"probe{n}", timeout=1):
            return
    raise AssertionError("the subscriber never heard from the layer again")


def assert_every_loss_is_a_gap(
    published: list[str], frames: list[dict[str, Any]]
) -> None:
    """Between two frames that arrived one after the other, ``seq`` jumps exactly
    when events published between them did not arrive."""
    order = {name: n for n, name in enumerate(published)}
    arrived = [(order[f["data"]["name"]], f["seq"]) for f in frames]
    assert arrived == sorted(arrived)
    losses = 0
    for (before, seq_before), (after, seq_after) in itertools.pairwise(arrived):
        lost = after - before - 1
        assert (seq_after - seq_before > 1) == (lost > 0), (before, after)
        losses += lost
    assert losses > 0  # something was lost, and it showed


async def test_events_that_could_not_be_numbered_leave_a_gap_in_seq(
    layered: Any, private_redis: PrivateRedis
) -> None:
    cid = str(uuid.uuid4())
    subscriber = await Subscriber(cid).join()
    publisher = Publisher(cid)
    published: list[str] = []
    for name in ("a", "b", "c"):
        await publish(publisher, published, name)
    assert await subscriber.until("c")

    await asyncio.to_thread(private_redis.stop)
    for name in ("d", "e", "f"):
        await publish(publisher, published, name)  # lost: no number can be taken
    await asyncio.to_thread(private_redis.start)
    assert publisher.failed == 3
    await until_delivered(publisher, subscriber, published)
    for name in ("g", "h"):
        await publish(publisher, published, name)
    assert await subscriber.until("h")

    assert_every_loss_is_a_gap(published, subscriber.frames)


async def test_events_lost_last_show_in_the_number_a_resyncing_client_reads(
    layered: Any, private_redis: PrivateRedis
) -> None:
    """A turn's last events lost unnumbered: no later event shows the gap, so the
    number a client reads on resync (``in_flight.seq``) must."""
    cid = str(uuid.uuid4())
    subscriber = await Subscriber(cid).join()
    publisher = Publisher(cid)
    published: list[str] = []
    await publish(publisher, published, "last heard")
    assert await subscriber.until("last heard")
    last_seen = subscriber.frames[-1]["seq"]

    await asyncio.to_thread(private_redis.stop)
    await publish(publisher, published, "run over")  # lost: no number
    await asyncio.to_thread(private_redis.start)

    async with asyncio.timeout(60):
        while (await inflight.read(cid)).seq <= last_seen:
            await asyncio.sleep(0.1)


async def test_a_file_event_published_while_the_layer_is_down_is_counted_not_raised(
    layered: Any, private_redis: PrivateRedis
) -> None:
    publisher = Publisher(str(uuid.uuid4()))
    data = {"path": "/notes.md", "scope": ["user", "1"]}
    await asyncio.to_thread(private_redis.stop)
    try:
        # Raising here would end the turn that wrote the file.
        await asyncio.wrap_future(loop.submit(publisher.publish("file_updated", data)))
    finally:
        await asyncio.to_thread(private_redis.start)
    assert publisher.failed == 2  # the conversation's copy and the files group's


@pytest.fixture
def second_redis() -> Iterator[PrivateRedis]:
    server = PrivateRedis().start()
    try:
        yield server
    finally:
        server.stop()


async def test_events_whose_send_failed_after_numbering_leave_a_gap_in_seq(
    layered: Any,
    private_redis: PrivateRedis,
    second_redis: PrivateRedis,
    settings: Any,
) -> None:
    """A layer sharded over two servers: the counter lives on the first, and the
    conversation's group on the second, which goes away: numbers are taken, the
    sends fail."""
    settings.CHANNEL_LAYERS = layer_on(private_redis, second_redis)
    cid = next(  # a conversation whose group lives on the second server
        c
        for c in (str(uuid.uuid4()) for _ in range(1000))
        if _consistent_hash(
            f"{stacks.PREFIX}__group__{groups.conversation_group(c)}", 2
        )
        == 1
    )
    subscriber = await Subscriber(cid).join()
    publisher = Publisher(cid)
    published: list[str] = []
    for name in ("a", "b", "c"):
        await publish(publisher, published, name)
    assert await subscriber.until("c")

    await asyncio.to_thread(second_redis.stop)
    for name in ("d", "e", "f"):
        await publish(publisher, published, name)  # numbered on the first server
    await asyncio.to_thread(second_redis.start)
    await until_delivered(publisher, subscriber, published)
    for name in ("g", "h"):
        await publish(publisher, published, name)
    assert await subscriber.until("h")

    assert_every_loss_is_a_gap(published, subscriber.frames)
