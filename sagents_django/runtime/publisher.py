"""Publishing a conversation's events to the channel layer.

A ``Publisher`` lives for a whole turn on the turn's loop (STACK.md: sends awaited in
a running loop cost 2.4 ms against 7 ms through ``async_to_sync`` per send). Each
event becomes one channel-layer message::

    {"type": "agent.event", "conversation": "<uuid>", "event": name, "seq": n,
     "data": {...}, "subagent": {"name", "task_call_id"}}   # subagent: only when tagged

(``"debug": true`` is added on the debug group's messages.)

Streamed deltas are throttled, never one send per token: at most one ``llm_deltas``
event per ``SAGENTS["DELTA_WINDOW_MS"]``. The first delta after a quiet window goes at
once (the first token is not held back), the ones that follow within the window go
together at its end, and any other event first flushes the deltas waiting before it, so frames keep the order things happened in. Sends are
serialized per publisher, so ``seq`` order is send order.

``publish()`` (module level) is the one-off form for code outside a turn (a web
request announcing a queued message, the admin cancelling).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any

from . import groups, inflight, layer

logger = logging.getLogger(__name__)

EVENT_TYPE = "agent.event"
FILE_EVENTS = frozenset({"file_updated", "file_deleted"})


def event_message(
    conversation_id: str,
    event: str,
    data: dict[str, Any],
    seq: int,
    subagent: dict[str, Any] | None = None,
) -> dict[str, Any]:
    message = {
        "type": EVENT_TYPE,
        "conversation": conversation_id,
        "event": event,
        "seq": seq,
        "data": data,
    }
    if subagent:
        message["subagent"] = subagent
    return message


def split_subagent(
    event: str, data: dict[str, Any]
) -> tuple[str, dict[str, Any], dict[str, Any] | None]:
    """A core ``subagent_event`` (possibly nested) as (inner event, data, tag)."""
    tag: dict[str, Any] | None = None
    while event == "subagent_event" and isinstance(data, dict):
        outer = {"name": data.get("subagent"), "task_call_id": data.get("task_call_id")}
        tag = outer if tag is None else {**outer, "parent": tag}
        event, data = str(data.get("event")), data.get("data") or {}
    return event, data, tag


async def publish(
    conversation_id: Any,
    event: str,
    data: dict[str, Any],
    *,
    debug: bool = False,
    subagent: dict[str, Any] | None = None,
) -> int:
    """Send one event to a conversation's group (or its debug group); its seq.

    Debug events count on a sequence of their own (``debug:<id>``), so a debug
    subscriber sees no gaps and an ordinary one never counts what it cannot see.
    A conversation event is numbered together with its change to the in-flight
    buffer (``inflight.stamp``), before it is sent: a socket that joins and then
    reads the buffer misses no delta and counts none twice."""
    cid = str(conversation_id)
    if debug:
        seq = await layer.next_seq(f"debug:{cid}")
        message = event_message(cid, event, data, seq, subagent)
        # A consumer in both groups must tell the two sequences apart.
        message["debug"] = True
        await layer.group_send(groups.debug_group(cid), message)
        return seq
    group = groups.conversation_group(cid)
    message = event_message(cid, event, data, layer.SEQ_PLACEHOLDER, subagent)
    # Beside the Pub/Sub layer, numbering the event publishes it too (one round
    # trip); else it is numbered, then sent.
    frame = layer.pubsub_frame(group, message)
    seq = await inflight.stamp(cid, event, data, subagent=subagent, frame=frame)
    if frame is None:
        message["seq"] = seq
        await layer.group_send(group, message)
    return seq


async def publish_file_event(
    conversation_id: Any,
    event: str,
    data: dict[str, Any],
    *,
    subagent: dict[str, Any] | None = None,
) -> None:
    """A file event also goes to its filesystem scope's group, where every
    conversation (and file panel) sharing those files listens. It is marked
    ``"files": true`` and numbered on the group's own sequence; ``conversation``
    names the conversation whose agent changed the file."""
    scope = data.get("scope")
    group = groups.files_group(scope)
    seq = await layer.next_seq(f"files:{group}")
    message = event_message(str(conversation_id), event, data, seq, subagent)
    message["files"] = True
    await layer.group_send(group, message)


class Publisher:
    """One turn's events, in order, with deltas batched."""

    def __init__(self, conversation_id: Any, *, window: float = 0.02) -> None:
        self.conversation_id = str(conversation_id)
        self.window = window
        self.sent = 0
        """Messages sent (a deltas batch counts once, a file event's copy to its
        files group once more)."""
        self.failed = 0
        """Messages lost before the channel layer could take them (their number
        could not be taken, or the layer raised)."""
        self._batches: list[tuple[dict[str, Any] | None, list[dict[str, Any]]]] = []
        """Deltas waiting, by sub-agent tag, in arrival order."""
        self._last_deltas = float("-inf")
        """Loop time of the last ``llm_deltas`` sent."""
        self._flusher: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    async def publish(
        self,
        event: str,
        data: dict[str, Any],
        *,
        debug: bool = False,
        subagent: dict[str, Any] | None = None,
    ) -> None:
        if event == "subagent_event":
            event, data, subagent = split_subagent(event, data)
        if event == "debug":
            debug = True  # middleware actions: for inspectors, not transcripts
        if event == "llm_deltas" and not debug:
            self.add_deltas(data.get("deltas") or [], subagent=subagent)
            return
        async with self._lock:
            await self._flush_locked()
            await self._send(event, data, debug=debug, subagent=subagent)
        if event in FILE_EVENTS and not debug:
            # A sub-agent's write changed the same shared files.
            await self._guarded(
                event,
                publish_file_event(
                    self.conversation_id, event, data, subagent=subagent
                ),
            )

    def add_deltas(
        self, deltas: list[dict[str, Any]], *, subagent: dict[str, Any] | None = None
    ) -> None:
        """Buffer deltas. At most one ``llm_deltas`` goes out per window: the first
        delta after a quiet window goes at once (no wait before the first token),
        later ones together at the window's end (or before the next other event).
        Deltas of another sub-agent start a batch of their own."""
        if not deltas:
            return
        if self._batches and self._batches[-1][0] == subagent:
            self._batches[-1][1].extend(deltas)
        else:
            self._batches.append((subagent, list(deltas)))
        now = asyncio.get_running_loop().time()
        self._schedule(max(0.0, self._last_deltas + self.window - now))

    def _schedule(self, delay: float) -> None:
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.ensure_future(self._flush_after(delay))

    async def _flush_after(self, delay: float) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if delay:
                await asyncio.sleep(delay)
            async with self._lock:
                await self._flush_locked()
            if not self._batches:
                return
            # Deltas that came while the last batch was being sent.
            delay = max(0.0, self._last_deltas + self.window - loop.time())

    async def flush(self) -> None:
        async with self._lock:
            await self._flush_locked()

    async def _flush_locked(self) -> None:
        batches, self._batches = self._batches, []
        for tag, deltas in batches:
            await self._send(
                "llm_deltas", {"deltas": merge_deltas(deltas)}, subagent=tag
            )
        if batches:
            self._last_deltas = asyncio.get_running_loop().time()

    async def _send(
        self,
        event: str,
        data: dict[str, Any],
        *,
        debug: bool = False,
        subagent: dict[str, Any] | None = None,
    ) -> None:
        await self._guarded(
            event,
            publish(self.conversation_id, event, data, debug=debug, subagent=subagent),
        )

    async def _guarded(self, event: str, sending: Awaitable[Any]) -> None:
        try:
            await sending
        except Exception:
            # The layer is a best-effort notifier (the database is the truth): a
            # turn goes on when it is down, and clients resync from the database
            # (their next event's seq shows the gap).
            self.failed += 1
            if self.failed == 1:
                logger.warning(
                    "Could not publish %s for %s; later failures of this turn are "
                    "counted, not logged",
                    event,
                    self.conversation_id,
                    exc_info=True,
                )
            return
        self.sent += 1

    async def aclose(self) -> None:
        """Send what is buffered (the end of a turn)."""
        if self._flusher is not None and not self._flusher.done():
            self._flusher.cancel()
        await self.flush()


