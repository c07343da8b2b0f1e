"""The in-flight buffer: a conversation's event numbers and the reply streamed so far,
in this process's memory (beside the in-memory layer) and in Redis (beside a Redis
layer). Events are numbered on the runtime loop, as turns publish them."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from sagents_django.runtime import groups, inflight, layer, loop
from sagents_django.runtime.publisher import Publisher, event_message, publish
from tests.runtime import stacks

TOOL = {"name": "helper", "task_call_id": "call_9"}


@pytest.fixture(params=["memory", "redis"])
def backend(request: Any, settings: Any) -> str:
    if request.param == "redis":
        settings.CHANNEL_LAYERS = {"default": stacks.redis_layer()}
    else:
        settings.CHANNEL_LAYERS = {
            "default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}
        }
    return str(request.param)


async def stamp(cid: str, event: str, data: dict[str, Any], **kw: Any) -> int:
    """``inflight.stamp`` where publishers call it: on the runtime loop."""
    return await asyncio.wrap_future(
        loop.submit(inflight.stamp(cid, event, data, **kw))
    )


def deltas(*texts: str) -> dict[str, Any]:
    return {"deltas": [{"content": text} for text in texts]}


def row(message_type: str) -> dict[str, Any]:
    return {"display_message": {"id": "1", "message_type": message_type}}


def test_each_event_says_what_it_does_to_the_buffer() -> None:
    assert inflight.operation("llm_deltas", deltas("a"), None) == "append"
    assert inflight.operation("llm_deltas", {"deltas": []}, None) == "count"
    assert inflight.operation("llm_deltas", deltas("a"), TOOL) == "count"
    assert inflight.operation("llm_message", {}, None) == "end_message"
    assert inflight.operation("llm_message", {}, TOOL) == "count"
    assert inflight.operation("display_message_saved", row("assistant"), None) == (
        "end_message"
    )
    assert inflight.operation("display_message_saved", row("user"), None) == "count"
    assert inflight.operation("run_started", {"run_id": "r"}, None) == "start_run"
    assert inflight.operation("run_finished", {"run_id": "r"}, None) == "end_run"
    assert inflight.operation("status_changed", {}, None) == "count"


def test_batches_fold_into_text_thinking_and_tool_calls_by_index() -> None:
    text, thinking, calls = inflight.fold(
        [
            [{"thinking": "Hm"}, {"content": "Let me "}],
            [{"thinking": "m."}, {"content": "look."}],
            [{"tool_calls": [{"index": 1, "call_id": "b", "name": "ls"}]}],
            [{"tool_calls": [{"index": 0, "call_id": "a", "name": "grep"}]}],
            [{"tool_calls": [{"index": 0, "arguments": '{"q": '}]}],
            [{"tool_calls": [{"index": 0, "arguments": '"x"}'}]}, {"status": "x"}],
        ]
    )

    assert (text, thinking) == ("Let me look.", "Hmm.")
    assert calls == [
        {"index": 0, "call_id": "a", "name": "grep", "arguments": '{"q": "x"}'},
        {"index": 1, "call_id": "b", "name": "ls", "arguments": ""},
    ]


async def test_a_message_streams_into_the_buffer_and_empties_when_complete(
    backend: str,
) -> None:
    cid = str(uuid.uuid4())
    assert await inflight.read(cid) == inflight.InFlight(seq=0)

    started = await stamp(cid, "run_started", {"run_id": "run-1"})
    await stamp(cid, "status_changed", {"status": "running"})
    await stamp(cid, "llm_deltas", deltas("Hel", "lo"))
    await stamp(cid, "llm_deltas", deltas("sub"), subagent=TOOL)
    last = await stamp(cid, "llm_deltas", {"deltas": [{"thinking": "t"}]})
    mid = await inflight.read(cid)
    await stamp(cid, "display_message_saved", row("assistant"))
    after_row = await inflight.read(cid)
    await stamp(cid, "llm_deltas", deltas("Next"))
    await stamp(cid, "llm_message", {"message": {}})
    after_message = await inflight.read(cid)
    await stamp(cid, "run_finished", {"run_id": "run-1"})
    finished = await inflight.read(cid)

    assert started == 1 and last == 5  # one count for every event, tagged or not
    assert mid == inflight.InFlight(seq=5, run_id="run-1", text="Hello", thinking="t")
    assert after_row == inflight.InFlight(seq=6, run_id="run-1")
    assert after_message == inflight.InFlight(seq=8, run_id="run-1")
    assert finished == inflight.InFlight(seq=9)


async def test_a_run_started_again_after_a_crash_restarts_the_buffer_empty(
    backend: str,
) -> None:
    cid = str(uuid.uuid4())
    await stamp(cid, "run_started", {"run_id": "run-1"})
    await stamp(cid, "llm_deltas", deltas("Half a rep"))
    # The worker died mid-stream; another takes the run over and streams again.
    await stamp(cid, "status_changed", {"status": "running"})
    await stamp(cid, "run_started", {"run_id": "run-1"})
    await stamp(cid, "llm_deltas", deltas("Half"))

    assert await inflight.read(cid) == inflight.InFlight(
        seq=5, run_id="run-1", text="Half"
    )


async def test_an_abandoned_buffer_expires_but_the_count_goes_on(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Redis expiries are whole seconds.
    monkeypatch.setattr(inflight, "INFLIGHT_TTL", 1)
    cid = str(uuid.uuid4())
    await stamp(cid, "run_started", {"run_id": "run-1"})
    await stamp(cid, "llm_deltas", deltas("Nobody finishes this"))
    assert (await inflight.read(cid)).text == "Nobody finishes this"

    await asyncio.sleep(1.3)

    assert await inflight.read(cid) == inflight.InFlight(seq=2)
    assert await stamp(cid, "status_changed", {}) == 3


async def test_redis_keys_expire_and_share_the_layers_counter(
    settings: Any,
) -> None:
    settings.CHANNEL_LAYERS = {"default": stacks.redis_layer()}
    cid = str(uuid.uuid4())
    # The counter the rest of the runtime uses.
    await asyncio.wrap_future(loop.submit(layer.next_seq(cid)))
    await stamp(cid, "run_started", {"run_id": "r"})
    seq = await stamp(cid, "llm_deltas", deltas("x"))

    client = layer.sync_redis_client(stacks.REDIS_URL)
    ttls = [
        client.ttl(key.format(cid))
        for key in (layer.SEQ_KEY, inflight.RUN_KEY, inflight.DELTAS_KEY)
    ]
    assert seq == 3
    assert 0 < ttls[0] <= layer.SEQ_TTL
    assert 0 < ttls[1] <= inflight.INFLIGHT_TTL
    assert 0 < ttls[2] <= inflight.INFLIGHT_TTL


async def test_the_buffer_holds_each_batch_before_the_batch_is_sent(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the event is numbered, then sent (every layer but the Pub/Sub one on
    one Redis, whose script does both in one step: the next test)."""
    monkeypatch.setattr(layer, "pubsub_frame", lambda group, message: None)
    cid = str(uuid.uuid4())
    seen: list[tuple[int, str, int]] = []
    send = layer.group_send

    async def watching(group: str, message: dict[str, Any]) -> None:
        if message["event"] == "llm_deltas":
            now = await inflight.read(cid)
            seen.append((message["seq"], now.text, now.seq))
        await send(group, message)

    monkeypatch.setattr(layer, "group_send", watching)

    async def turn() -> None:
        publisher = Publisher(cid, window=0.01)
        await publish(cid, "run_started", {"run_id": "r"})
        for word in ("one ", "two ", "three "):
            publisher.add_deltas([{"content": word}])
            await asyncio.sleep(0.03)
        await publisher.aclose()

    await asyncio.wrap_future(loop.submit(turn()))

    # Each batch was in the buffer when it was sent: the text so far, ending with
    # the batch (a loaded machine may put two words in one batch).
    texts = [text for _, text, _ in seen]
    assert texts[-1] == "one two three "
    assert set(texts) <= {"one ", "one two ", "one two three "}
    assert texts == sorted(texts, key=len) and len(set(texts)) == len(texts)
    assert all(seq == buffered for seq, _, buffered in seen)


