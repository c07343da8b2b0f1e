"""The JSON WebSocket protocol's frames: limits, close codes, parsing and replies.

docs/protocol.md is the page a client author reads; this module is what the socket
consumer checks frames with. A client frame is a JSON object naming an ``action``;
anything else is answered with an error frame and changes nothing. Errors that are
the client's to fix never close the socket; only two things do: a socket without a
signed-in user, and a conversation the user cannot see (another user's or none at
all, one answer for both, so ids cannot be probed).
"""

from __future__ import annotations

import json
from typing import Any, Final, Literal

from sagents_django.exceptions import Conflict, InvalidInput, RunConflict
from sagents_django.services.validation import parse_uuid

VERSION: Final = 2
"""The protocol's version (docs/protocol.md says what changed), given in every
``subscribe`` reply. 2: frames of a conversation arrive in ``seq`` order; ``run_alive``
frames (no ``seq``); ``in_flight`` and ``subscribe`` carry the live todos;
``create_conversation``, ``list_conversations``; ``history`` pages with ``before``."""

CLOSE_NO_CHANNEL_LAYER: Final = 1011
"""The site has no channel layer (``CHANNEL_LAYERS``): no event could arrive."""
CLOSE_UNAUTHENTICATED: Final = 4401
"""The socket has no signed-in user (no or an expired session)."""
CLOSE_NOT_FOUND: Final = 4404
"""A frame named a conversation the user cannot see (someone else's or none)."""
CLOSE_DRAINING: Final = 4503
"""The server is stopping for a deploy (``sagents_django.asgi.DrainOnSigterm``):
reconnect, to another process, and resync. Not 1012 (Service Restart): daphne's
WebSocket library refuses to send codes other than 1000 and 3000-4999."""

MAX_FRAME_BYTES: Final = 512 * 1024
"""Largest client frame (UTF-8 bytes of its text); larger ones are refused unread.
Below daphne's own limit (1 MiB), which drops the connection without a word."""
MAX_SUBSCRIPTIONS: Final = 100
"""Conversations (and debug streams, counted apart) one socket may follow at once."""
MAX_ID_CHARS: Final = 64
HISTORY_LIMIT: Final = 100
"""Rows a ``history`` reply holds at most (page with ``before`` or ``after``)."""
LIST_LIMIT: Final = 50
"""Conversations a ``list_conversations`` reply holds at most (page with ``cursor``)."""
RUN_ALIVE_SECONDS: Final = 10.0
"""How often a socket sends ``run_alive`` for each subscribed conversation with an
active run (a run's heartbeat moves every few seconds while a worker holds it)."""

ACTIONS: Final = (
    "subscribe",
    "unsubscribe",
    "send",
    "cancel",
    "resume",
    "dismiss",
    "regenerate",
    "edit",
    "switch_branch",
    "history",
    "create_conversation",
    "list_conversations",
    "subscribe_debug",
    "unsubscribe_debug",
    "follow_files",
    "unfollow_files",
)

ErrorCode = Literal[
    "bad_frame",
    "too_large",
    "unknown_action",
    "invalid_input",
    "conflict",
    "run_conflict",
    "forbidden",
    "too_many_subscriptions",
]


class FrameError(Exception):
    """A frame the server refuses; becomes an error frame (the socket stays open)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(message)


def parse_frame(text: str | None, data: bytes | None) -> dict[str, Any]:
    """The JSON object a client frame holds, or FrameError. Size is checked before
    parsing, so a huge frame costs no JSON decoding."""
    if text is None:
        raise FrameError("bad_frame", "Frames are JSON text; binary frames are refused")
    if len(text) > MAX_FRAME_BYTES or len(text.encode()) > MAX_FRAME_BYTES:
        raise FrameError(
            "too_large", f"A frame holds at most {MAX_FRAME_BYTES} bytes of JSON"
        )
    try:
        frame = json.loads(text)
    except (ValueError, RecursionError):
        raise FrameError("bad_frame", "The frame is not JSON") from None
    if not isinstance(frame, dict):
        raise FrameError("bad_frame", "A frame is a JSON object with an action")
    return frame


def client_id(frame: dict[str, Any]) -> str | int | None:
    """The client's ``id`` to echo in the reply (a short string or an integer)."""
    value = frame.get("id")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise FrameError("invalid_input", "id must be a string or an integer")
    if isinstance(value, str) and len(value) > MAX_ID_CHARS:
        raise FrameError("invalid_input", f"id holds at most {MAX_ID_CHARS} chars")
    return value


