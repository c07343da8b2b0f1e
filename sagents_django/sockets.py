"""What both WebSocket consumers share: signing in and out, viewers, frame order.

The JSON protocol's socket (``consumers.AgentSocketConsumer``) and the chat pages'
(``ui.socket.ChatPageConsumer``) sign in the same way (no channel layer closes with
1011, no signed-in user with 4401), close the same way when the session that
signed them in signs out (4401, ``sign_out.close_sockets``), stay viewers
of what they follow while open (viewer entries expire unless renewed), and put each
conversation's frames back in ``seq`` order (``sequencing``) before they show them.
A conversation shared with the user is used through the scope its share lends
(``scope_of``); when its shares change (``share.changed``, ``sharing.notify``) the
socket asks again, and closes (4404) when the share is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

try:
    from channels.db import database_sync_to_async
    from channels.generic.websocket import AsyncWebsocketConsumer
except ImportError as exc:  # the socket is part of the "channels" extra
    raise ImportError(
        "sagents_django.sockets needs Channels: pip install 'sagents-django[channels]'"
    ) from exc

from sagents_django import protocol
from sagents_django.runtime import groups, layer, viewers
from sagents_django.scope import Scope, scope_class
from sagents_django.sequencing import Sequencer

logger = logging.getLogger(__name__)


class AgentConsumerBase(AsyncWebsocketConsumer):
    """Sign-in, sign-out, viewers and frame order, for both sockets.

    Hooks: ``deliver(key, messages, gap=...)`` sends a conversation's event
    messages once they are in order (``gap``: numbers before them were given up).
    Frames are ordered per key (a conversation id; ``"debug:" + id`` for a debug
    stream, which counts apart). Every delivery runs in a message handler, so a
    reply and the frames that must follow it are never split by an event: held
    frames are released by a message the socket sends itself (``sequence.due``).
    """

    agent_scope: Scope | None = None
    user: Any = None
    closed = False
    accepted = False
    viewed: set[str]
    """Conversations this socket is a viewer of (renewed while it is open)."""
    sequencers: dict[str, Sequencer[dict[str, Any]]]
    timers: dict[str, asyncio.Task[None]]
    refresher: asyncio.Task[None] | None = None
    session_group: str | None = None
    lent: dict[str, Scope]
    """The scopes shares lend this socket, by conversation (``scope_of``)."""
    files: dict[int, tuple[str, str]]
    """Filesystems this socket follows (``follow_files``), by id: their key."""

    def setup(self) -> None:
        self.viewed = set()
        self.sequencers = {}
        self.timers = {}
        self.lent = {}
        self.files = {}

    async def accept(self, subprotocol: str | None = None, headers: Any = None) -> None:
        self.accepted = True
        await super().accept(subprotocol, headers)

    async def sign_in(self, user: Any = None) -> bool:
        """Check the channel layer and the user, and join the session's group;
        False: the socket is closed (with the code that says why). ``user``: one a
        bearer token signed in (``agui.socket``), not the session's."""
        if self.channel_layer is None:
            # Nothing could reach this socket (check W002 says so at start-up).
            logger.error("No channel layer: set CHANNEL_LAYERS for live events")
            await self.refuse(protocol.CLOSE_NO_CHANNEL_LAYER)
            return False
        by_token = user is not None
        user = user if by_token else self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.refuse(protocol.CLOSE_UNAUTHENTICATED)
            return False
        self.user = user
        self.agent_scope = await database_sync_to_async(scope_class().for_user)(user)
        key = (
            None
            if by_token
            else getattr(self.scope.get("session"), "session_key", None)
        )
        if key:
            self.session_group = groups.session_group(key)
            await layer.group_add(self.session_group, self.channel_name)
        return True

    async def refuse(self, code: int) -> None:
        # Accepted, then closed: a refusal before accepting is an HTTP 403 with
        # no close code, and clients should be told why.
        if not self.accepted:
            await self.accept()
        await self.close_with(code)

    async def close_with(self, code: int) -> None:
        self.closed = True
        await self.close(code=code)

    async def session_signed_out(self, message: dict[str, Any]) -> None:
        """The session this socket was signed in by signed out: the socket would
        otherwise go on acting for someone who left."""
        if not self.closed:
            await self.close_with(protocol.CLOSE_UNAUTHENTICATED)

    async def disconnect(self, code: int) -> None:
        self.closed = True
        for task in [self.refresher, *self.timers.values()]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        if self.session_group is not None:
            await layer.group_discard(self.session_group, self.channel_name)
        for cid in list(self.viewed):
            await self.stop_viewing(cid)
        for fid in list(self.files):
            await self.unfollow_filesystem(fid)

    # Viewers --------------------------------------------------------------------
    def start_viewing(self, cid: str) -> None:
        """``cid`` was subscribed (its group joined, its viewer entry added)."""
        self.viewed.add(cid)
        if self.refresher is None or self.refresher.done():
            self.refresher = asyncio.ensure_future(self._refresh())

    async def stop_viewing(self, cid: str) -> None:
        self.viewed.discard(cid)
        self.sequencers.pop(cid, None)
        await layer.group_discard(groups.conversation_group(cid), self.channel_name)
        await viewers.release(cid, self.channel_name)

    async def _refresh(self) -> None:
        """Renew this socket's viewer entries while it lives (they expire, so a
        daphne that dies without disconnecting leaves no viewer behind)."""
        while not self.closed:
            await asyncio.sleep(viewers.REFRESH_SECONDS)
            await viewers.arefresh(self.viewed, self.channel_name)

    # Frame order ----------------------------------------------------------------
    def rebase(self, key: str, seq: int) -> list[dict[str, Any]]:
        """A resync covered ``key``'s events up to ``seq``; the held messages that
        now follow in order."""
        return self._sequencer(key).rebase(seq)

    async def order(self, key: str, message: dict[str, Any]) -> None:
        sequencer = self._sequencer(key)
        ready = sequencer.push(message.get("seq"), message)
        if not ready and message.get("seq") not in sequencer.held:
            logger.debug("Dropped frame %s of %s: late", message.get("seq"), key)
        timer = self.timers.get(key)
        if sequencer.due() is not None and (timer is None or timer.done()):
            self.timers[key] = asyncio.ensure_future(self._due_later(key))
        if ready:
            await self.deliver(key, ready, gap=False)

    async def sequence_due(self, message: dict[str, Any]) -> None:
        """Held frames whose wait may be over (sent by this socket to itself)."""
        key = str(message.get("key"))
        self.timers.pop(key, None)
        sequencer = self.sequencers.get(key)
        left = sequencer.due() if sequencer is not None else None
        if self.closed or sequencer is None or left is None:
            return
        if left > 0:
            self.timers[key] = asyncio.ensure_future(self._due_later(key))
            return
        await self.deliver(key, sequencer.release(), gap=True)

    async def _due_later(self, key: str) -> None:
        sequencer = self.sequencers.get(key)
        left = sequencer.due() if sequencer is not None else None
        await asyncio.sleep(left or 0)
        await self._to_self({"type": "sequence.due", "key": key})

    async def _to_self(self, message: dict[str, Any]) -> None:
        """A message to this socket's own channel, handled in turn with the rest."""
        try:
            await self.channel_layer.send(self.channel_name, message)
        except Exception:
            # The layer is down: the next frame that arrives retries the timer.
            logger.warning("Could not reach socket %s", self.channel_name)

    def _sequencer(self, key: str) -> Sequencer[dict[str, Any]]:
        sequencer = self.sequencers.get(key)
        if sequencer is None:
            sequencer = self.sequencers[key] = self.new_sequencer(key)
        return sequencer

    def new_sequencer(self, key: str) -> Sequencer[dict[str, Any]]:
        """The sequencer of ``key``'s frames, made at its first frame or resync."""
        return Sequencer()

    async def deliver(
        self, key: str, messages: list[dict[str, Any]], *, gap: bool
    ) -> None:
        raise NotImplementedError

    def the_scope(self, cid: Any = None) -> Scope:
        """The user's scope, or, for conversation ``cid`` shared with them, the
        scope its share lent (``scope_of``)."""
        assert self.agent_scope is not None  # set in sign_in for a signed-in user
        if cid is not None:
            return self.lent.get(str(cid), self.agent_scope)
        return self.agent_scope

    async def scope_of(self, cid: Any, access: str = "read") -> Scope:
        """The scope to use on conversation ``cid`` (the user's own, or the one
        a share lends, kept for ``share.changed``); NotFound otherwise."""
        from sagents_django.sharing.access import scope_for

        scope = await database_sync_to_async(scope_for)(
            self.the_scope(), cid, access=access
        )
        if scope.lent is not None:
            self.lent[str(scope.lent.conversation_id)] = scope
        return scope

    # Filesystems shared with the user -----------------------------------------------
    async def follow_filesystem(self, filesystem_id: Any) -> tuple[Any, str]:
        """Follow the file events of a filesystem ``scope`` may read (its own, or
        one shared with it: ``sharing.filesystems``); (the row, the access).
        NotFound otherwise."""
        from sagents_django.sharing import filesystems, notify

        row, level = await database_sync_to_async(filesystems.open_filesystem)(
            self.the_scope(), filesystem_id
        )
        if filesystem_id not in self.files:
            self.files[filesystem_id] = row.key
            for group in notify.file_groups(row.key):
                await layer.group_add(group, self.channel_name)
        return row, level

    async def unfollow_filesystem(self, filesystem_id: Any) -> None:
        from sagents_django.sharing import notify

        key = self.files.pop(filesystem_id, None)
        if key is None:
            return
        if key in self.files.values():
            return  # the same files followed under another id: cannot happen
        for group in notify.file_groups(key):
            await layer.group_discard(group, self.channel_name)

    async def files_share_changed(self, message: dict[str, Any]) -> None:
        """A filesystem's shares changed: each one this socket follows is asked
        again, and stops (``filesystem_revoked``) when the user may no longer
        read it."""
        from sagents_django.sharing.filesystems import may_follow

        key = tuple(message.get("filesystem") or ())
        for fid, followed in list(self.files.items()):
            if followed != key or self.closed:
                continue
            if not await database_sync_to_async(may_follow)(self.the_scope(), fid):
                await self.unfollow_filesystem(fid)
                await self.filesystem_revoked(fid)

    async def filesystem_revoked(self, filesystem_id: int) -> None:
        """Hook: the socket stopped following a filesystem (its share is gone)."""

    async def share_changed(self, message: dict[str, Any]) -> None:
        """The shares of a conversation changed: a socket following it through a
        share asks again, and closes when nothing is left."""
        cid = str(message.get("conversation"))
        if self.closed or cid not in self.lent:
            return
        from sagents_django.exceptions import NotFound

        del self.lent[cid]
        try:
            await self.scope_of(cid)
        except NotFound:
            if cid in self.viewed:  # still followed: nothing more of it may come
                await self.close_with(protocol.CLOSE_NOT_FOUND)
