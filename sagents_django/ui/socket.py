"""The chat pages' WebSocket: agent events pushed as HTML fragments.

``ws/sagents/html/<conversation>/`` follows one conversation for its page (the
socket is a viewer, like one of the JSON protocol); ``ws/sagents/html/`` follows
the user's conversations for a list (``?list=nav``: the conversation page's sidebar,
``?current=<id>`` the one it shows; else the list page): live titles and the
approvals badge from the newest ones' groups, and the whole list again when the
owner's conversations are created, renamed or deleted anywhere (their owner's
group, ``ui.live_lists``); not a viewer: a list is not watching a turn; ``.../<conversation>/debug/``
is the inspector's debug stream (staff). A conversation's socket also joins the
group of its filesystem scope (``runtime.file_scopes``), so its file panel follows
the files other conversations sharing that scope change (their own file events
come through the conversation's group, in order, and are not drawn twice). Signing in and out, viewers and frame
order are the JSON consumer's (``sockets.AgentConsumerBase``): no signed-in user
closes with 4401 (and so does its session signing out), a conversation outside the
user's scope with 4404, before anything of it is sent.

The database is the truth (invariant 1): the page's script asks for a resync each
time the socket opens (``{"action": "resync", "after": <last row id>}``), and a gap
in ``seq`` that stands after the frames' short wait for order (the channel layer
drops what it cannot deliver) triggers the same resync from here. Rows are keyed by id, so a resync never doubles one. A resync
also redraws the streaming bubble from the in-flight buffer (``runtime.inflight``,
read before the database), and the plan panel from the running turn's latest todos
(the stored state has them only when the turn ends), then skips the events numbered
up to the buffer's ``seq``: a page opened mid-reply shows the text and the plan so
far, then the live events, once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from typing import Any
from urllib.parse import parse_qs

try:
    from channels.db import database_sync_to_async
except ImportError as exc:  # the socket is part of the "channels" extra
    raise ImportError(
        "sagents_django.ui.socket needs Channels: "
        "pip install 'sagents-django[channels]'"
    ) from exc

from sagents_django import protocol, services
from sagents_django.core.exceptions import ConfigurationError
from sagents_django.core.filesystem.scope import scope_to_json
from sagents_django.exceptions import InvalidInput, NotFound
from sagents_django.filesystems.keys import scope_parts
from sagents_django.runtime import agent_server, groups, inflight, layer
from sagents_django.scope import Scope
from sagents_django.sequencing import Sequencer
from sagents_django.sockets import AgentConsumerBase

from . import fragments, live_lists

STREAM_FRAME_SECONDS = 0.1
"""Streamed text is gathered this long into one frame (the runtime batches over
``DELTA_WINDOW_MS`` for the channel layer; a person reads no faster than this, and
a browser re-lays the page once per frame instead of once per token). Any other
fragment sends the gathered text first, so frames keep the order of events."""
logger = logging.getLogger(__name__)

LIST_FOLLOWED = 20
"""Conversations a list follows for their titles and approvals (its newest)."""
MAX_CLIENT_FRAME = 1024


class ChatPageConsumer(AgentConsumerBase):
    conversation: str | None = None
    debug = False
    files_groups: tuple[str, ...] = ()
    """The groups of the conversation's filesystem scope (``notify.file_groups``:
    the site's form of its key, and the text form an upload to it from the shared
    files page is published with)."""
    followed: list[str]
    list_view: live_lists.View = "page"
    """Which list a list socket's page shows (``?list=nav``: the sidebar)."""
    current: str | None = None
    """The conversation the sidebar's page shows (``?current=``)."""
    owner_group: str | None = None
    flusher: asyncio.Task[None] | None = None
    pending: list[str]
    sending: asyncio.Lock
    live: fragments.Live

    async def connect(self) -> None:
        # Subscribed before accepted: once the page sees the socket open, no event
        # can slip between (its resync then covers everything before).
        self.setup()
        self.followed = []
        self.pending = []
        self.live = fragments.Live()
        self.sending = asyncio.Lock()
        if not await self.sign_in():
            return
        kwargs = self.scope["url_route"]["kwargs"]
        self.debug = bool(kwargs.get("debug"))
        scope = self.the_scope()
        cid = kwargs.get("conversation_id")
        try:
            if cid is None:
                await self._follow_list(scope)
            elif self.debug:
                if not self.user.is_staff:
                    await self.refuse(protocol.CLOSE_NOT_FOUND)
                    return
                await agent_server.asubscribe_debug(scope, cid, self.channel_name)
                self.conversation = str(cid)
            else:
                scope = await self.scope_of(cid)  # the user's, or a share's
                await agent_server.asubscribe(scope, cid, self.channel_name)
                self.conversation = str(cid)
                self.start_viewing(self.conversation)
                await self._follow_files(scope, self.conversation)
        except (NotFound, InvalidInput):
            await self.refuse(protocol.CLOSE_NOT_FOUND)
            return
        await self.accept()

    def new_sequencer(self, key: str) -> Sequencer[dict[str, Any]]:
        # The page resyncs as soon as it sees the socket open: a frame before that
        # would be drawn without what the page missed (a late joiner's bubble
        # showing one word, then the whole text). Frames wait for the resync.
        return Sequencer(based=False)

    async def _follow_list(self, scope: Scope) -> None:
        self._read_list_query()
        key = live_lists.scope_owner_key(scope)
        if key is not None:  # created, renamed or deleted, from anywhere
            self.owner_group = groups.owner_group(key)
            await layer.group_add(self.owner_group, self.channel_name)
        rows = await database_sync_to_async(services.list_conversations)(
            scope, limit=LIST_FOLLOWED
        )
        for row in rows:  # their generated titles and approval counts
            await self._follow(str(row.pk))

    async def _follow(self, cid: str) -> None:
        if cid not in self.followed:
            await layer.group_add(groups.conversation_group(cid), self.channel_name)
            self.followed.append(cid)

    def _read_list_query(self) -> None:
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        if query.get("list") == ["nav"]:
            self.list_view = "nav"
        current = (query.get("current") or [""])[0]
        try:
            self.current = str(uuid.UUID(current)) if current else None
        except ValueError:
            self.current = None

    async def _list_changed(self, message: dict[str, Any]) -> None:
        """The owner's conversations changed: the list again, and (the sidebar of
        the conversation renamed elsewhere) the page's title bar."""
        assert self.agent_scope is not None
        cid = str(message.get("conversation") or "")
        change = (message.get("data") or {}).get("change")
        if change == "created":
            await self._follow(cid)
        elif change == "deleted" and cid in self.followed:
            self.followed.remove(cid)
            await layer.group_discard(groups.conversation_group(cid), self.channel_name)
        html = await database_sync_to_async(live_lists.redraw)(
            self.agent_scope, self.list_view, self.current
        )
        if change == "renamed" and self.list_view == "nav" and cid == self.current:
            html += await database_sync_to_async(live_lists.title_bar)(
                self.agent_scope, cid
            )
        await self._emit(html)

    async def _follow_files(self, scope: Scope, cid: str) -> None:
        """Join the group of the conversation's filesystem scope: the file panel
        follows what other conversations sharing those files change."""
        files = await database_sync_to_async(fragments.files_scope)(scope, cid)
        if files is None:
            return
        from sagents_django.sharing.notify import file_groups

        try:
            self.files_groups = tuple(file_groups(scope_parts(files)))
        except ConfigurationError:  # a scope that is no (kind, id) pair: as given
            self.files_groups = (groups.files_group(scope_to_json(files)),)
        for group in self.files_groups:
            await layer.group_add(group, self.channel_name)

    async def disconnect(self, code: int) -> None:
        self.closed = True
        if self.flusher is not None:
            self.flusher.cancel()
            with contextlib.suppress(BaseException):
                await self.flusher
        await super().disconnect(code)
        for cid in self.followed:
            await layer.group_discard(groups.conversation_group(cid), self.channel_name)
        if self.conversation is not None and self.debug:
            await layer.group_discard(
                groups.debug_group(self.conversation), self.channel_name
            )
        for group in self.files_groups:
            await layer.group_discard(group, self.channel_name)
        if self.owner_group is not None:
            await layer.group_discard(self.owner_group, self.channel_name)

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None
    ) -> None:
        """Only ``resync`` is understood; anything else is ignored (the page's
        forms post over HTTP, where CSRF protects them)."""
        if self.closed or self.conversation is None or self.debug:
            return
        if text_data is None or len(text_data) > MAX_CLIENT_FRAME:
            return
        try:
            frame = json.loads(text_data)
        except ValueError:
            return
        if not isinstance(frame, dict) or frame.get("action") != "resync":
            return
        after = frame.get("after")
        if isinstance(after, str) and after.isdigit() and len(after) < 19:
            after = int(after)
        if isinstance(after, bool) or not isinstance(after, int) or after < 1:
            after = None
        await self._resync(after)

    async def _resync(self, after: Any) -> None:
        assert self.conversation is not None
        # The buffer before the database: what an event numbered up to its seq did
        # is in one or the other (runtime.inflight).
        snapshot = await inflight.read(self.conversation)
        self.live.status = None  # read again: events may have been missed
        self.live.tree_read = False  # (a switch of branches among them)
        html = await database_sync_to_async(fragments.resync)(
            self.the_scope(self.conversation),
            self.conversation,
            after,
            in_flight=snapshot,
        )
        await self._emit(html)
        held = self.rebase(self.conversation, snapshot.seq)
        if held:
            await self.deliver(self.conversation, held, gap=False)

    async def _emit(self, html: str, *, stream: bool = False) -> None:
        if not html or self.closed:
            return
        if stream:
            self.pending.append(html)
            if self.flusher is None or self.flusher.done():
                self.flusher = asyncio.ensure_future(self._flush_later())
            return
        async with self.sending:
            await self._flush_locked()
            if not self.closed:
                await self.send(text_data=html)

    async def _flush_later(self) -> None:
        await asyncio.sleep(STREAM_FRAME_SECONDS)
        async with self.sending:
            await self._flush_locked()

    async def _flush_locked(self) -> None:
        if self.pending and not self.closed:
            html, self.pending = "".join(self.pending), []
            await self.send(text_data=html)

    async def agent_event(self, message: dict[str, Any]) -> None:
        if self.closed or self.agent_scope is None:
            return
        if self.debug:
            if message.get("debug"):
                await self._emit(fragments.for_debug_event(message))
            return
        if message.get("debug"):
            return
        if message.get("files"):
            await self._files_changed(message)
            return
        if message.get("list"):
            if self.conversation is None:
                await self._list_changed(message)
            return
        if self.conversation is None:
            html = await database_sync_to_async(fragments.for_list_event)(
                self.agent_scope, message
            )
            await self._emit(html)
            return
        if message.get("conversation") != self.conversation:
            return
        await self.order(self.conversation, message)

    async def _files_changed(self, message: dict[str, Any]) -> None:
        """A file of the shared scope changed: the panel is drawn again from the
        database (whole, so the order of these events does not matter)."""
        if self.conversation is None or self.agent_scope is None:
            return
        if message.get("conversation") == self.conversation and not message.get(
            "subagent"
        ):
            return  # the conversation's own group brought it, in order
        html = await database_sync_to_async(fragments.file_panel)(
            self.the_scope(self.conversation), self.conversation
        )
        await self._emit(html)

    async def deliver(
        self, key: str, messages: list[dict[str, Any]], *, gap: bool
    ) -> None:
        if gap:
            # Numbers given up on: what they did is in the database.
            await self._resync(None)
            return
        for message in messages:
            if self.closed:
                return
            if message.get("event") == "llm_deltas":
                # No database read: rendered here, gathered into fewer frames.
                await self._emit(
                    fragments.for_event(self.the_scope(self.conversation), message),
                    stream=True,
                )
                continue
            html = await database_sync_to_async(fragments.for_event)(
                self.the_scope(self.conversation), message, self.live
            )
            await self._emit(html)
