"""The JSON WebSocket endpoint: follow conversations, send, cancel and resume.

One socket per browser tab (or script) may follow several conversations at once,
as Sagents v0.15's tagged subscriptions do: every event frame names its
conversation. Each frame is authorized through the user's scope; a conversation the
scope cannot see closes the socket (``CLOSE_NOT_FOUND``) before anything of it is
sent. The consumer is the viewer registry's reporter: subscribing makes the socket
a viewer, and unsubscribing or disconnecting releases it. A subscribe's reply (each
time) is followed by the conversation's in-flight reply (``in_flight``) before any
live event, and the events numbered up to its ``seq`` that were still on their way
are skipped: the frame and the database the client reads next already hold them.
docs/protocol.md documents every frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

try:
    from channels.db import database_sync_to_async
    from channels.generic.websocket import AsyncJsonWebsocketConsumer
except ImportError as exc:  # the socket is part of the "channels" extra
    raise ImportError(
        "sagents_django.consumers needs Channels: "
        "pip install 'sagents-django[channels]'"
    ) from exc

from sagents_django import protocol, services
from sagents_django.core import SagentsError
from sagents_django.exceptions import NotFound
from sagents_django.models import AgentState
from sagents_django.protocol import FrameError
from sagents_django.runtime import agent_server, groups, inflight, layer, viewers
from sagents_django.scope import Scope, scope_class

logger = logging.getLogger(__name__)

Handler = Callable[["AgentSocketConsumer", dict[str, Any]], Awaitable[dict[str, Any]]]


class AgentSocketConsumer(AsyncJsonWebsocketConsumer):
    """``ws/sagents/``: the protocol of docs/protocol.md."""

    conversations: set[str]
    """Conversations whose events this socket receives (and is a viewer of)."""
    debugged: set[str]
    """Conversations whose debug stream this socket receives (staff only)."""
    floors: dict[str, inflight.Floor]
    """Per conversation, the events the last ``in_flight`` frame already covers."""
    then: list[dict[str, Any]]
    """Frames that follow the reply to the frame being handled (before any event:
    one message is handled at a time)."""
    agent_scope: Scope | None = None
    user: Any = None
    closed = False
    refresher: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        self.conversations = set()
        self.debugged = set()
        self.floors = {}
        self.then = []
        # Accept first: a refusal before accepting is an HTTP 403 with no close
        # code, and clients should be told why.
        await self.accept()
        if self.channel_layer is None:
            # Nothing could reach this socket (check W002 says so at start-up).
            logger.error("No channel layer: set CHANNEL_LAYERS for live events")
            await self._close(protocol.CLOSE_NO_CHANNEL_LAYER)
            return
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self._close(protocol.CLOSE_UNAUTHENTICATED)
            return
        self.user = user
        self.agent_scope = await database_sync_to_async(scope_class().for_user)(user)

    async def disconnect(self, code: int) -> None:
        self.closed = True
        if self.refresher is not None:
            self.refresher.cancel()
            with contextlib.suppress(BaseException):
                await self.refresher
        for cid in list(self.conversations):
            await self._leave(cid)
        for cid in list(self.debugged):
            await layer.group_discard(groups.debug_group(cid), self.channel_name)
        self.debugged.clear()

    async def _close(self, code: int) -> None:
        self.closed = True
        await self.close(code=code)

    # Client frames ------------------------------------------------------------------
    async def receive(
        self,
        text_data: str | None = None,
        bytes_data: bytes | None = None,
        **kwargs: Any,
    ) -> None:
        if self.closed:
            return
        try:
            frame = protocol.parse_frame(text_data, bytes_data)
        except FrameError as exc:
            await self.send_json(protocol.error_frame(exc))
            return
        await self.receive_json(frame)

    async def receive_json(self, content: dict[str, Any], **kwargs: Any) -> None:
        action: str | None = None
        request_id: Any = None
        self.then = []
        try:
            request_id = protocol.client_id(content)
            action = protocol.action_of(content)
            result = await HANDLERS[action](self, content)
        except NotFound:
            # Someone else's conversation, or none: one answer, no detail, and the
            # socket goes (a client probing ids gets nothing more to work with).
            await self._close(protocol.CLOSE_NOT_FOUND)
            return
        except (FrameError, SagentsError, ValueError) as exc:
            error = protocol.error_for(exc)
            frame = protocol.error_frame(error, action=action, request_id=request_id)
            await self.send_json(frame)
            return
        await self.send_json(protocol.reply(action, request_id, **result))
        for frame in self.then:
            await self.send_json(frame)
        self.then = []

    async def subscribe(self, frame: dict[str, Any]) -> dict[str, Any]:
        cid = protocol.conversation_of(frame)
        if cid not in self.conversations:
            self._room_for(self.conversations)
            await agent_server.asubscribe(self._scope(), cid, self.channel_name)
            self.conversations.add(cid)
            self._keep_fresh()
        # In the group first, then the buffer, then the database: every event is in
        # one of them or arrives after this frame (inflight's docstring).
        snapshot = await inflight.read(cid)
        self.floors[cid] = inflight.Floor(snapshot.seq)
        self.then.append(
            protocol.in_flight_frame(cid, snapshot.seq, snapshot.to_dict())
        )
        status = await agent_server.aget_status(self._scope(), cid)
        return {"conversation": cid, "status": status, "todos": await _todos(cid)}

    async def unsubscribe(self, frame: dict[str, Any]) -> dict[str, Any]:
        cid = protocol.conversation_of(frame)
        await agent_server.aunsubscribe(self._scope(), cid, self.channel_name)
        self.conversations.discard(cid)
        self.floors.pop(cid, None)
        return {"conversation": cid}

    async def send_message(self, frame: dict[str, Any]) -> dict[str, Any]:
        cid = protocol.conversation_of(frame)
        submission = await agent_server.aadd_message(
            self._scope(), cid, frame.get("text"), metadata=frame.get("metadata")
        )
        return {
            "conversation": cid,
            "run_id": submission.run_id,
            "queued": submission.queued,
            "message_ids": submission.message_ids,
        }

    async def cancel(self, frame: dict[str, Any]) -> dict[str, Any]:
        cid = protocol.conversation_of(frame)
        cancelled = await agent_server.acancel(self._scope(), cid)
        return {"conversation": cid, "cancelled": cancelled}

    async def resume(self, frame: dict[str, Any]) -> dict[str, Any]:
        cid = protocol.conversation_of(frame)
        if "decisions" not in frame:
            raise FrameError("invalid_input", "decisions is required (a list)")
        run_id = await agent_server.aresume(self._scope(), cid, frame["decisions"])
        return {"conversation": cid, "run_id": run_id}

    async def history(self, frame: dict[str, Any]) -> dict[str, Any]:
        cid = protocol.conversation_of(frame)
        limit = frame.get("limit", protocol.HISTORY_LIMIT)
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise FrameError("invalid_input", "limit must be an integer")
        if not 1 <= limit <= protocol.HISTORY_LIMIT:
            raise FrameError(
                "invalid_input", f"limit must be 1 to {protocol.HISTORY_LIMIT}"
            )
        rows = await database_sync_to_async(_history)(
            self._scope(), cid, limit, frame.get("after")
        )
        return {"conversation": cid, "messages": rows}

    async def subscribe_debug(self, frame: dict[str, Any]) -> dict[str, Any]:
        cid = protocol.conversation_of(frame)
        self._staff_only()
        if cid not in self.debugged:
            self._room_for(self.debugged)
            await agent_server.asubscribe_debug(self._scope(), cid, self.channel_name)
            self.debugged.add(cid)
        return {"conversation": cid}

    async def unsubscribe_debug(self, frame: dict[str, Any]) -> dict[str, Any]:
        cid = protocol.conversation_of(frame)
        self._staff_only()
        await agent_server.aunsubscribe_debug(self._scope(), cid, self.channel_name)
        self.debugged.discard(cid)
        return {"conversation": cid}

    # Events from the channel layer -----------------------------------------------------
    async def agent_event(self, message: dict[str, Any]) -> None:
        """An ``agent.event`` of a conversation group (or, marked ``debug``, of a
        debug group) as an event frame."""
        cid = message.get("conversation")
        debug = bool(message.get("debug"))
        # Only what this socket asked for and still follows (a message already on
        # its way when the socket unsubscribed is dropped here).
        if self.closed or cid not in (self.debugged if debug else self.conversations):
            return
        floor = None if debug else self.floors.get(str(cid))
        if floor is not None and floor.skips(message.get("seq")):
            return
        frame = {
            "event": message.get("event"),
            "seq": message.get("seq"),
            "conversation": cid,
            "data": message.get("data"),
        }
        if message.get("subagent"):
            frame["subagent"] = message["subagent"]
        if debug:
            frame["debug"] = True
        await self.send_json(frame)

    # Helpers ----------------------------------------------------------------------------
    def _scope(self) -> Scope:
        assert self.agent_scope is not None  # set in connect for a signed-in user
        return self.agent_scope

    def _staff_only(self) -> None:
        if not getattr(self.user, "is_staff", False):
            raise FrameError("forbidden", "Debug streams are for staff users")

    def _room_for(self, following: set[str]) -> None:
        if len(following) >= protocol.MAX_SUBSCRIPTIONS:
            raise FrameError(
                "too_many_subscriptions",
                f"A socket follows at most {protocol.MAX_SUBSCRIPTIONS} conversations",
            )

    def _keep_fresh(self) -> None:
        if self.refresher is None or self.refresher.done():
            self.refresher = asyncio.ensure_future(self._refresh())

    async def _refresh(self) -> None:
        """Renew this socket's viewer entries while it lives (they expire, so a
        daphne that dies without disconnecting leaves no viewer behind)."""
        while not self.closed:
            await asyncio.sleep(viewers.REFRESH_SECONDS)
            await viewers.arefresh(self.conversations, self.channel_name)

    async def _leave(self, cid: str) -> None:
        self.conversations.discard(cid)
        self.floors.pop(cid, None)
        await layer.group_discard(groups.conversation_group(cid), self.channel_name)
        await viewers.release(cid, self.channel_name)


HANDLERS: dict[str, Handler] = {
    "subscribe": AgentSocketConsumer.subscribe,
    "unsubscribe": AgentSocketConsumer.unsubscribe,
    "send": AgentSocketConsumer.send_message,
    "cancel": AgentSocketConsumer.cancel,
    "resume": AgentSocketConsumer.resume,
    "history": AgentSocketConsumer.history,
    "subscribe_debug": AgentSocketConsumer.subscribe_debug,
    "unsubscribe_debug": AgentSocketConsumer.unsubscribe_debug,
}
"""Action -> method (``send`` is ``send_message``: a consumer's ``send`` writes to
the socket)."""


async def _todos(cid: str) -> list[Any]:
    """The conversation's current todos as stored (read after authorization)."""
    value = await (
        AgentState.objects.filter(conversation_id=cid)
        .values_list("state_data__state__todos", flat=True)
        .afirst()
    )
    return value if isinstance(value, list) else []


def _history(scope: Scope, cid: str, limit: int, after: Any) -> list[dict[str, Any]]:
    from sagents_django.runtime.publisher import display_message_json

    if services.get_conversation(scope, cid) is None:
        raise NotFound("conversation", cid)
    rows = services.load_display_messages(scope, cid, limit=limit, after=after)
    return [display_message_json(row) for row in rows]
