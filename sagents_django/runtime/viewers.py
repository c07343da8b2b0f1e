"""Who watches a conversation (Sagents' Presence), as socket consumers report it.

Sagents keeps an agent's process alive while someone views its conversation and
stops it when nobody does. Here no process is held between turns, so viewers only
decide what ``get_status`` / ``get_inactivity_status`` answer ("not_running" needs
no run *and* no viewer) and when ``agent_shutdown`` is published (``release``: the
last viewer left a conversation with no active run).

Entries are keyed by the consumer's channel name and expire: a consumer renews its
entries every ``REFRESH_SECONDS`` (``arefresh``), and one that stops renewing (its
daphne was killed and never ran ``disconnect``) ages out after ``VIEWER_TTL``
seconds, so a crash cannot pin a conversation as watched for ever (Sagents v0.14
fixed such a leak of stale viewer entries). The consumer also releases its entries
on unsubscribe and on disconnect.

Storage follows the channel layer. Beside a Redis layer every daphne process shares
one registry in that Redis: a sorted set per conversation (member: channel name,
score: expiry time) and a last-activity key. Beside the in-memory layer (one
process) the registry is a dict of this process, with the same expiry rule.
Each operation has a sync form (the server's verbs run in threads) and an async one.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from . import layer

logger = logging.getLogger(__name__)

VIEWER_TTL = 60
"""Seconds a viewer entry lives without being renewed."""
REFRESH_SECONDS = 20
"""How often a consumer renews its entries (well inside ``VIEWER_TTL``)."""
ACTIVITY_TTL = 7 * 24 * 3600
VIEWERS_KEY = "sagents:viewers:{}"
ACTIVITY_KEY = "sagents:activity:{}"

_memory: dict[str, dict[str, float]] = {}
_activity: dict[str, float] = {}
_lock = threading.Lock()

Ops = Callable[[Any], None]


def _url() -> str | None:
    """The Redis the registry lives in, or None for this process's memory."""
    channel_layer = layer.get_layer()
    if channel_layer is None or layer.is_in_memory(channel_layer):
        return None
    return layer.redis_url()


def _live(entries: dict[str, float], now: float) -> dict[str, float]:
    return {channel: ends for channel, ends in entries.items() if ends > now}


# The memory backend ---------------------------------------------------------------
def _memory_add(cids: Iterable[str], channel: str, now: float) -> None:
    with _lock:
        for cid in cids:
            _memory.setdefault(cid, {})[channel] = now + VIEWER_TTL


def _memory_remove(cid: str, channel: str, now: float) -> tuple[bool, int]:
    with _lock:
        entries = _memory.get(cid, {})
        removed = entries.pop(channel, None) is not None
        live = _live(entries, now)
        if live:
            _memory[cid] = live
        else:
            _memory.pop(cid, None)
        _activity[cid] = now
        return removed, len(live)


def _memory_count(cid: str, now: float) -> int:
    with _lock:
        return len(_live(_memory.get(cid, {}), now))


# The Redis backend: each operation queues its commands on a pipeline (sync or async,
# same methods) and reads its answer from the pipeline's results. ---------------------
def _redis_add(cids: Iterable[str], channel: str, now: float) -> Ops:
    def ops(pipe: Any) -> None:
        for cid in cids:
            key = VIEWERS_KEY.format(cid)
            pipe.zadd(key, {channel: now + VIEWER_TTL})
            pipe.expire(key, VIEWER_TTL + 1)

    return ops


def _redis_remove(cid: str, channel: str, now: float) -> Ops:
    def ops(pipe: Any) -> None:
        key = VIEWERS_KEY.format(cid)
        pipe.zrem(key, channel)
        pipe.zremrangebyscore(key, "-inf", now)
        pipe.zcard(key)
        pipe.set(ACTIVITY_KEY.format(cid), now, ex=ACTIVITY_TTL)

    return ops


def _redis_count(cid: str, now: float) -> Ops:
    return lambda pipe: pipe.zcount(VIEWERS_KEY.format(cid), f"({now}", "+inf")


def _redis_touch(cid: str, now: float) -> Ops:
    return lambda pipe: pipe.set(ACTIVITY_KEY.format(cid), now, ex=ACTIVITY_TTL)


def _redis_last(cid: str) -> Ops:
    return lambda pipe: pipe.get(ACTIVITY_KEY.format(cid))


def _both(*parts: Ops) -> Ops:
    def ops(pipe: Any) -> None:
        for part in parts:
            part(pipe)

    return ops


def _run(url: str, ops: Ops) -> list[Any]:
    client = layer.sync_redis_client(url)
    # A transaction: a removal and the count after it are one atomic step, so of two
    # viewers leaving at once exactly one sees the conversation empty.
    with client.pipeline(transaction=True) as pipe:
        ops(pipe)
        return list(pipe.execute())


async def _arun(url: str, ops: Ops) -> list[Any]:
    # The sync client in a thread: its pool belongs to no event loop, so sockets on
    # short-lived loops (a request's, a test's) never leave connections behind, and
    # these calls are rare (subscribe, unsubscribe, a renewal every 20 s).
    return await asyncio.to_thread(_run, url, ops)


def _when(value: Any) -> datetime | None:
    if value is None:
        return None
    return datetime.fromtimestamp(float(value), tz=UTC)


