"""The viewer registry beside a Redis channel layer: shared, expiring entries.

Needs the Redis the development machines run (127.0.0.1:6379, or REDIS_URL): without
it these tests fail, they never skip. The embedded (in-memory) registry is tested
through the socket in test_socket.py."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sagents_django.runtime import viewers

REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"


@pytest.fixture
async def redis_layer(settings: Any) -> AsyncIterator[str]:
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
    cid = str(uuid.uuid4())
    yield cid
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    client.delete(viewers.VIEWERS_KEY.format(cid), viewers.ACTIVITY_KEY.format(cid))
    client.close()


async def test_redis_viewers_are_shared_expire_and_record_activity(
    redis_layer: str,
) -> None:
    cid = redis_layer
    stale = time.time() - viewers.VIEWER_TTL - 1
    await sync_to_async(viewers.add)(cid, "specific.crashed!1", now=stale)
    await viewers.aadd(cid, "specific.a!1")
    await sync_to_async(viewers.add)(cid, "specific.b!1")

    counted = (await viewers.acount(cid), await sync_to_async(viewers.count)(cid))
    left = await viewers.aremove(cid, "specific.a!1")
    again = await sync_to_async(viewers.remove)(cid, "specific.a!1")
    last = await viewers.alast_activity(cid)

    assert counted == (2, 2)  # the crashed daphne's entry does not count
    assert (left, again) == (1, 1)
    assert last is not None and abs(last.timestamp() - time.time()) < 60
    assert await sync_to_async(viewers.last_activity)(cid) == last


async def test_a_refresh_keeps_a_redis_viewer_alive(redis_layer: str) -> None:
    cid = redis_layer
    await sync_to_async(viewers.add)(
        cid, "specific.old!1", now=time.time() - viewers.VIEWER_TTL + 1
    )

    await viewers.arefresh([cid], "specific.old!1")
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    expires = client.zscore(viewers.VIEWERS_KEY.format(cid), "specific.old!1")
    client.close()

    assert expires is not None and expires > time.time() + viewers.VIEWER_TTL - 5
