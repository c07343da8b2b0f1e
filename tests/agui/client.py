"""Driving the AG-UI endpoint in tests: SSE parsed, every event checked against the
official SDK's types (``ag_ui.core.Event``), and a client's view of the thread
(AG-UI's own rules for applying events: snapshots replace, a start for a known
message id opens it again, content appends)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import Event
from pydantic import TypeAdapter

EVENT = TypeAdapter(Event)


@dataclass
class Received:
    """One SSE event: its AG-UI event and the ``id`` it carried (None: none)."""

    event: dict[str, Any]
    id: str | None


def parse_sse(text: str) -> list[Received]:
    """SSE text as events; each one validated against the SDK's ``Event`` union."""
    out: list[Received] = []
    for block in text.split("\n\n"):
        data, ident = None, None
        for line in block.split("\n"):
            if line.startswith("data: "):
                data = line[6:]
            elif line.startswith("id: "):
                ident = line[4:]
        if data is None:  # a keep-alive, or an id alone (an event with no AG-UI one)
            continue
        event = json.loads(data)
        EVENT.validate_python(event)  # the SDK's own check of every event we send
        out.append(Received(event, ident))
    return out


def last_id(text: str) -> str | None:
    """The ``Last-Event-ID`` a browser would send after reading ``text``."""
    ids = [line[4:] for line in text.split("\n") if line.startswith("id: ")]
    return ids[-1] if ids else None


def run_input(thread: str, text: str | None = None, **extra: Any) -> dict[str, Any]:
    messages = extra.pop("messages", [])
    if text is not None:
        messages = [
            *messages,
            {"id": f"u-{uuid.uuid4().hex[:8]}", "role": "user", "content": text},
        ]
    return {
        "threadId": thread,
        "runId": f"run-{uuid.uuid4().hex[:8]}",
        "messages": messages,
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        **extra,
    }


@dataclass
class View:
    """What an AG-UI client holds after applying events."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    state: Any = None

    def apply(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == "MESSAGES_SNAPSHOT":
            self.messages = [dict(m) for m in event["messages"]]
        elif kind == "STATE_SNAPSHOT":
            self.state = event["snapshot"]
        elif kind == "STATE_DELTA":
            for op in event["delta"]:
                self.state = patched(self.state, op)
        elif kind == "TEXT_MESSAGE_START":
            if not any(m["id"] == event["messageId"] for m in self.messages):
                self.messages.append(
                    {"id": event["messageId"], "role": event["role"], "content": ""}
                )
        elif kind == "TEXT_MESSAGE_CONTENT":
            message = next(m for m in self.messages if m["id"] == event["messageId"])
            message["content"] = message.get("content", "") + event["delta"]

    def texts(self, role: str = "assistant") -> list[str]:
        return [m.get("content") or "" for m in self.messages if m["role"] == role]


def patched(document: Any, op: dict[str, Any]) -> Any:
    """RFC 6902's add, remove and replace on objects and lists (the operations the
    endpoint sends); the JavaScript client checks them with fast-json-patch."""
    parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"][1:].split("/")]
    document = json.loads(json.dumps(document))
    parent = document
    for part in parts[:-1]:
        parent = parent[int(part)] if isinstance(parent, list) else parent[part]
    last = parts[-1]
    if isinstance(parent, list):
        if op["op"] == "add":
            parent.insert(len(parent) if last == "-" else int(last), op["value"])
        elif op["op"] == "remove":
            parent.pop(int(last))
        else:
            parent[int(last)] = op["value"]
    elif op["op"] == "remove":
        del parent[last]
    else:
        if op["op"] == "replace":
            assert last in parent, op
        parent[last] = op["value"]
    return document


def types(events: list[Received]) -> list[str]:
    return [r.event["type"] for r in events]
