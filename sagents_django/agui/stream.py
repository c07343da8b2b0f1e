"""One AG-UI stream of a conversation: join, resync, then live events, in ``seq``.

How it joins is how our JSON socket does (``consumers.AgentSocketConsumer``): the
stream's channel joins the conversation's group, then reads the in-flight buffer
(the message a run is streaming and the number ``S`` of the last event), then the
database. Every event is in one of those or arrives after; live events numbered
up to ``S`` are dropped, the rest go out in ``seq`` order (``sequencing``).

What goes out first:

- ``RUN_STARTED``;
- a resync, unless the client says (``Last-Event-ID``) it already has every event
  up to ``S`` and no message is streaming: ``MESSAGES_SNAPSHOT`` (the transcript) and ``STATE_SNAPSHOT``
  (todos, files), then the message in flight re-opened with its text so far. AG-UI
  clients replace their messages and state with a snapshot, so what they had is
  neither lost nor doubled;
- when the run the stream follows has already ended (a fast run, a reconnect after
  the end), its end, read from the database.

A gap in the numbers (an event the channel layer dropped) is repaired by the
stream, not the client (an AG-UI client cannot see it): the same resync again.
The run is ours, not the request's: a client that leaves stops the stream, never
the run, and a reconnect (to any web process) picks the run up where it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Final

from sagents_django.exceptions import NotFound
from sagents_django.models import ACTIVE_RUN_STATUSES, AgentRun
from sagents_django.runtime import groups, inflight, layer
from sagents_django.runtime.database import db
from sagents_django.scope import Scope, scope_class
from sagents_django.sequencing import Sequencer
from sagents_django.sharing.access import scope_for

from . import snapshot as snapshots
from .translate import AgUiEvent, Translator

logger = logging.getLogger(__name__)

KEEPALIVE_SECONDS: Final = 15.0
"""A quiet stream sends an SSE comment this often (proxies close idle
connections)."""
CHECK_SECONDS: Final = 2.0
"""A stream that hears nothing for this long checks that the run it follows is
still running: its last events could be the ones the channel layer dropped."""

LINGER_SECONDS: Final = 1.0
"""How long a stream whose run ended waits for the event that closes it."""

Batch = tuple[int | None, list[AgUiEvent]]
"""AG-UI events and the ``seq`` of the event of ours they came from (None: none,
as for a keep-alive, which is an empty list)."""


@dataclass(kw_only=True, slots=True)
class Join:
    """How a stream starts."""

    scope: Scope
    conversation: Any
    translator: Translator
    last_event_id: int | None = None
    """The client's ``Last-Event-ID`` (None: a new stream, which always resyncs)."""


async def stream(join: Join) -> AsyncIterator[Batch]:
    """The stream's batches, until the run it follows ends (or the client goes)."""
    cid = str(join.conversation.pk)
    channel_layer = layer.get_layer()
    channel = await channel_layer.new_channel()
    # In the group, not a viewer: a stream that ends would announce the last
    # viewer's leaving (agent_shutdown) with a number of its own, and a client that
    # missed nothing could never say so (Last-Event-ID).
    group = groups.conversation_group(cid)
    await layer.group_add(group, channel)
    try:
        joined = await inflight.read(cid)
        snap = await db(snapshots.read)(join.scope, join.conversation)
        ended = await _ended(join.translator.follows or snap.run_id)
        yield joined.seq, _opening(join, joined, snap)
        translator = join.translator
        if not translator.finished:
            if translator.follows is None and snap.run_id is None:
                # A reconnect with nothing running: the conversation as it rests.
                status = "interrupted" if snap.interrupt else "completed"
                yield None, translator.finish(status, interrupt=snap.interrupt)
            elif ended is not None:
                yield None, _end_from(translator, ended, snap)
            elif translator.follows is None:
                translator.follows = snap.run_id
        sequencer: Sequencer[dict[str, Any]] = Sequencer()
        sequencer.rebase(joined.seq)
        # Past the run's end, the stream waits a moment for the status_changed
        # that closes it, so the client's last id is the conversation's last.
        settled = translator.finished
        linger_until: float | None = None
        quiet_since = time.monotonic()
        while not settled:
            now = time.monotonic()
            if translator.finished:
                linger_until = linger_until or now + LINGER_SECONDS
                if now >= linger_until:
                    break
            due = sequencer.due()
            wait = CHECK_SECONDS if due is None else due
            if linger_until is not None:
                wait = min(wait, linger_until - now)
            try:
                async with asyncio.timeout(wait):
                    message = await channel_layer.receive(channel)
            except TimeoutError:
                if translator.finished:
                    continue
                if sequencer.due() == 0:
                    # Events were lost (the layer delivers at most once), and an
                    # AG-UI client cannot tell: the stream resyncs for it.
                    seq, events = await _resync(join)
                    yield seq, events
                    for held in sequencer.rebase(seq):
                        yield held.get("seq"), translator.translate(held)
                    continue
                if time.monotonic() - quiet_since >= KEEPALIVE_SECONDS:
                    quiet_since = time.monotonic()
                    yield None, []  # a keep-alive comment
                yield None, await _check_run(join)
                continue
            quiet_since = time.monotonic()
            if message.get("type") == "share.changed" and await _share_gone(join):
                # Revoked: nothing more of the thread may reach this client.
                yield None, [{"type": "RUN_ERROR", "message": "No such thread"}]
                return
            if message.get("type") != "agent.event":
                continue
            for ready in sequencer.push(message.get("seq"), message):
                yield ready.get("seq"), translator.translate(ready)
                if translator.finished and ready.get("event") == "status_changed":
                    settled = True
                    break
    finally:
        with contextlib.suppress(Exception):
            await layer.group_discard(group, channel)


