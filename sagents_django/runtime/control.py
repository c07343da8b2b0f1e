"""Reaching a running turn from any process: cancel it, or post a middleware message.

A turn registers a ``TurnHandle`` (its cancel token and inbox) in its own process,
and, beside a Redis channel layer, listens on its conversation's control group. A
request is delivered to the local handle when the turn runs in this process (the
embedded default), else sent over the control group to whichever worker runs it.
The layer delivers at most once, so a cancel is also written to the run's row
(``cancel_requested``), which the turn's heartbeat reads: a lost message delays a
stop by one heartbeat, never loses it.
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
    channel = None
    group = groups.control_group(handle.conversation_id)
    try:
        if channel_layer is not None and not layer.is_in_memory(channel_layer):
            channel = await channel_layer.new_channel()
            await channel_layer.group_add(group, channel)
            listener = asyncio.ensure_future(_listen(channel_layer, channel, handle))
        yield
    finally:
        with _lock:
            if _local.get(handle.conversation_id) is handle:
                del _local[handle.conversation_id]
        if listener is not None:
            listener.cancel()
            with contextlib.suppress(BaseException):
                await listener
        if channel is not None and channel_layer is not None:
            with contextlib.suppress(Exception):
                await channel_layer.group_discard(group, channel)


async def _listen(channel_layer: Any, channel: str, handle: TurnHandle) -> None:
    while True:
        try:
            message = await channel_layer.receive(channel)
        except asyncio.CancelledError:
            raise
        except Exception:
            # Redis went away: the heartbeat's read of the run row still stops us.
            logger.warning("Control channel of %s failed", handle.run_id, exc_info=True)
            await asyncio.sleep(1)
            continue
        if isinstance(message, dict) and message.get("type") == CONTROL_TYPE:
            handle.deliver(message)
