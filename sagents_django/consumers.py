"""The JSON WebSocket endpoint: create, list and follow conversations, send,
cancel and resume.

``AgentSocketConsumer`` speaks the JSON protocol of docs/protocol.md; what it shares
with the chat pages' socket (signing in and out, viewers, frames in ``seq`` order)
is ``sockets.AgentConsumerBase``.

One socket per browser tab (or script) may follow several conversations at once,
as Sagents v0.15's tagged subscriptions do: every event frame names its
conversation. Each frame is authorized through the user's scope; a conversation the
scope cannot see closes the socket (``CLOSE_NOT_FOUND``) before anything of it is
sent. A subscribe's reply (each time) is followed by the conversation's in-flight
state (``in_flight``) before any live event, and the events numbered up to its
``seq`` that were still on their way are skipped: the frame and the database the
client reads next already hold them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

try:
    from channels.db import database_sync_to_async
except ImportError as exc:  # the socket is part of the "channels" extra
    raise ImportError(
        "sagents_django.consumers needs Channels: "
        "pip install 'sagents-django[channels]'"
    ) from exc

from sagents_django import protocol, services
from sagents_django.core import SagentsError
from sagents_django.exceptions import NotFound
from sagents_django.filesystems.keys import scope_parts
from sagents_django.models import AgentRun, AgentState
from sagents_django.protocol import FrameError
from sagents_django.runtime import agent_server, groups, inflight, layer
from sagents_django.scope import Scope
from sagents_django.sockets import AgentConsumerBase

logger = logging.getLogger(__name__)

Handler = Callable[["AgentSocketConsumer", dict[str, Any]], Awaitable[dict[str, Any]]]


class AgentSocketConsumer(AgentConsumerBase):
    """``ws/sagents/``: the protocol of docs/protocol.md."""

    conversations: set[str]
    """Conversations whose events this socket receives (and is a viewer of)."""
    debugged: set[str]
    """Conversations whose debug stream this socket receives (staff only)."""
    then: list[dict[str, Any]]
    """Frames that follow the reply to the frame being handled (before any event:
    one message is handled at a time)."""
    ticker: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        self.setup()
        self.conversations = self.viewed
        self.debugged = set()
        self.then = []
        await self.accept()
        await self.sign_in()

    async def disconnect(self, code: int) -> None:
        if self.ticker is not None:
            self.ticker.cancel()
            with contextlib.suppress(BaseException):
                await self.ticker
        await super().disconnect(code)
        for cid in list(self.debugged):
            await layer.group_discard(groups.debug_group(cid), self.channel_name)
        self.debugged.clear()

    async def send_json(self, content: dict[str, Any]) -> None:
        await self.send(text_data=json.dumps(content))

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

    async def receive_json(self, content: dict[str, Any]) -> None:
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
            await self.close_with(protocol.CLOSE_NOT_FOUND)
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
            await agent_server.asubscribe(
                await self.scope_of(cid), cid, self.channel_name
            )
            self.start_viewing(cid)
            self._keep_ticking()
        # In the group first, then the buffer, then the database: every event is in
        # one of them or arrives after this frame (inflight's docstring).
        snapshot = await inflight.read(cid)
        status = await agent_server.aget_status(await self.scope_of(cid), cid)
        todos = snapshot.todos if snapshot.todos is not None else await _todos(cid)
        data = {**snapshot.to_dict(), "todos": todos}
        self.then.append(protocol.in_flight_frame(cid, snapshot.seq, data))
        self.then += [_frame(m) for m in self.rebase(cid, snapshot.seq)]
        return {
            "conversation": cid,
            "status": status,
            "todos": todos,
            # What to decide, for a client that joins a conversation waiting.
            "interrupt": await _interrupt(cid) if status == "interrupted" else None,
            "protocol": protocol.VERSION,
        }

    async def unsubscribe(self, frame: dict[str, Any]) -> dict[str, Any]:
        cid = protocol.conversation_of(frame)
        await agent_server.aunsubscribe(
            await self.scope_of(cid), cid, self.channel_name
        )
        self.viewed.discard(cid)
        self.sequencers.pop(cid, None)
        return {"conversation": cid}

    async def send_message(self, frame: dict[str, Any]) -> dict[str, Any]:
        cid = protocol.conversation_of(frame)
        submission = await agent_server.aadd_message(
            await self.scope_of(cid, "write"),
            cid,
            frame.get("text"),
            metadata=frame.get("metadata"),
        )
        return {
            "conversation": cid,
            "run_id": submission.run_id,
            "queued": submission.queued,
            "held": submission.held,
            "message_ids": submission.message_ids,
        }

    async def cancel(self, frame: dict[str, Any]) -> dict[str, Any]:
        cid = protocol.conversation_of(frame)
        cancelled = await agent_server.acancel(await self.scope_of(cid, "write"), cid)
        return {"conversation": cid, "cancelled": cancelled}

    async def resume(self, frame: dict[str, Any]) -> dict[str, Any]:
        cid = protocol.conversation_of(frame)
        if "decisions" not in frame:
            raise FrameError("invalid_input", "decisions is required (a list)")
        run_id = await agent_server.aresume(
            await self.scope_of(cid, "write"),
            cid,
            frame["decisions"],
            arguments_hashes=frame.get("arguments_hashes"),
        )
        return {"conversation": cid, "run_id": run_id}

    async def dismiss(self, frame: dict[str, Any]) -> dict[str, Any]:
        cid = protocol.conversation_of(frame)
        run_id = await agent_server.adismiss(await self.scope_of(cid, "write"), cid)
        return {"conversation": cid, "run_id": run_id}

    async def regenerate(self, frame: dict[str, Any]) -> dict[str, Any]:
        cid = protocol.conversation_of(frame)
        submission = await agent_server.aregenerate(
            self.the_scope(), cid, frame.get("message_id")
        )
        return {"conversation": cid, "run_id": submission.run_id}

    async def edit(self, frame: dict[str, Any]) -> dict[str, Any]:
        cid = protocol.conversation_of(frame)
        submission = await agent_server.aedit_and_resend(
            self.the_scope(),
            cid,
            frame.get("message_id"),
            frame.get("text"),
            metadata=frame.get("metadata"),
        )
        return {
            "conversation": cid,
            "run_id": submission.run_id,
            "message_ids": submission.message_ids,
        }

    async def switch_branch(self, frame: dict[str, Any]) -> dict[str, Any]:
        cid = protocol.conversation_of(frame)
        branch = await agent_server.aswitch_branch(
            self.the_scope(), cid, frame.get("message_id"), frame.get("index")
        )
        return {"conversation": cid, "branch": branch}

    async def history(self, frame: dict[str, Any]) -> dict[str, Any]:
        cid = protocol.conversation_of(frame)
        limit = protocol.limit_of(frame, protocol.HISTORY_LIMIT)
        after, before = frame.get("after"), frame.get("before")
        if after is not None and before is not None:
            raise FrameError("invalid_input", "Pass either after or before, not both")
        rows = await database_sync_to_async(_history)(
            await self.scope_of(cid), cid, limit, after=after, before=before
        )
        return {"conversation": cid, "messages": rows}

    async def create_conversation(self, frame: dict[str, Any]) -> dict[str, Any]:
        title = frame.get("title", "")
        if not isinstance(title, str):
            raise FrameError("invalid_input", "title must be a string")
        conversation = await database_sync_to_async(services.create_conversation)(
            self.the_scope(), title=title, metadata=frame.get("metadata")
        )
        return {"conversation": protocol.conversation_json(conversation)}

    async def list_conversations(self, frame: dict[str, Any]) -> dict[str, Any]:
        limit = protocol.limit_of(frame, protocol.LIST_LIMIT)
        cursor = frame.get("cursor")
        if cursor is not None and not isinstance(cursor, str):
            raise FrameError("invalid_input", "cursor must be a string")
        return await database_sync_to_async(_conversations)(
            self.the_scope(), limit, cursor
        )

    async def subscribe_debug(self, frame: dict[str, Any]) -> dict[str, Any]:
        cid = protocol.conversation_of(frame)
        self._staff_only()
        if cid not in self.debugged:
            self._room_for(self.debugged)
            await agent_server.asubscribe_debug(
                self.the_scope(), cid, self.channel_name
            )
            self.debugged.add(cid)
        return {"conversation": cid}

    async def unsubscribe_debug(self, frame: dict[str, Any]) -> dict[str, Any]:
        cid = protocol.conversation_of(frame)
        self._staff_only()
        await agent_server.aunsubscribe_debug(self.the_scope(), cid, self.channel_name)
        self.debugged.discard(cid)
        self.sequencers.pop(f"debug:{cid}", None)
        return {"conversation": cid}

    # Events from the channel layer -----------------------------------------------------
    async def agent_event(self, message: dict[str, Any]) -> None:
        """An ``agent.event`` of a conversation group (or, marked ``debug``, of a
        debug group) as an event frame, in ``seq`` order."""
        if message.get("files"):
            await self._file_event(message)
            return
        cid = message.get("conversation")
        debug = bool(message.get("debug"))
        # Only what this socket asked for and still follows (a message already on
        # its way when the socket unsubscribed is dropped here).
        if self.closed or cid not in (self.debugged if debug else self.conversations):
            return
        await self.order(f"debug:{cid}" if debug else str(cid), message)

    async def deliver(
        self, key: str, messages: list[dict[str, Any]], *, gap: bool
    ) -> None:
        # A gap stands as the client sees it: its resync rule covers the loss.
        for message in messages:
            if self.closed:
                return
            await self.send_json(_frame(message))

    async def socket_tick(self, message: dict[str, Any]) -> None:
        """Every ``RUN_ALIVE_SECONDS``: a ``run_alive`` frame per subscribed
        conversation with an active run, so a client sees a stalled run (its
        heartbeat stops moving) even when no event comes."""
        if self.closed or not self.conversations:
            return
        runs = (
            AgentRun.objects.active()
            .filter(conversation_id__in=list(self.conversations))
            .values("pk", "conversation_id", "status", "started_at", "heartbeat_at")
        )
        async for run in runs:
            cid = str(run["conversation_id"])
            if cid in self.conversations and not self.closed:
                await self.send_json(protocol.run_alive_frame(cid, dict(run)))

    async def follow_files(self, frame: dict[str, Any]) -> dict[str, Any]:
        fid = frame.get("filesystem")
        if type(fid) is not int:
            raise FrameError("invalid_input", "filesystem must be a filesystem's id")
        if fid not in self.files and len(self.files) >= protocol.MAX_SUBSCRIPTIONS:
            raise FrameError("too_many_subscriptions", "Too many filesystems followed")
        row, level = await self.follow_filesystem(fid)
        return {"filesystem": fid, "scope": list(row.key), "access": level}

    async def unfollow_files(self, frame: dict[str, Any]) -> dict[str, Any]:
        fid = frame.get("filesystem")
        if type(fid) is not int:
            raise FrameError("invalid_input", "filesystem must be a filesystem's id")
        await self.unfollow_filesystem(fid)
        return {"filesystem": fid}

    async def _file_event(self, message: dict[str, Any]) -> None:
        """A file event of a filesystem this socket follows (``follow_files``)."""
        data = message.get("data") or {}
        try:
            key = scope_parts(data.get("scope"))
        except Exception:
            return
        for fid, followed in self.files.items():
            if followed == key and not self.closed:
                await self.send_json(
                    {
                        "event": message.get("event"),
                        "filesystem": fid,
                        "data": {"path": data.get("path"), "scope": list(key)},
                    }
                )

    async def filesystem_revoked(self, filesystem_id: int) -> None:
        if not self.closed:
            await self.send_json(
                {"event": "filesystem_revoked", "filesystem": filesystem_id}
            )

    # Helpers ----------------------------------------------------------------------------
    def _staff_only(self) -> None:
        if not getattr(self.user, "is_staff", False):
            raise FrameError("forbidden", "Debug streams are for staff users")

    def _room_for(self, following: set[str]) -> None:
        if len(following) >= protocol.MAX_SUBSCRIPTIONS:
            raise FrameError(
                "too_many_subscriptions",
                f"A socket follows at most {protocol.MAX_SUBSCRIPTIONS} conversations",
            )

    def _keep_ticking(self) -> None:
        if self.ticker is None or self.ticker.done():
            self.ticker = asyncio.ensure_future(self._tick())

    async def _tick(self) -> None:
        # The tick is a message to this socket, so its frames never come between a
        # reply and the frames that follow it.
        while not self.closed:
            await asyncio.sleep(protocol.RUN_ALIVE_SECONDS)
            await self._to_self({"type": "socket.tick"})


HANDLERS: dict[str, Handler] = {
    "subscribe": AgentSocketConsumer.subscribe,
    "unsubscribe": AgentSocketConsumer.unsubscribe,
    "send": AgentSocketConsumer.send_message,
    "cancel": AgentSocketConsumer.cancel,
    "resume": AgentSocketConsumer.resume,
    "dismiss": AgentSocketConsumer.dismiss,
    "regenerate": AgentSocketConsumer.regenerate,
    "edit": AgentSocketConsumer.edit,
    "switch_branch": AgentSocketConsumer.switch_branch,
    "history": AgentSocketConsumer.history,
    "create_conversation": AgentSocketConsumer.create_conversation,
    "list_conversations": AgentSocketConsumer.list_conversations,
    "subscribe_debug": AgentSocketConsumer.subscribe_debug,
    "unsubscribe_debug": AgentSocketConsumer.unsubscribe_debug,
    "follow_files": AgentSocketConsumer.follow_files,
    "unfollow_files": AgentSocketConsumer.unfollow_files,
}
"""Action -> method (``send`` is ``send_message``: a consumer's ``send`` writes to
the socket)."""


def _frame(message: dict[str, Any]) -> dict[str, Any]:
    """A channel-layer event message as the event frame a client reads."""
    frame = {
        "event": message.get("event"),
        "seq": message.get("seq"),
        "conversation": message.get("conversation"),
        "data": message.get("data"),
    }
    if message.get("subagent"):
        frame["subagent"] = message["subagent"]
    if message.get("debug"):
        frame["debug"] = True
    return frame


async def _interrupt(cid: str) -> Any:
    """The conversation's pending interrupt, each action request with its
    ``arguments_hash`` (read after authorization); None when none is."""
    from sagents_django.approvals.records import with_hashes

    value = await (
        AgentState.objects.filter(conversation_id=cid)
        .values_list("state_data__state__interrupt_data", flat=True)
        .afirst()
    )
    return with_hashes(value) if value else None


async def _todos(cid: str) -> list[Any]:
    """The conversation's current todos as stored (read after authorization)."""
    value = await (
        AgentState.objects.filter(conversation_id=cid)
        .values_list("state_data__state__todos", flat=True)
        .afirst()
    )
    return value if isinstance(value, list) else []


def _history(
    scope: Scope, cid: str, limit: int, *, after: Any, before: Any
) -> list[dict[str, Any]]:
    from sagents_django.runtime.publisher import display_message_json

    if services.get_conversation(scope, cid) is None:
        raise NotFound("conversation", cid)
    rows = services.load_display_messages(
        scope, cid, limit=limit, after=after, before=before
    )
    return [display_message_json(row) for row in rows]


def _conversations(scope: Scope, limit: int, cursor: str | None) -> dict[str, Any]:
    # One more than asked tells whether another page follows.
    rows = services.list_conversations(scope, limit=limit + 1, cursor=cursor)
    more = len(rows) > limit
    rows = rows[:limit]
    return {
        "conversations": [protocol.conversation_json(row) for row in rows],
        "next_cursor": services.conversation_cursor(rows[-1]) if more else None,
    }