def _opening(join: Join, joined: Any, snap: snapshots.Snapshot) -> list[AgUiEvent]:
    return [join.translator.started(), *_resync_events(join, joined, snap)]


async def _resync(join: Join) -> tuple[int, list[AgUiEvent]]:
    """After a loss: the message in flight closed, the snapshots, the message
    re-opened as far as it came; the number they cover."""
    joined = await inflight.read(str(join.conversation.pk))
    snap = await db(snapshots.read)(join.scope, join.conversation)
    out = join.translator.close_message()
    join.last_event_id = None  # a resync always sends the snapshots
    out += _resync_events(join, joined, snap)
    ended = await _ended(join.translator.follows)
    if ended is not None:
        out += _end_from(join.translator, ended, snap)
    return joined.seq, out


def _resync_events(
    join: Join, joined: Any, snap: snapshots.Snapshot
) -> list[AgUiEvent]:
    translator = join.translator
    todos = joined.todos if joined.todos is not None else snap.todos
    translator.state.todos, translator.state.files = list(todos), list(snap.files)
    translator.known_messages |= snap.user_ids
    out: list[AgUiEvent] = []
    # The buffer restarts at run_started: what it holds is the running run's.
    streaming = bool(
        joined.run_id and (joined.text or joined.thinking or joined.tool_calls)
    )
    # A message in flight is re-opened under an id of this stream's, so the one
    # the client holds from before goes with a snapshot even if it missed nothing.
    if streaming or join.last_event_id != joined.seq:
        out.append({"type": "MESSAGES_SNAPSHOT", "messages": snap.messages})
        out.append({"type": "STATE_SNAPSHOT", "snapshot": translator.state.to_dict()})
    if streaming:
        out += translator.reopen(
            message_id=f"{joined.run_id}.{joined.seq}.live",
            text=joined.text,
            thinking=joined.thinking,
            tool_calls=joined.tool_calls,
        )
    return out


async def _ended(run_id: str | None) -> dict[str, Any] | None:
    """The run's end as stored (None: still active, or no run)."""
    if run_id is None:
        return None
    row = await (
        AgentRun.objects.filter(pk=run_id)
        .exclude(status__in=ACTIVE_RUN_STATUSES)
        .values("status", "error", "next_run_id")
        .afirst()
    )
    return dict(row) if row is not None else None


def _end_from(
    translator: Translator, ended: dict[str, Any], snap: snapshots.Snapshot
) -> list[AgUiEvent]:
    next_run = ended.get("next_run_id")
    if ended["status"] == "completed" and next_run and translator.waits_for_next:
        translator.follows = str(next_run)  # our message: the next run answers it
        return []
    return translator.finish(
        ended["status"], interrupt=snap.interrupt, error=ended.get("error")
    )


async def _share_gone(join: Join) -> bool:
    """Whether a stream followed through a share has lost it (``share.changed``)."""
    if getattr(join.scope, "lent", None) is None:
        return False  # the owner's own stream
    own = await db(scope_class().for_user)(join.scope.user)
    try:
        await db(scope_for)(own, join.conversation.pk, access="read")
    except NotFound:
        return True
    return False


async def _check_run(join: Join) -> list[AgUiEvent]:
    """At a quiet moment: the run's end, when its last events never came."""
    translator = join.translator
    ended = await _ended(translator.follows)
    if ended is None:
        return []
    snap = await db(snapshots.read)(join.scope, join.conversation)
    logger.info("AG-UI stream of %s: run ended unannounced", join.conversation.pk)
    out = translator.close_message()
    out.append({"type": "MESSAGES_SNAPSHOT", "messages": snap.messages})
    return out + _end_from(translator, ended, snap)