def action_of(frame: dict[str, Any]) -> str:
    action = frame.get("action")
    if not isinstance(action, str) or action not in ACTIONS:
        shown = repr(action)[:40] if action is not None else "none"
        raise FrameError(
            "unknown_action",
            f"Unknown action {shown}; one of: {', '.join(ACTIONS)}",
        )
    return action


def conversation_of(frame: dict[str, Any]) -> str:
    """The frame's ``conversation`` as a canonical UUID string."""
    value = frame.get("conversation")
    if value is None:
        raise FrameError("invalid_input", "conversation is required (a UUID)")
    try:
        return str(parse_uuid(value, what="conversation"))
    except InvalidInput as exc:
        raise FrameError("invalid_input", str(exc)) from None


def limit_of(frame: dict[str, Any], most: int) -> int:
    """The frame's ``limit``, 1 to ``most`` (``most`` when absent)."""
    limit = frame.get("limit", most)
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise FrameError("invalid_input", "limit must be an integer")
    if not 1 <= limit <= most:
        raise FrameError("invalid_input", f"limit must be 1 to {most}")
    return limit


def error_for(exc: Exception) -> FrameError:
    """A server refusal (bad input, a conflict) as the error frame it becomes."""
    if isinstance(exc, FrameError):
        return exc
    if isinstance(exc, RunConflict):
        return FrameError("run_conflict", str(exc))
    if isinstance(exc, Conflict):
        return FrameError("conflict", str(exc))
    return FrameError("invalid_input", str(exc))


def reply(action: str, request_id: Any, **fields: Any) -> dict[str, Any]:
    frame: dict[str, Any] = {"reply": action, "ok": True, **fields}
    if request_id is not None:
        frame["id"] = request_id
    return frame


def in_flight_frame(
    conversation: str, seq: int, data: dict[str, Any]
) -> dict[str, Any]:
    """What a conversation's running turn has streamed so far, sent right after
    ``subscribe``'s reply, before any live event: the text of every ``llm_deltas``
    numbered up to ``seq``, and the todos as of then. The socket skips the events
    numbered up to ``seq`` still on their way, so the next event a client sees is
    numbered ``seq + 1``."""
    return {
        "event": "in_flight",
        "seq": seq,
        "conversation": conversation,
        "data": data,
    }


def run_alive_frame(conversation: str, run: dict[str, Any]) -> dict[str, Any]:
    """A conversation's active run is still there (``RUN_ALIVE_SECONDS``). Not a
    numbered event: it has no ``seq`` and is not counted."""
    return {
        "event": "run_alive",
        "conversation": conversation,
        "data": {
            "run_id": str(run["pk"]),
            "status": run["status"],
            "started_at": _iso(run.get("started_at")),
            "heartbeat_at": _iso(run.get("heartbeat_at")),
        },
    }


def conversation_json(conversation: Any) -> dict[str, Any]:
    """A conversation as ``create_conversation`` and ``list_conversations`` give it."""
    return {
        "id": str(conversation.pk),
        "title": conversation.title,
        "metadata": conversation.metadata,
        "created_at": _iso(conversation.created_at),
        "updated_at": _iso(conversation.updated_at),
    }


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def error_frame(
    error: FrameError, *, action: str | None = None, request_id: Any = None
) -> dict[str, Any]:
    frame: dict[str, Any] = {
        "reply": action,
        "ok": False,
        "error": {"code": error.code, "message": error.message},
    }
    if request_id is not None:
        frame["id"] = request_id
    return frame
