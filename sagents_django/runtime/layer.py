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

Beside the Pub/Sub layer on one Redis, an event's number is taken, the in-flight
buffer changed and the frame published in one round trip (``pubsub_frame``, the
script of ``inflight.stamp``): the layer's own serialized message with a placeholder
where the number goes, which the script fills in before its ``PUBLISH``. A frame then
costs the worker one Redis call instead of two (``bench/stream_latency.py``). What the
layer's settings mean for this is worked out once per layer instance (``plan``), not
per event.

So every event lost must leave a gap. One whose send fails does (its number was
taken). One whose number cannot be taken (the counter's Redis is down) is counted
instead (``numbering``): the next number taken skips past it, and a task of this
process's moves the counter past it as soon as Redis answers again, so even a turn's
last events show as lost to a client that asks for the current number.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import threading
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

SEQ_KEY = "sagents:seq:{}"
SEQ_TTL = 7 * 24 * 3600
"""An idle conversation's counter expires after a week (a client then resyncs)."""

HOP_TIMEOUT = 5.0
"""Seconds a send waits for the in-memory layer's home loop."""
SETTLE_SECONDS = (1.0, 30.0)
"""How often the counter of events lost unnumbered is retried: first, at most."""

_home: dict[int, asyncio.AbstractEventLoop] = {}
_counters: defaultdict[str, Iterator[int]] = defaultdict(lambda: itertools.count(1))
_lock = threading.Lock()
_redis_clients: dict[tuple[asyncio.AbstractEventLoop, str], Any] = {}
_sync_clients: dict[str, Any] = {}
_unnumbered: Counter[str] = Counter()
"""Events lost before their counter (a Redis key) could number them, by key."""
_settlers: dict[str, asyncio.Task[None]] = {}


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


def send_from_sync(group: str, message: dict[str, Any], *, what: str) -> None:
    """``group_send`` from synchronous code (a view, a signal receiver): on the
    runtime loop, waited for at most ``HOP_TIMEOUT``. No layer: nothing to tell. A
    send that does not finish is logged ("Could not <what>"), never raised: the
    caller's own change stands."""
    if get_layer() is None:
        return
    from . import loop

    try:
        loop.submit(group_send(group, message)).result(timeout=HOP_TIMEOUT)
    except Exception:
        logger.warning("Could not %s", what)


SEQ_PLACEHOLDER = 0xFFFF_FFFF_FFFF_FFF1
"""The number a frame is serialized with before its real one is known: msgpack
writes it as ``0xcf`` and eight bytes, which the stamping script overwrites with the
real number in the same (valid, if not the shortest) form."""
_PLACEHOLDER_BYTES = b"\xcf" + SEQ_PLACEHOLDER.to_bytes(8, "big")


@dataclass(frozen=True, slots=True)
class Frame:
    """A message as the Pub/Sub layer would publish it, its number still to fill."""

    channel: str
    """The group's Redis Pub/Sub channel."""
    payload: bytes
    """The layer's serialized message, ``seq`` being ``SEQ_PLACEHOLDER``."""
    offset: int
    """Where the placeholder's nine bytes start in ``payload``."""


def pubsub_frame(group: str, message: dict[str, Any]) -> Frame | None:
    """``message`` (whose ``seq`` is ``SEQ_PLACEHOLDER``) ready for the stamping
    script to number and publish to ``group`` itself, or None when the layer must
    send it: another layer, a subclass with a ``group_send`` of its own (a layer
    that filters or drops), several hosts (the group may live on another shard
    than the counter), or a serializer whose output does not hold the placeholder
    as msgpack's plain bytes (encryption, JSON)."""
    current = plan()
    if current.channel_prefix is None:
        return None
    payload = current.layer.serialize(message)
    offset = payload.find(_PLACEHOLDER_BYTES)
    if offset < 0 or payload.count(_PLACEHOLDER_BYTES) != 1:
        return None
    return Frame(channel=current.channel_prefix + group, payload=payload, offset=offset)


@dataclass(frozen=True, slots=True)
class Plan:
    """What the layer configured now means for publishing, worked out once per
    layer instance (Channels makes a new one when ``CHANNEL_LAYERS`` changes), not
    once per event: a streamed chunk reads no setting."""

    layer: Any
    """The default channel layer (None: no layer)."""
    url: str | None
    """The Redis of the event counters (and the in-flight buffers): the layer's
    first host beside a channels_redis layer; None: they live in this process."""
    channel_prefix: str | None
    """Set when the stamping script may publish frames itself (``pubsub_frame``):
    the layer's Redis Pub/Sub channel name of a group, less the group."""


_plan: Plan | None = None


def plan() -> Plan:
    """The current layer's ``Plan``."""
    global _plan
    layer = get_layer()
    current = _plan
    if current is None or current.layer is not layer:
        current = _plan = _make_plan(layer)
    return current


def _make_plan(layer: Any) -> Plan:
    if layer is None:
        return Plan(layer=None, url=None, channel_prefix=None)
    url = redis_url()
    config = _layer_config()
    prefix = None
    if _plain_pubsub(layer.__class__) and len(config.get("hosts") or [None]) == 1:
        # The layer's name for a group's channel (channels_redis is pinned, and
        # tests/runtime/test_inflight.py holds this to the layer's own).
        prefix = f"{config.get('prefix', 'asgi')}__group__"
    return Plan(layer=layer, url=url, channel_prefix=prefix)


@functools.lru_cache(maxsize=16)
def _plain_pubsub(cls: Any) -> bool:
    try:
        from channels_redis.pubsub import RedisPubSubChannelLayer
    except ImportError:
        return False
    # The layer proxies group_send to a layer per loop (its __getattr__): a class
    # that defines one, or its own serialize, publishes differently.
    return (
        issubclass(cls, RedisPubSubChannelLayer)
        and getattr(cls, "group_send", None) is None
        and cls.serialize is RedisPubSubChannelLayer.serialize
    )


def _layer_config() -> dict[str, Any]:
    from django.conf import settings

    default = getattr(settings, "CHANNEL_LAYERS", {}).get("default", {})
    return dict(default.get("CONFIG") or {})


async def next_seq(conversation_id: str) -> int:
    """The next sequence number of ``conversation_id``'s events."""
    url = plan().url
    if url is None:
        with _lock:
            return next(_counters[conversation_id])
    key = SEQ_KEY.format(conversation_id)
    with numbering(url, key) as step:
        async with redis_client(url).pipeline(transaction=False) as pipe:
            pipe.incrby(key, step)
            pipe.expire(key, SEQ_TTL)
            value, _ = await pipe.execute()
    return int(value)


@contextlib.contextmanager
def numbering(url: str, key: str) -> Iterator[int]:
    """How far to move the counter ``key`` for one event: 1, plus the events lost
    unnumbered since it last moved. If the block fails, this event is lost too: it
    is counted, and a task retries moving the counter past the lost ones."""
    with _lock:
        step = 1 + _unnumbered.pop(key, 0)
    try:
        yield step
    except BaseException:
        # Also when Redis did move the counter and only its answer was lost: a
        # loss may show as a wider gap than it was, never as none.
        with _lock:
            _unnumbered[key] += step
        _settle_later(url, key)
        raise


def _settle_later(url: str, key: str) -> None:
    task = _settlers.get(key)
    if task is not None and not task.done() and not task.get_loop().is_closed():
        return
    _settlers[key] = asyncio.get_running_loop().create_task(_settle(url, key))


async def _settle(url: str, key: str) -> None:
    """Move the counter past the events lost unnumbered once Redis answers (the
    next event numbered may be long in coming, or never come)."""
    delay, longest = SETTLE_SECONDS
    while True:
        await asyncio.sleep(delay)
        with _lock:
            lost = _unnumbered.pop(key, 0)
        if not lost:
            return
        try:
            async with redis_client(url).pipeline(transaction=False) as pipe:
                pipe.incrby(key, lost)
                pipe.expire(key, SEQ_TTL)
                await pipe.execute()
        except Exception:
            with _lock:
                _unnumbered[key] += lost
            delay = min(delay * 2, longest)
            continue
        logger.info("Counter %s moved past %d events lost unnumbered", key, lost)
        return


def redis_client(url: str) -> Any:
    """One client per loop and URL (redis.asyncio connections belong to the loop
    that made them); dropped when the loop closes."""
    try:
        import redis.asyncio as redis
    except ImportError as exc:  # a Redis layer without redis-py: broken install
        raise RuntimeError("The Redis channel layer needs redis-py") from exc

    loop = asyncio.get_running_loop()
    client = _redis_clients.get((loop, url))
    if client is None:
        for stale in [k for k in _redis_clients if k[0].is_closed()]:
            _redis_clients.pop(stale, None)
        client = _redis_clients[loop, url] = redis.Redis.from_url(url)
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
