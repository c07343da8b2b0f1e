"""The publisher's throttle: the first token at once, then one batch per window."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from channels.layers import get_channel_layer

from sagents_django.runtime import groups
from sagents_django.runtime.publisher import Publisher


@pytest.fixture
async def subscriber(settings: Any) -> Any:
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}
    }
    conversation = uuid.uuid4()
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(groups.conversation_group(conversation), channel)
    return conversation, layer, channel


def text(message: dict[str, Any]) -> str:
    return "".join(d.get("content", "") for d in message["data"]["deltas"])


async def test_the_first_delta_goes_at_once_and_the_rest_wait_for_the_window(
    subscriber: Any,
) -> None:
    conversation, layer, channel = subscriber
    publisher = Publisher(conversation, window=0.3)

    publisher.add_deltas([{"content": "Hel"}])
    first = await asyncio.wait_for(layer.receive(channel), 0.2)  # before the window
    publisher.add_deltas([{"content": "lo "}])
    publisher.add_deltas([{"content": "there"}])
    loop = asyncio.get_running_loop()
    sent = loop.time()
    second = await asyncio.wait_for(layer.receive(channel), 2)

    assert text(first) == "Hel"
    assert text(second) == "lo there"  # one batch, merged
    assert second["data"]["deltas"] == [{"content": "lo there"}]
    assert loop.time() - sent > 0.1  # it waited for the window
    assert second["seq"] == first["seq"] + 1


async def test_other_events_flush_deltas_first_and_sub_agents_keep_their_tags(
    subscriber: Any,
) -> None:
    conversation, layer, channel = subscriber
    publisher = Publisher(conversation, window=5)
    helper = {"name": "researcher", "task_call_id": "call_1"}

    publisher.add_deltas([{"content": "a"}])  # at once
    await layer.receive(channel)
    publisher.add_deltas([{"content": "b"}])
    publisher.add_deltas([{"content": "c"}], subagent=helper)
    publisher.add_deltas([{"content": "d"}])
    await publisher.publish("llm_message", {"message": {}})
    frames = [await asyncio.wait_for(layer.receive(channel), 1) for _ in range(4)]
    await publisher.aclose()

    assert [(f["event"], f.get("subagent")) for f in frames] == [
        ("llm_deltas", None),
        ("llm_deltas", helper),
        ("llm_deltas", None),
        ("llm_message", None),
    ]
    assert [text(f) for f in frames[:3]] == ["b", "c", "d"]
