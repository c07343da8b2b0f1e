"""A channel layer that loses a tenth of its group sends, and a client that follows
docs/protocol.md's "Sequence and resync" (a gap or a quiet spell: subscribe again,
then read ``history``): the client still ends with exactly the database's rows, and
the streamed text it shows is always the start of the reply (never doubled), picks
up from the ``in_flight`` text after a resync, and is the message whole when the
message completes without a gap.

The turns run inline (in this process) over both layers, the in-memory one and
Redis pub/sub, each with a subclass that drops (``tests.runtime.dropping``)."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from sagents_django.models import DisplayMessage
from sagents_django.runtime.executors import wait_inline
from sagents_django.runtime.publisher import display_message_json
from tests.fakes.openai_server import reply, tool_call
from tests.runtime import stacks
from tests.runtime.follow import EMBEDDED, new_conversation, no_active_runs
from tests.runtime.ws_client import Socket, connect

pytestmark = pytest.mark.django_db(transaction=True)

QUIET = 0.5
"""Seconds of silence after which the client checks it has missed nothing."""
TEXTS = [
    " ".join(f"turn{turn}-word{n:02d}" for n in range(50)) + "." for turn in range(4)
]


@pytest.fixture(params=["memory", "redis"])
async def lossy(request: Any, settings: Any, fake_llm: Any) -> Any:
    """The fake provider of a site whose channel layer drops 10% of group sends."""
    if request.param == "redis":
        layer_settings = {
            **stacks.redis_layer(),
            "BACKEND": "tests.runtime.dropping.DroppingRedisPubSubChannelLayer",
        }
    else:
        layer_settings = {
            "BACKEND": "tests.runtime.dropping.DroppingInMemoryChannelLayer"
        }
    layer_settings["CONFIG"] = {
        **layer_settings.get("CONFIG", {}),
        "drop_rate": 0.1,
        "seed": 11,
    }
    settings.CHANNEL_LAYERS = {"default": layer_settings}
    settings.SAGENTS = {
        **EMBEDDED,
        "MODEL": fake_llm.model,
        "MODEL_PARAMS": dict(fake_llm.model_params),
    }
    yield fake_llm
    assert await asyncio.to_thread(wait_inline, 30)
    assert await no_active_runs(30)


class Mirror:
    """A client's copy of one conversation, kept as docs/protocol.md says."""

    def __init__(self, sock: Socket, conversation: str) -> None:
        self.sock = sock
        self.cid = conversation
        self.rows: dict[str, dict[str, Any]] = {}
        self.stream = ""
        self.last: int | None = None
        self.status = ""
        self.awaiting_in_flight = False
        self.syncing = False
        self.probe_from: int | None = None
        self.clean_probe = False
        self.gaps = 0
        self.probes_that_missed = 0
        """Quiet-spell checks whose ``in_flight`` showed events missed (the socket
        holds frames after a lost one for a moment, so a client that checks sooner
        than that finds the loss this way instead of by a gap)."""
        self.whole_messages: list[str] = []
        """Messages whose streamed text was checked whole against them."""
        self.in_flight_texts: list[str] = []
        self.resumed = False
        self.continued = 0
        """Deltas appended to a stream resumed from a non-empty ``in_flight``."""
        self._ids = itertools.count(1)

    async def request(self, action: str, **fields: Any) -> None:
        frame = {
            "action": action,
            "id": f"m{next(self._ids)}",
            "conversation": self.cid,
        }
        await self.sock.communicator.send_json_to({**frame, **fields})

    async def resync(self) -> None:
        self.awaiting_in_flight = self.syncing = True
        await self.request("subscribe")

    async def follow(self, timeout: float = 60) -> None:
        """Handle frames until the conversation is idle and a quiet check finds
        nothing missed."""
        async with asyncio.timeout(timeout):
            while True:
                # (receive_output's own timeout would stop the consumer.)
                if await self.sock.communicator.receive_nothing(QUIET):
                    if self.syncing:
                        continue
                    if self.clean_probe and self.status != "running":
                        return
                    self.probe_from = self.last
                    await self.resync()
                    continue
                output = await self.sock.communicator.receive_output(5)
                await self.handle(json.loads(output["text"]))

    async def handle(self, frame: dict[str, Any]) -> None:
        if "reply" in frame:
            assert frame["ok"], frame
            if frame["reply"] == "subscribe":
                self.status = frame["status"]
                await self.request("history")
            elif frame["reply"] == "history":
                for row in frame["messages"]:
                    self.rows[row["id"]] = row
                self.syncing = False
            return
        if frame.get("conversation") != self.cid or "seq" not in frame:
            return  # run_alive has no seq: it is not counted
        seq, event, data = frame["seq"], frame["event"], frame["data"]
        if event == "in_flight":
            self.awaiting_in_flight = False
            if self.probe_from is not None:
                self.clean_probe = seq == self.probe_from
                self.probes_that_missed += seq != self.probe_from
                self.probe_from = None
            self.stream = data["text"]
            self.resumed = bool(self.stream)
            self.in_flight_texts.append(self.stream)
            self.last = seq
            return
        if self.awaiting_in_flight:
            return  # older than the in_flight frame on its way
        self.clean_probe = False
        if self.last is not None and seq != self.last + 1:
            self.gaps += 1
            await self.resync()
            return
        self.last = seq
        if frame.get("subagent"):
            return
        if event == "llm_deltas":
            self.stream += "".join(d.get("content", "") for d in data["deltas"])
            # The start of a reply: nothing doubled, nothing skipped.
            assert any(text.startswith(self.stream) for text in TEXTS), self.stream
            self.continued += self.resumed
        elif event in ("llm_message", "run_started", "run_finished"):
            self.stream, self.resumed = "", False
        elif event == "status_changed":
            self.status = "running" if data["status"] == "running" else "idle"
        elif event in (
            "display_message_saved",
            "display_message_updated",
            "message_queued",
        ):
            row = data["display_message"]
            self.rows[row["id"]] = row
            if event == "display_message_saved" and row["message_type"] == "assistant":
                # The reply's row, met in order: it takes the place of the text
                # streamed (from the deltas, or an in_flight and the deltas after).
                if row["content_type"] == "text":
                    assert self.stream == row["content"]["text"]  # nothing missing
                    self.whole_messages.append(self.stream)
                self.stream, self.resumed = "", False


