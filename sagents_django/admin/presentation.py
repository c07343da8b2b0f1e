"""How the admin shows stored data: chats, not rows of JSON.

The rows are turned into plain data here and rendered by an autoescaping template
(``admin/sagents_django/includes/chat.html``): everything in a display message came
from a model or a tool, so none of it is ever marked safe. A tool result is folded
into the card of the call it answers, as the chat page shows it; a result whose call
is not on the page stands alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from django.utils.html import format_html
from django.utils.safestring import SafeString

from sagents_django.core.approvals import CustomInterrupt, interrupt_from_dict
from sagents_django.core.exceptions import SerializationError
from sagents_django.models import DISPLAY_STATUSES, MESSAGE_TYPES, DisplayMessage

EntryKind = Literal["text", "thinking", "tool", "error", "other"]


@dataclass(kw_only=True, slots=True)
class ToolOutcome:
    """The result shown inside a tool-call card."""

    text: str
    """The result text, pretty-printed when it is a JSON document."""
    is_error: bool
    """Whether the tool reported a failure."""


@dataclass(kw_only=True, slots=True)
class ChatEntry:
    """One block of the rendered chat."""

    kind: EntryKind
    """How the template draws it: bubble, collapsed thinking, tool card..."""
    role: str
    """user, assistant, tool or system (anything else becomes "other")."""
    status: str
    """The display status (pending, executing, completed...), normalized likewise."""
    inserted_at: datetime | None
    text: str = ""
    """Text of a bubble or thinking block; pretty JSON for unknown content types."""
    content_type: str = ""
    tool_name: str = ""
    call_id: str = ""
    arguments: str = ""
    """The call's arguments as indented JSON."""
    result: ToolOutcome | None = None
    """The matching tool result, once there is one."""


ENVELOPE_ORDER = ("version", "serialized_at", "state")
"""Top-level keys of a state envelope, in the order people read them."""


def pretty_json(value: Any) -> str:
    """Indented JSON for people; a string holding a JSON document is parsed first.

    Keys are sorted: PostgreSQL's jsonb does not keep the written order, so sorting
    is what makes a page read the same on every database.
    """
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        if not isinstance(parsed, dict | list):
            return value  # "42" or "true" read better as the tool wrote them
        value = parsed
    # default=str: stored data is JSON already, but a bad row must not break a page.
    return json.dumps(_sorted(value), indent=2, ensure_ascii=False, default=str)


def pretty_state(data: Any) -> str:
    """A state envelope as indented JSON, its version first and the bulk last."""
    value = _sorted(data)
    if isinstance(value, dict):
        first = {key: value[key] for key in ENVELOPE_ORDER if key in value}
        value = {**first, **{k: v for k, v in value.items() if k not in first}}
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted(value[key]) for key in sorted(value, key=str)}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    return value


def chat_entries(messages: Iterable[DisplayMessage]) -> list[ChatEntry]:
    """The entries of ``messages`` (already in display order)."""
    rows = list(messages)
    call_ids = {_call_id(row) for row in rows if row.content_type == "tool_call"} - {""}
    results: dict[str, DisplayMessage] = {}
    for row in rows:
        if row.content_type == "tool_result":
            results.setdefault(_call_id(row), row)

    entries: list[ChatEntry] = []
    for row in rows:
        if row.content_type == "tool_result" and _call_id(row) in call_ids:
            continue  # shown in its call's card
        entries.append(_entry(row, results))
    return entries


def _entry(row: DisplayMessage, results: dict[str, DisplayMessage]) -> ChatEntry:
    content = _content(row)
    base: dict[str, Any] = {
        "role": row.message_type if row.message_type in MESSAGE_TYPES else "other",
        "status": row.status if row.status in DISPLAY_STATUSES else "other",
        "inserted_at": row.inserted_at,
        "content_type": row.content_type,
    }
    match row.content_type:
        case "text" | "thinking" as kind:
            return ChatEntry(kind=kind, text=_text(content.get("text")), **base)
        case "error":
            text = content.get("text", content.get("message", ""))
            return ChatEntry(kind="error", text=_text(text), **base)
        case "tool_call":
            answer = results.get(_call_id(row))
            return ChatEntry(
                kind="tool",
                tool_name=_text(content.get("name")),
                call_id=_call_id(row),
                arguments=pretty_json(content.get("arguments", {})),
                result=_outcome(answer) if answer is not None else None,
                **base,
            )
        case "tool_result":
            # A result whose call is not on the page: a card with no arguments.
            return ChatEntry(
                kind="tool",
                tool_name=_text(content.get("name")),
                call_id=_call_id(row),
                result=_outcome(row),
                **base,
            )
        case _:
            return ChatEntry(kind="other", text=pretty_json(content), **base)


def _outcome(row: DisplayMessage) -> ToolOutcome:
    content = _content(row)
    return ToolOutcome(
        text=pretty_json(_text(content.get("content"))),
        is_error=bool(content.get("is_error")) or row.status == "failed",
    )


def _call_id(row: DisplayMessage) -> str:
    content = _content(row)
    key = "tool_call_id" if row.content_type == "tool_result" else "call_id"
    return row.tool_call_id or _text(content.get(key))


def _content(row: DisplayMessage) -> dict[str, Any]:
    # The column is JSON written by the runtime, but a malformed row still renders.
    return row.content if isinstance(row.content, dict) else {"value": row.content}


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else pretty_json(value)


def json_block(value: Any, *, envelope: bool = False) -> SafeString:
    """Indented JSON in a <pre>; format_html escapes it."""
    text = pretty_state(value) if envelope else pretty_json(value)
    return format_html('<pre class="sagents-json">{}</pre>', text)


def state_summary(data: Any) -> dict[str, Any]:
    """Counts shown beside a state, read defensively from the stored envelope."""
    envelope = data if isinstance(data, dict) else {}
    state = envelope.get("state")
    state = state if isinstance(state, dict) else {}

    def count(key: str) -> int:
        value = state.get(key)
        return len(value) if isinstance(value, list) else 0

    return {
        "version": envelope.get("version"),
        "messages": count("messages"),
        "todos": count("todos"),
        "interrupted": bool(state.get("interrupt_data")),
        "waiting_for": waiting_for(state.get("interrupt_data")),
    }


def waiting_for(interrupt_data: Any) -> str:
    """What a pending interrupt waits for, in a few words ("write_file, calculator:
    add"); empty when there is none or it cannot be read."""
    if not interrupt_data:
        return ""
    try:
        interrupt = interrupt_from_dict(interrupt_data)
    except SerializationError:
        return "an unreadable interrupt"
    if isinstance(interrupt, CustomInterrupt):
        kind = interrupt.type
        return (
            f"an interrupt of type {kind}" if isinstance(kind, str) else "an interrupt"
        )
    return ", ".join(
        f"{r.subagent}: {r.tool_name}" if r.subagent else r.tool_name
        for r in interrupt.action_requests
    )