def merge_deltas(deltas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Adjacent text-only (or thinking-only) deltas joined into one, so a batch of
    forty tokens is one short list; tool-call pieces and statuses are kept as they
    came (their order and indexes matter)."""
    merged: list[dict[str, Any]] = []
    for delta in deltas:
        last = merged[-1] if merged else None
        if last is not None and set(delta) <= {"content"} and set(last) <= {"content"}:
            last["content"] = last.get("content", "") + delta.get("content", "")
        elif (
            last is not None
            and set(delta) <= {"thinking"}
            and set(last) <= {"thinking"}
        ):
            last["thinking"] = last.get("thinking", "") + delta.get("thinking", "")
        else:
            merged.append(dict(delta))
    return merged


def display_message_json(row: Any) -> dict[str, Any]:
    """The JSON of a display-message row, as events and the socket protocol carry it."""
    inserted = getattr(row, "inserted_at", None)
    return {
        "id": str(row.pk),
        "conversation_id": str(row.conversation_id),
        "message_type": row.message_type,
        "content_type": row.content_type,
        "content": row.content,
        "sequence": row.sequence,
        "status": row.status,
        "metadata": row.metadata,
        "inserted_at": inserted.isoformat() if inserted is not None else None,
        "run_id": str(row.run_id) if getattr(row, "run_id", None) else None,
    }