async def test_a_subclass_of_a_channels_redis_layer_keeps_the_buffer_in_redis(
    settings: Any,
) -> None:
    settings.CHANNEL_LAYERS = {
        "default": {
            **stacks.redis_layer(),
            "BACKEND": "tests.runtime.dropping.DroppingRedisPubSubChannelLayer",
        }
    }
    cid = str(uuid.uuid4())
    await stamp(cid, "run_started", {"run_id": "r"})

    assert layer.redis_url() == stacks.REDIS_URL
    client = layer.sync_redis_client(stacks.REDIS_URL)
    assert client.get(inflight.RUN_KEY.format(cid)) == b"r"


@pytest.fixture
async def pubsub(settings: Any) -> Any:
    """A listener on a conversation's group of the Pub/Sub layer, on this loop."""
    from channels.layers import get_channel_layer

    settings.CHANNEL_LAYERS = {
        "default": {
            **stacks.redis_layer(),
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        }
    }
    cid = str(uuid.uuid4())
    channels = get_channel_layer()
    channel = await channels.new_channel()
    await channels.group_add(groups.conversation_group(cid), channel)
    yield cid, channels, channel
    await channels.flush()
    await asyncio.wrap_future(loop.submit(get_channel_layer().flush()))


STRANGE = {
    "text": "naïve ☃ \u0000 \xcf\xff",
    "none": None,
    "float": 1.5,
    "big": 2**63 + 5,
    "negative": -7,
    "empty": {},
    "list": [[], [None, True, False]],
    "placeholder_like": layer.SEQ_PLACEHOLDER - 1,
}


