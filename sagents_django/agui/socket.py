"""The AG-UI events over a WebSocket: ``ws/sagents/agui/``.

The same streams as the HTTP endpoint (``stream.stream``), several threads on one
socket, signed in as our JSON socket is (the Django session; ``sockets``) or with
the HTTP endpoint's bearer token (``tokens``) in the subprotocol list:
``new WebSocket(url, ["agui", "bearer.<base64url token>"])``. The socket answers
``agui`` (never the token). A token that is not valid (forged, expired, revoked by
a password change, its user inactive) closes the socket with 4401, whatever
session the request also carries; a valid one signs in its user, and the socket
closes with 4401 when the token expires. The subprotocol, not a first ``auth``
frame: the user is known before the socket is accepted, so no socket is ever open
without one, and no timeout is needed for a client that never says who it is.
Client frames (JSON objects, at most ``protocol.MAX_FRAME_BYTES``):

- ``{"action": "run", "input": RunAgentInput}``: what ``POST agui/`` does;
- ``{"action": "connect", "threadId", "lastEventId"?, "runId"?}``: what
  ``GET agui/<threadId>/`` does (``lastEventId``: the last ``seq`` received);
- ``{"action": "leave", "threadId"}``: stop following (the run goes on).

Every AG-UI event comes as ``{"threadId", "seq", "event"}``: ``seq`` is the number of
the event of ours it came from (null for none); an event of ours that has no AG-UI
counterpart sends ``{"threadId", "seq"}`` alone. An error is ``{"error": {"code",
"message"}, "threadId"?}``, with the HTTP endpoint's codes, and changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from sagents_django import protocol, services
from sagents_django.core.exceptions import SagentsError
from sagents_django.exceptions import Conflict, NotFound
from sagents_django.protocol import FrameError
from sagents_django.runtime.database import db
from sagents_django.sharing.access import scope_for
from sagents_django.sockets import AgentConsumerBase

from . import inputs, runs, tokens
from .stream import Join, stream
from .translate import Translator

MAX_THREADS = 20
"""Threads one socket follows at once."""


class AgUiSocketConsumer(AgentConsumerBase):
    """``ws/sagents/agui/``: AG-UI events of the threads this socket follows."""

    following: dict[str, asyncio.Task[None]]

    answer: str | None = None
    """The subprotocol answered (``agui`` when the client offered it)."""
    expiry: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        self.setup()
        self.following = {}
        offered = self.scope.get("subprotocols") or []
        self.answer = tokens.SUBPROTOCOL if tokens.SUBPROTOCOL in offered else None
        token = tokens.from_subprotocols(offered)
        if token is None:
            await self.accept()
            await self.sign_in()
            return
        user = await db(tokens.user_for)(token)
        if user is None:
            await self.refuse(protocol.CLOSE_UNAUTHENTICATED)
            return
        await self.accept()
        if await self.sign_in(user=user):
            left = tokens.seconds_left(token)
            if left is not None:
                self.expiry = asyncio.ensure_future(self._expire(left))

    async def accept(self, subprotocol: str | None = None, headers: Any = None) -> None:
        await super().accept(subprotocol or self.answer, headers)

    async def _expire(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        await self._to_self({"type": "token.expired"})

    async def token_expired(self, message: dict[str, Any]) -> None:
        """The bearer token this socket signed in with expired."""
        if not self.closed:
            await self.close_with(protocol.CLOSE_UNAUTHENTICATED)

    async def disconnect(self, code: int) -> None:
        tasks, self.following = list(self.following.values()), {}
        if self.expiry is not None:
            tasks.append(self.expiry)
        for task in tasks:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        await super().disconnect(code)

    async def receive(
        self,
        text_data: str | None = None,
        bytes_data: bytes | None = None,
        **kwargs: Any,
    ) -> None:
        if self.closed:
            return
        thread: str | None = None
        try:
            frame = protocol.parse_frame(text_data, bytes_data)
            thread, join = await self._join(frame)
        except FrameError as exc:
            await self._error(exc.code, str(exc), thread)
        except inputs.Rejected as exc:
            await self._error(exc.code, str(exc), thread)
        except NotFound:
            await self._error("not_found", "No such thread", thread)
        except Conflict as exc:
            await self._error("conflict", str(exc), thread)
        except (SagentsError, ValueError) as exc:
            await self._error("invalid_input", str(exc), thread)
        else:
            if join is not None:
                self._follow(thread, join)

    async def _join(self, frame: dict[str, Any]) -> tuple[str | None, Join | None]:
        action = frame.get("action")
        if action == "leave":
            thread = inputs.thread_id(frame.get("threadId"))
            task = self.following.pop(thread, None)
            if task is not None:
                task.cancel()
            return thread, None
        if len(self.following) >= MAX_THREADS:
            raise FrameError("too_many_subscriptions", f"At most {MAX_THREADS} threads")
        if action == "run":
            run_input = inputs.from_object(frame.get("input"))
            return run_input.thread_id, await db(runs.start)(
                self.the_scope(), run_input
            )
        if action == "connect":
            thread = inputs.thread_id(frame.get("threadId"))
            last, run_id = frame.get("lastEventId"), frame.get("runId") or ""
            if last is not None and (
                isinstance(last, bool) or not isinstance(last, int)
            ):
                raise FrameError("invalid_input", "lastEventId must be an integer")
            if not isinstance(run_id, str) or len(run_id) > inputs.MAX_ID_CHARS:
                raise FrameError("invalid_input", "runId must be a short string")
            scope = await db(scope_for)(self.the_scope(), thread, access="read")
            conversation = await db(services.get_conversation)(scope, thread)
            if conversation is None:
                raise NotFound("thread")
            translator = Translator(thread_id=thread, run_id=run_id or f"{thread}.join")
            return thread, Join(
                scope=scope,
                conversation=conversation,
                translator=translator,
                last_event_id=last,
            )
        raise FrameError("unknown_action", "action must be run, connect or leave")

    def _follow(self, thread: str | None, join: Join) -> None:
        assert thread is not None
        previous = self.following.pop(thread, None)
        if previous is not None:
            previous.cancel()  # one stream per thread: the newer one wins
        self.following[thread] = asyncio.ensure_future(self._pump(thread, join))

    async def _pump(self, thread: str, join: Join) -> None:
        try:
            async for seq, events in stream(join):
                if not events and seq is not None:
                    # An event of ours with no AG-UI counterpart: its number still
                    # counts (what a reconnect's lastEventId says).
                    await self._send({"threadId": thread, "seq": seq})
                for event in events:
                    await self._send({"threadId": thread, "seq": seq, "event": event})
        finally:
            if self.following.get(thread) is asyncio.current_task():
                del self.following[thread]

    async def _send(self, frame: dict[str, Any]) -> None:
        text = json.dumps(frame, ensure_ascii=False, separators=(",", ":"))
        await self.send(text_data=text)

    async def _error(self, code: str, message: str, thread: str | None) -> None:
        frame: dict[str, Any] = {"error": {"code": code, "message": message}}
        if thread is not None:
            frame["threadId"] = thread
        await self._send(frame)

    async def deliver(
        self, key: str, messages: list[dict[str, Any]], *, gap: bool
    ) -> None:
        """Unused: each stream orders its own events (``stream.stream``)."""
