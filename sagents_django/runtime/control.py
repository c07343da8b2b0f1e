"""Reaching a running turn from any process: cancel it, or post a middleware message.

A turn registers a ``TurnHandle`` (its cancel token and inbox) in its own process,
and, beside a Redis channel layer, listens on its conversation's control group. A
request is delivered to the local handle when the turn runs in this process (the
embedded default), else sent over the control group to whichever worker runs it.
The layer delivers at most once, so a cancel is also written to the run's row
(``cancel_requested``), which the turn's heartbeat reads: a lost message delays a
stop by one heartbeat, never loses it.

For the same reason the layer never holds up or ends a turn: the turn listens from
a task of its own, which joins the control group in the background and keeps trying
(logged once) while the layer is down or its connections are stale after a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from sagents_django.core import CancelToken, Inbox

from . import groups, layer

logger = logging.getLogger(__name__)

CONTROL_TYPE = "sagents.control"
RETRY_SECONDS = (1.0, 30.0)
"""How long the listener waits after the layer failed: first, at most."""


@dataclass(frozen=True, slots=True)
class TurnHandle:
    conversation_id: str
    run_id: str
    cancel: CancelToken
    inbox: Inbox

    def deliver(self, message: dict[str, Any]) -> None:
        if message.get("run_id") not in (None, self.run_id):
            return  # meant for an earlier or later run of the conversation
        action = message.get("action")
        if action == "cancel":
            self.cancel.cancel(str(message.get("reason") or "Cancelled"))
        elif action == "notify":
            self.inbox.post(str(message.get("middleware_id")), message.get("message"))


_local: dict[str, TurnHandle] = {}
_lock = threading.Lock()


def local_turn(conversation_id: Any) -> TurnHandle | None:
    with _lock:
        return _local.get(str(conversation_id))


async def send(conversation_id: Any, message: dict[str, Any]) -> None:
    """Deliver a control message to the conversation's running turn, wherever it
    runs (here directly; elsewhere over the channel layer)."""
    message = {"type": CONTROL_TYPE, **message}
    handle = local_turn(conversation_id)
    if handle is not None:
        handle.deliver(message)
        return
    await layer.group_send(groups.control_group(conversation_id), message)


@contextlib.asynccontextmanager
async def listening(handle: TurnHandle) -> AsyncIterator[None]:
    """Register ``handle`` for this process, and listen on the control group when
    other processes can reach this one (a Redis layer) while the block runs."""
    with _lock:
        _local[handle.conversation_id] = handle
    channel_layer = layer.get_layer()
    listener: asyncio.Task[None] | None = None
    if channel_layer is not None and not layer.is_in_memory(channel_layer):
        listener = asyncio.ensure_future(_listen(channel_layer, handle))
    try:
        yield
    finally:
        with _lock:
            if _local.get(handle.conversation_id) is handle:
                del _local[handle.conversation_id]
        if listener is not None:
            listener.cancel()
            with contextlib.suppress(BaseException):
                await listener


async def _listen(channel_layer: Any, handle: TurnHandle) -> None:
    """Join the control group and hand its messages to ``handle``; on a failure of
    the layer, wait and try again (joining again: a restarted Redis forgot us)."""
    group = groups.control_group(handle.conversation_id)
    channel: str | None = None
    joined = False
    first, longest = RETRY_SECONDS
    delay = first
    try:
        while True:
            try:
                if channel is None:
                    channel = await channel_layer.new_channel()
                if not joined:
                    await channel_layer.group_add(group, channel)
                    joined = True
                message = await channel_layer.receive(channel)
            except asyncio.CancelledError:
                raise
            except Exception:
                if delay == first:
                    # The heartbeat's read of the run row still stops the turn.
                    logger.warning(
                        "Control channel of run %s failed; retrying in the background",
                        handle.run_id,
                        exc_info=True,
                    )
                joined = False
                await asyncio.sleep(delay)
                delay = min(delay * 2, longest)
                continue
            delay = first
            if isinstance(message, dict) and message.get("type") == CONTROL_TYPE:
                handle.deliver(message)
    finally:
        if joined and channel is not None:
            with contextlib.suppress(Exception):
                await channel_layer.group_discard(group, channel)