async def test_beside_the_pubsub_layer_one_script_numbers_buffers_and_publishes(
    pubsub: Any,
) -> None:
    cid, channels, channel = pubsub
    events = [
        ("run_started", {"run_id": "r"}, None),
        ("llm_deltas", deltas("one "), None),
        ("llm_deltas", deltas("two"), TOOL),
        ("status_changed", STRANGE, None),
        ("llm_deltas", deltas("three"), None),
    ]
    assert layer.pubsub_frame("g", {"seq": layer.SEQ_PLACEHOLDER}) is not None

    seqs = [
        await asyncio.wrap_future(
            loop.submit(publish(cid, event, data, subagent=subagent))
        )
        for event, data, subagent in events
    ]
    received = [await asyncio.wait_for(channels.receive(channel), 5) for _ in events]

    assert seqs == list(range(seqs[0], seqs[0] + len(events)))
    assert received == [
        event_message(cid, event, data, seq, subagent)
        for (event, data, subagent), seq in zip(events, seqs, strict=True)
    ]
    now = await inflight.read(cid)
    assert (now.seq, now.run_id, now.text) == (seqs[-1], "r", "one three")


async def test_a_frame_goes_to_the_channel_the_layer_names_for_its_group(
    pubsub: Any,
) -> None:
    """The runtime names the group's channel as channels_redis does (a private
    method of the pinned version: an upgrade that renames channels fails here)."""
    _, channels, _ = pubsub
    group = groups.conversation_group(uuid.uuid4())
    frame = layer.pubsub_frame(group, {"seq": layer.SEQ_PLACEHOLDER})

    assert frame is not None
    assert frame.channel == channels._get_group_channel_name(group)


async def test_a_frame_whose_data_holds_the_placeholder_is_numbered_then_sent(
    pubsub: Any,
) -> None:
    cid, channels, channel = pubsub
    data = {"n": layer.SEQ_PLACEHOLDER}
    message = event_message(cid, "status_changed", data, layer.SEQ_PLACEHOLDER)
    assert layer.pubsub_frame(groups.conversation_group(cid), message) is None

    seq = await asyncio.wrap_future(loop.submit(publish(cid, "status_changed", data)))

    received = await asyncio.wait_for(channels.receive(channel), 5)
    assert received == event_message(cid, "status_changed", data, seq)


@pytest.mark.parametrize(
    "layer_settings",
    [
        {"BACKEND": "tests.runtime.dropping.DroppingRedisPubSubChannelLayer"},
        {"BACKEND": "channels_redis.core.RedisChannelLayer"},
        {"CONFIG": {"hosts": [stacks.REDIS_URL, stacks.REDIS_URL]}},
        {"CONFIG": {"hosts": [stacks.REDIS_URL], "serializer_format": "json"}},
        {
            "CONFIG": {
                "hosts": [stacks.REDIS_URL],
                "symmetric_encryption_keys": ["secret"],
            }
        },
    ],
    ids=["subclass-sending-itself", "list-layer", "two-hosts", "json", "encrypted"],
)
def test_other_layers_send_their_frames_themselves(
    settings: Any, layer_settings: dict[str, Any]
) -> None:
    settings.CHANNEL_LAYERS = {
        "default": {
            **stacks.redis_layer(),
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            **layer_settings,
        }
    }
    message = event_message("c", "status_changed", {}, layer.SEQ_PLACEHOLDER)

    assert layer.pubsub_frame("g", message) is None
