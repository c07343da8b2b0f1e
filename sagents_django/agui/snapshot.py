"""The conversation as the database holds it, in AG-UI's shapes.

A stream that joins (a new run's request, a reconnect) starts from here: the
transcript as ``MESSAGES_SNAPSHOT``, the plan and the file list as
``STATE_SNAPSHOT``. It is read after the stream joined the conversation's group
and read the in-flight buffer (``runtime.inflight``), so every event is either in
what this reads or arrives after it.

Message ids: a transcript row's id is ``d<row id>``; a person's message sent
through AG-UI keeps the id its client gave it (kept in the row's metadata), so a
client's own message is the same message after a snapshot. One assistant message
of ours is one AG-UI assistant message (its text and its tool calls), with the id
of its first row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final

from sagents_django import services
from sagents_django.filesystems.keys import scope_parts
from sagents_django.models import AgentRun, AgentState, DisplayMessage, StoredFile
from sagents_django.runtime.file_scopes import conversation_filesystem_scope
from sagents_django.runtime.lookup import pending_interrupt
from sagents_django.scope import Scope
from sagents_django.ui.files import MAX_FILES_LISTED

AGUI_ID: Final = "agui_message_id"
"""The display row metadata key holding the id an AG-UI client gave a message."""
MAX_SNAPSHOT_ROWS: Final = 2000
"""A snapshot carries at most the latest this many transcript rows."""


@dataclass(kw_only=True, slots=True)
class Snapshot:
    messages: list[dict[str, Any]]
    todos: list[dict[str, Any]]
    files: list[str]
    interrupt: Any = None
    """The pending interrupt's data (None: none pending)."""
    run_id: str | None = None
    """The active run (None: none)."""
    user_ids: set[str] = field(default_factory=set)
    """Ids of the person's messages (theirs and ours), to tell a new one."""


def read(scope: Scope, conversation: Any) -> Snapshot:
    """The snapshot of ``conversation`` (already found in ``scope``)."""
    pk = conversation.pk
    rows = services.load_display_messages(scope, pk, limit=MAX_SNAPSHOT_ROWS)
    todos = (
        AgentState.objects.filter(conversation_id=pk)
        .values_list("state_data__state__todos", flat=True)
        .first()
    )
    kind, ident = scope_parts(conversation_filesystem_scope(scope, conversation))
    files = list(
        StoredFile.objects.filter(scope_kind=kind, scope_id=ident)
        .exclude(mime_type="inode/directory")
        .order_by("path")
        .values_list("path", flat=True)[:MAX_FILES_LISTED]
    )
    run = AgentRun.objects.of(pk).active().values_list("pk", flat=True).first()
    messages = agui_messages(rows)
    return Snapshot(
        messages=messages,
        todos=todos if isinstance(todos, list) else [],
        files=files,
        interrupt=pending_interrupt(pk) or None,
        run_id=str(run) if run else None,
        user_ids={m["id"] for m in messages if m["role"] == "user"},
    )


def pending(conversation: Any) -> Any:
    """The conversation's pending interrupt (None: none), read under the caller's
    transaction-free view; the resume path checks it again under its lock."""
    return pending_interrupt(conversation.pk) or None


def knows_message(conversation: Any, message_id: str) -> bool:
    """Whether ``message_id`` already names a person's message of the conversation
    (a client resending its history with no new message in it)."""
    rows = DisplayMessage.objects.filter(conversation_id=conversation.pk)
    ours = message_id.startswith("d") and message_id[1:].isdigit()
    if ours and rows.filter(pk=int(message_id[1:])).exists():
        return True
    return rows.filter(**{f"metadata__{AGUI_ID}": message_id}).exists()


def agui_messages(rows: list[Any]) -> list[dict[str, Any]]:
    """Transcript rows as AG-UI messages, in order."""
    out: list[dict[str, Any]] = []
    assistant: dict[str, Any] | None = None
    for row in rows:
        content = row.content if isinstance(row.content, dict) else {}
        kind, role = row.content_type, row.message_type
        if role == "assistant" and kind in ("text", "tool_call"):
            if assistant is None or row.sequence == 0:
                assistant = {"id": f"d{row.pk}", "role": "assistant"}
                out.append(assistant)
            if kind == "text":
                assistant["content"] = assistant.get("content", "") + _text(content)
            else:
                assistant.setdefault("toolCalls", []).append(_tool_call(content))
            continue
        assistant = None
        if role == "assistant" and kind == "thinking":
            out.append(
                {"id": f"d{row.pk}", "role": "reasoning", "content": _text(content)}
            )
        elif kind == "tool_result":
            out.append(
                {
                    "id": f"d{row.pk}",
                    "role": "tool",
                    "toolCallId": str(content.get("tool_call_id", "")),
                    "content": str(content.get("content", "")),
                    **({"error": "error"} if content.get("is_error") else {}),
                }
            )
        elif role == "user" and kind == "text":
            meta = row.metadata if isinstance(row.metadata, dict) else {}
            mid = meta.get(AGUI_ID)
            out.append(
                {
                    "id": mid if isinstance(mid, str) else f"d{row.pk}",
                    "role": "user",
                    "content": _text(content),
                }
            )
    return out


def _text(content: dict[str, Any]) -> str:
    value = content.get("text", "")
    return value if isinstance(value, str) else json.dumps(value)


def _tool_call(content: dict[str, Any]) -> dict[str, Any]:
    arguments = content.get("arguments", {})
    return {
        "id": str(content.get("call_id", "")),
        "type": "function",
        "function": {
            "name": str(content.get("name", "")),
            "arguments": arguments
            if isinstance(arguments, str)
            else json.dumps(arguments, ensure_ascii=False),
        },
    }
