"""The channel layer as the runtime uses it, from any event loop.

Turns run on the runtime's own loop (``runtime.loop``), while sockets listen on the
server's (daphne's). A Redis layer keeps connections per loop, so any loop may send.
The in-memory layer of the embedded default is one process's queues, which are not
thread-safe: its sends must run on the loop its subscribers use. So the first loop
that subscribes is remembered as the layer's home, and sends from another loop hop
there. Without Channels installed, or with no layer configured, nothing is sent.

Sequence numbers: every event of a conversation carries the next number of a counter
shared by every process that publishes (Redis ``INCR`` beside a Redis layer, a
process counter beside the in-memory one, whose subscribers all live in this
process). A conversation's own events are numbered by ``inflight.stamp`` (the
same Redis key; in memory, counters of its own) together with the text its running
turn has streamed. A client that sees a gap re-reads the database.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import threading
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

logger = logging.getLogger(__name__)

SEQ_KEY = "sagents:seq:{}"
SEQ_TTL = 7 * 24 * 3600
"""An idle conversation's counter expires after a week (a client then resyncs)."""

HOP_TIMEOUT = 5.0
"""Seconds a send waits for the in-memory layer's home loop."""

_home: dict[int, asyncio.AbstractEventLoop] = {}
_counters: defaultdict[str, Iterator[int]] = defaultdict(lambda: itertools.count(1))
_lock = threading.Lock()
_redis_clients: dict[asyncio.AbstractEventLoop, Any] = {}
_sync_clients: dict[str, Any] = {}


def get_layer() -> Any:
    """The default channel layer, or None (Channels absent or not configured)."""
    try:
        from channels.layers import get_channel_layer
    except ImportError:
        return None
    return get_channel_layer()


def is_in_memory(layer: Any) -> bool:
    try:
        from channels.layers import InMemoryChannelLayer
    except ImportError:
        return False
    return isinstance(layer, InMemoryChannelLayer)


def redis_url() -> str | None:
    """The first Redis host of the default layer when it is a channels_redis one
    (``RedisChannelLayer`` or ``RedisPubSubChannelLayer``, or a subclass), as a URL;
    else None.

    Read from the ``CHANNEL_LAYERS`` setting, which both layers take the same way
    (channels_redis' default host when none is given)."""
    from django.conf import settings

    config = getattr(settings, "CHANNEL_LAYERS", {}).get("default", {})
    if not _is_redis_backend(str(config.get("BACKEND", ""))):
        return None
    hosts = (config.get("CONFIG") or {}).get("hosts") or [("localhost", 6379)]
    host = hosts[0]
    if isinstance(host, dict):
        host = host.get("address")
    if isinstance(host, list | tuple) and len(host) == 2:
        return f"redis://{host[0]}:{host[1]}"
    return host if isinstance(host, str) else None


@functools.lru_cache(maxsize=16)
def _is_redis_backend(path: str) -> bool:
    if path.startswith("channels_redis."):
        return True
    from django.utils.module_loading import import_string

    try:
        backend = import_string(path)
    except ImportError:
        return False
    return any(
        getattr(cls, "__module__", "").startswith("channels_redis.")
        for cls in getattr(backend, "__mro__", ())
    )


def _home_loop(layer: Any) -> asyncio.AbstractEventLoop | None:
    loop = _home.get(id(layer))
    if loop is not None and loop.is_closed():
        _home.pop(id(layer), None)
        return None
    return loop


async def _on_home(layer: Any, coroutine: Any) -> Any:
    """Run ``coroutine`` on the in-memory layer's home loop (here if it is this one)."""
    home = _home_loop(layer) if is_in_memory(layer) else None
    running = asyncio.get_running_loop()
    if home is None or home is running:
        return await coroutine
    future = asyncio.run_coroutine_threadsafe(coroutine, home)
    try:
        # A home loop that stopped running (its server is shutting down) must not
        # hold a turn: the send is given up, as a full channel's would be.
        return await asyncio.wait_for(asyncio.wrap_future(future), HOP_TIMEOUT)
    except TimeoutError:
        future.cancel()
        raise


async def group_add(group: str, channel: str) -> None:
    layer = get_layer()
    if layer is None:
        return
    if is_in_memory(layer) and _home_loop(layer) is None:
        _home[id(layer)] = asyncio.get_running_loop()
    await _on_home(layer, layer.group_add(group, channel))


async def group_discard(group: str, channel: str) -> None:
    layer = get_layer()
    if layer is not None:
        await _on_home(layer, layer.group_discard(group, channel))


async def group_send(group: str, message: dict[str, Any]) -> None:
    """Send to a group; a full channel drops the message (at most once, as the
    layer does), and a layer that cannot be reached is logged, never raised into a
    turn (the database stays the truth)."""
    layer = get_layer()
    if layer is None:
        return
    try:
        await _on_home(layer, layer.group_send(group, message))
    except Exception:
        logger.exception("Could not publish to %s", group)


async def next_seq(conversation_id: str) -> int:
    """The next sequence number of ``conversation_id``'s events."""
    layer = get_layer()
    url = redis_url() if layer is not None else None
    if url is None:
        with _lock:
            return next(_counters[conversation_id])
    client = redis_client(url)
    key = SEQ_KEY.format(conversation_id)
    async with client.pipeline(transaction=False) as pipe:
        pipe.incr(key)
        pipe.expire(key, SEQ_TTL)
        value, _ = await pipe.execute()
    return int(value)


def redis_client(url: str) -> Any:
    """One client per loop (redis.asyncio connections belong to the loop that made
    them); dropped when the loop closes."""
    try:
        import redis.asyncio as redis
    except ImportError as exc:  # a Redis layer without redis-py: broken install
        raise RuntimeError("The Redis channel layer needs redis-py") from exc

    loop = asyncio.get_running_loop()
    client = _redis_clients.get(loop)
    if client is None:
        for stale in [lp for lp in _redis_clients if lp.is_closed()]:
            _redis_clients.pop(stale, None)
        client = _redis_clients[loop] = redis.Redis.from_url(url)
    return client


def sync_redis_client(url: str) -> Any:
    """One blocking client per URL for the whole process, for rare calls made from
    short-lived loops through a thread (a socket subscribing, a test's loop): its
    pool belongs to no event loop, so no connection is left behind when one closes."""
    client = _sync_clients.get(url)
    if client is None:
        try:
            import redis
        except ImportError as exc:  # a Redis layer without redis-py: broken install
            raise RuntimeError("The Redis channel layer needs redis-py") from exc

        client = _sync_clients.setdefault(url, redis.Redis.from_url(url))
    return client