async def test_a_client_resyncing_on_gaps_ends_with_exactly_the_databases_rows(
    lossy: Any,
) -> None:
    for text in TEXTS:
        lossy.script(
            reply(tool_calls=[tool_call("ls", {"path": "/"})]),
            reply(text, chunks=50, delay=0.03),
        )
    scope, conversation = await new_conversation()
    cid = str(conversation.pk)
    sock = await connect(scope.user)
    mirror = Mirror(sock, cid)
    await mirror.resync()
    for turn in range(len(TEXTS)):
        await mirror.request("send", text=f"Turn {turn}")
        mirror.status = "running"
        await mirror.follow()
    await sock.disconnect()

    rows = await sync_to_async(
        lambda: [
            display_message_json(row)
            for row in DisplayMessage.objects.filter(conversation=conversation.pk)
        ]
    )()
    layer = get_channel_layer()
    # It did lose events, and noticed.
    assert len(layer.dropped) >= 10
    assert mirror.gaps + mirror.probes_that_missed >= 3
    assert mirror.rows == {row["id"]: row for row in rows}
    assert len(rows) == 4 * len(TEXTS)  # message, tool call, its result, reply
    # Streams resumed from in_flight frames went on with the live deltas.
    assert mirror.continued > 0
    assert set(mirror.whole_messages) <= set(TEXTS)
    assert all(any(t.startswith(s) for t in TEXTS) for s in mirror.in_flight_texts)