# The registry -------------------------------------------------------------------------
def add(conversation_id: str, channel_name: str, *, now: float | None = None) -> None:
    """``channel_name`` watches the conversation (and that is activity). ``now``:
    when it happened, as a Unix time (the entry expires ``VIEWER_TTL`` later)."""
    now = time.time() if now is None else now
    url = _url()
    if url is None:
        _memory_add([conversation_id], channel_name, now)
        touch(conversation_id)
        return
    _run(
        url,
        _both(
            _redis_add([conversation_id], channel_name, now),
            _redis_touch(conversation_id, now),
        ),
    )


async def aadd(conversation_id: str, channel_name: str) -> None:
    now = time.time()
    url = _url()
    if url is None:
        add(conversation_id, channel_name)
        return
    ops = _both(
        _redis_add([conversation_id], channel_name, now),
        _redis_touch(conversation_id, now),
    )
    await _arun(url, ops)


def remove(conversation_id: str, channel_name: str) -> int:
    """``channel_name`` no longer watches; the viewers left."""
    return _removed(conversation_id, channel_name)[1]


def _removed(conversation_id: str, channel_name: str) -> tuple[bool, int]:
    now = time.time()
    url = _url()
    if url is None:
        return _memory_remove(conversation_id, channel_name, now)
    removed, _, left, _ = _run(url, _redis_remove(conversation_id, channel_name, now))
    return bool(removed), int(left)


async def aremove(conversation_id: str, channel_name: str) -> int:
    return (await _aremoved(conversation_id, channel_name))[1]


async def _aremoved(conversation_id: str, channel_name: str) -> tuple[bool, int]:
    now = time.time()
    url = _url()
    if url is None:
        return _memory_remove(conversation_id, channel_name, now)
    ops = _redis_remove(conversation_id, channel_name, now)
    removed, _, left, _ = await _arun(url, ops)
    return bool(removed), int(left)


def count(conversation_id: str) -> int:
    """Live viewers of the conversation (expired entries do not count)."""
    now = time.time()
    url = _url()
    if url is None:
        return _memory_count(conversation_id, now)
    return int(_run(url, _redis_count(conversation_id, now))[0])


async def acount(conversation_id: str) -> int:
    now = time.time()
    url = _url()
    if url is None:
        return _memory_count(conversation_id, now)
    return int((await _arun(url, _redis_count(conversation_id, now)))[0])


def touch(conversation_id: str) -> None:
    """Record activity on the conversation now."""
    now = time.time()
    url = _url()
    if url is None:
        with _lock:
            _activity[conversation_id] = now
        return
    _run(url, _redis_touch(conversation_id, now))


async def atouch(conversation_id: str) -> None:
    url = _url()
    if url is None:
        touch(conversation_id)
        return
    await _arun(url, _redis_touch(conversation_id, time.time()))


def last_activity(conversation_id: str) -> datetime | None:
    """When a viewer last came, left or touched the conversation (None: never)."""
    url = _url()
    if url is None:
        with _lock:
            return _when(_activity.get(conversation_id))
    return _when(_run(url, _redis_last(conversation_id))[0])


async def alast_activity(conversation_id: str) -> datetime | None:
    url = _url()
    if url is None:
        return last_activity(conversation_id)
    return _when((await _arun(url, _redis_last(conversation_id)))[0])


async def arefresh(conversation_ids: Iterable[str], channel_name: str) -> None:
    """Renew ``channel_name``'s entries (a consumer still connected)."""
    cids = list(conversation_ids)
    if not cids:
        return
    now = time.time()
    url = _url()
    if url is None:
        _memory_add(cids, channel_name, now)
        return
    await _arun(url, _redis_add(cids, channel_name, now))


async def release(conversation_id: str, channel_name: str) -> bool:
    """Remove a viewer (unsubscribe, disconnect). When that was the last viewer of a
    conversation with no active run, publish ``agent_shutdown`` (reason
    ``no_viewers``): what Sagents' presence-based shutdown announces. True when it
    was published."""
    removed, left = await _aremoved(conversation_id, channel_name)
    if not removed or left:
        return False
    from asgiref.sync import sync_to_async

    from sagents_django.models import AgentRun

    from .lookup import interrupt_restorable

    running = AgentRun.objects.of(conversation_id).active()
    if await running.aexists():
        return False
    from . import loop
    from .publisher import publish

    last = await alast_activity(conversation_id)
    try:
        restorable = await sync_to_async(interrupt_restorable)(conversation_id)
    except Exception:
        logger.warning(
            "Could not tell whether %s's approval is restorable",
            conversation_id,
            exc_info=True,
        )
        restorable = None
    # Published from the runtime loop, like every other event: the sequence
    # counter's Redis connections live there, not on a socket's loop.
    sent = loop.submit(
        publish(
            conversation_id,
            "agent_shutdown",
            {
                "agent_id": f"conversation-{conversation_id}",
                "reason": "no_viewers",
                "interrupt_restorable": restorable,
                "last_activity_at": last.isoformat() if last is not None else None,
                "shutdown_at": datetime.now(tz=UTC).isoformat(),
            },
        )
    )
    await asyncio.wrap_future(sent)
    return True


def forget_in_process(conversation_id: str) -> int:
    """Drop the conversation's viewers and last activity of this process
    (erasure; beside Redis they are ``VIEWERS_KEY`` and ``ACTIVITY_KEY``)."""
    with _lock:
        viewers = _memory.pop(conversation_id, None) is not None
        activity = _activity.pop(conversation_id, None) is not None
    return int(viewers) + int(activity)
