"""Agent events as HTML fragments for the htmx WebSocket extension.

Each event becomes one frame of elements carrying ``hx-swap-oob``: a new row is
appended to ``#sg-messages`` (the page's script swaps it in place instead when the
page already has a row of that id, so a row sent twice is shown once), a changed
row replaces its element, panels (status, plan, files, usage, title, approvals)
are replaced whole from the database. Streamed text is appended escaped to
``#sg-stream-text`` and cleared when the finished message's row arrives (and when
a run starts: a run taken over after a crash streams its reply again); a resync
redraws it, and the plan, from the in-flight buffer.

Live events render from the event's own data: a row from the row JSON the event
carries, the status panels from ``status_changed``'s status and interrupt, the page's
conversation and last status kept between events (``Live``). The database is read
for what an event does not carry (a tool result's call row, the usage at a run's
end) and on resync.

Everything here runs in a worker thread (it may read the database) and renders the
same partial templates as the page, with autoescaping: no model text is marked
safe except markdown that went through the sanitizer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.template.loader import render_to_string
from django.utils.dateparse import parse_datetime
from django.utils.html import escape, format_html

from sagents_django import services
from sagents_django.core.filesystem.scope import ScopeKey
from sagents_django.exceptions import InvalidInput
from sagents_django.models import DisplayMessage
from sagents_django.runtime.file_scopes import conversation_filesystem_scope
from sagents_django.runtime.inflight import InFlight
from sagents_django.scope import Scope

from . import transcript
from .approvals import inbox_count, requests_of, with_previews
from .context import Chat

RECENT_ROWS = 30
"""Rows re-sent on every resync: they cover rows changed while the page was away."""
MAX_RESYNC_ROWS = 200
"""More missed rows than this: the whole list is replaced instead."""


def _partial(name: str, **context: Any) -> str:
    return render_to_string(f"sagents_django/partials/{name}.html", context)


def _append(html: str, target: str = "sg-messages", how: str = "beforeend") -> str:
    return f'<div hx-swap-oob="{how}:#{target}">{html}</div>'


def rows_html(
    chat: Chat,
    rows: list[DisplayMessage],
    *,
    oob: bool = False,
    live: bool = False,
    draw: set[int] | None = None,
    open_turn: bool | None = None,
) -> str:
    """``live``: rows an event just brought, drawn from it alone (a new reply has
    no rating yet, no Regenerate while its turn goes on, and its turn's usage
    comes with ``run_finished``). ``draw``: the ids of the rows to draw (the
    others only tell where turns end); ``open_turn``: ``Chat.annotate``'s."""
    extra = transcript.tool_results_for(chat.conversation.pk, rows, tree=chat.tree)
    items = transcript.entries(rows, results=extra, status=chat.status)
    chat.add_branches(items)
    if not live:
        items = chat.annotate(items, open_turn=open_turn)
    if draw is not None:
        items = [e for e in items if e.pk in draw]
    return "".join(_partial("message", e=e, chat=chat, oob=oob) for e in items)


def clear_stream() -> str:
    return _partial("stream", oob=True)


def stream(in_flight: InFlight) -> str:
    """The streaming bubble holding what the running turn has streamed so far."""
    return _partial(
        "stream", oob=True, text=in_flight.text, thinking=in_flight.thinking
    )


def _status_panels(chat: Chat) -> list[str]:
    """Status, send note, approval form: what follows the agent's status."""
    return [
        _partial("status", chat=chat, oob=True),
        # A read share's page has no send box, so no note under it to redraw.
        _partial("send_note", chat=chat, oob=True) if chat.can_write else "",
        _partial(
            "approval_form",
            requests=chat.approvals,
            conversation=chat.conversation,
            paused=chat.paused_without_form,
            oob=True,
        ),
    ]


def panels(chat: Chat) -> str:
    """Status, send note, approvals, usage: what changes with the run."""
    return "".join(
        [
            *_status_panels(chat),
            _partial("usage", chat=chat, oob=True),
            _partial("inbox_count", inbox_count=inbox_count(chat.scope), oob=True),
        ]
    )


def resync(
    scope: Scope,
    conversation_id: str,
    after: Any,
    *,
    in_flight: InFlight | None = None,
) -> str:
    """Everything the page may have missed since row ``after`` (None: all), and
    the streaming bubble redrawn from ``in_flight`` (read before the rows)."""
    conversation = services.get_conversation(scope, conversation_id)
    if conversation is None:
        return ""
    chat = Chat(scope, conversation)
    missed: list[DisplayMessage] | None = None
    if after is not None:
        try:
            missed = services.load_display_messages(
                scope, conversation.pk, after=after, limit=MAX_RESYNC_ROWS + 1
            )
        except InvalidInput:
            missed = None
    parts: list[str] = []
    if missed is None or len(missed) > MAX_RESYNC_ROWS:
        list_html = "".join(_partial("message", e=e, chat=chat) for e in chat.entries)
        if not list_html and not chat.has_older:  # as the page draws it
            list_html = '<p class="sg-empty">No messages yet.</p>'
        parts.append(
            f'<div id="sg-messages" class="sg-messages" aria-label="Messages" '
            f'role="log" hx-swap-oob="true">{list_html}</div>'
        )
    else:
        recent = services.load_display_messages(
            scope, conversation.pk, limit=RECENT_ROWS, tree=chat.tree
        )
        seen = {row.pk for row in recent}
        rows = recent + [row for row in missed if row.pk not in seen]
        rows.sort(key=lambda row: (row.inserted_at, row.sequence, row.pk))
        parts.append(_append(rows_html(chat, rows)))
    if not chat.running:
        parts.append(clear_stream())
    elif in_flight is not None:
        parts.append(stream(in_flight))
    parts.append(panels(chat))
    # The running turn's todos are newer than the stored state's (saved at its end).
    live = in_flight.todos if in_flight is not None else None
    plan = chat if live is None else _TodoChat(chat, {"todos": live})
    parts.append(_partial("todo_panel", chat=plan, oob=True))
    parts.append(_partial("file_tree", chat=chat, oob=True))
    # The title's text only: the bar around it may hold a rename form being typed in.
    parts.append(_partial("title_live", conversation=conversation, oob=True))
    return "".join(parts)


@dataclass
class Live:
    """What a page's socket knows between events: its conversation (read once) and
    the last status an event told it (None: not told yet, read it)."""

    conversation: Any = None
    status: str | None = None
    tree: Any = None
    """The conversation's branches (``Chat.tree``), read once like the
    conversation; read again when the branch shown changes."""
    tree_read: bool = False

    def chat(
        self, scope: Scope, conversation_id: str, *, status: str | None = None
    ) -> Chat | None:
        """The page's chat; ``status``: the one an event just told."""
        if self.conversation is None or str(self.conversation.pk) != conversation_id:
            self.conversation = services.get_conversation(scope, conversation_id)
            self.status = None
            self.tree_read = False
        if self.conversation is None:
            return None
        chat = Chat(scope, self.conversation)
        if not self.tree_read:
            self.tree, self.tree_read = chat.tree, True
        chat.tree = self.tree
        if status is not None:
            self.status = status
        if self.status is None:
            self.status = chat.status  # read once; events keep it from then on
        else:
            chat.status = self.status
        return chat


def for_event(scope: Scope, message: dict[str, Any], live: Live | None = None) -> str:
    """The fragment of one ``agent.event`` message ("" when the page shows
    nothing of it)."""
    cid = str(message.get("conversation"))
    event = message.get("event")
    raw = message.get("data")
    data: dict[str, Any] = raw if isinstance(raw, dict) else {}
    subagent = message.get("subagent")
    if subagent:
        return _subagent(subagent, event, data)
    if event == "llm_deltas":
        return _deltas(data)
    live = live or Live()
    told = data.get("status") if event == "status_changed" else None
    chat = live.chat(scope, cid, status=told if isinstance(told, str) else None)
    if chat is None:
        return ""
    conversation = chat.conversation
    if event in ("display_message_saved", "display_message_updated", "message_queued"):
        return _row(chat, data, updated=event == "display_message_updated")
    if event == "llm_message":
        return clear_stream()
    if event == "status_changed":
        return _status(chat, data)
    if event == "run_finished":
        # The status panels follow with its status_changed; the usage changed,
        # and the turn's last reply now shows the turn's usage and Regenerate
        # (the turn is over, unless an approval holds it or a run follows).
        recent = services.load_display_messages(
            scope, conversation.pk, limit=RECENT_ROWS, tree=chat.tree
        )
        replies = {
            r.pk
            for r in recent
            if (r.message_type, r.content_type) == ("assistant", "text")
        }
        return _partial("usage", chat=chat, oob=True) + rows_html(
            chat,
            recent,
            oob=True,
            draw=replies,
            open_turn=data.get("status") == "interrupted"
            or bool(data.get("next_run_id")),
        )
    if event == "run_started":
        recent = services.load_display_messages(
            scope, conversation.pk, limit=RECENT_ROWS, tree=chat.tree
        )
        # Merged like a resync's rows (in place, or appended): the rows of the
        # message that started the run may still be on their way (another
        # publisher's events), and an out-of-band swap of a row the page does not
        # have yet is an error.
        return clear_stream() + panels(chat) + _append(rows_html(chat, recent))
    if event == "todos_updated":
        return _partial("todo_panel", chat=_TodoChat(chat, data), oob=True)
    if event in ("file_updated", "file_deleted"):
        return _partial("file_tree", chat=chat, oob=True)
    if event == "conversation_title_generated":
        # The stored title (a title the person chose stays): read again, the page
        # keeps its conversation between events.
        live.conversation = conversation = services.get_conversation(scope, cid)
        if conversation is None:
            return ""
        return _partial("title_live", conversation=conversation, oob=True)
    if event == "branch_switched":
        # Another branch: its rows, and its status (its own latest run's).
        live.tree_read = False
        live.status = None
    if event in ("agent_state_update", "branch_switched"):
        # A reset, or another branch shown: the transcript is drawn again whole.
        return resync(scope, cid, None)
    return ""


def files_scope(scope: Scope, conversation_id: str) -> ScopeKey | None:
    """The filesystem scope of the conversation's files (None: not found)."""
    conversation = services.get_conversation(scope, conversation_id)
    if conversation is None:
        return None
    return conversation_filesystem_scope(scope, conversation)


def file_panel(scope: Scope, conversation_id: str) -> str:
    """The file tree alone: another conversation sharing the files changed them."""
    conversation = services.get_conversation(scope, conversation_id)
    if conversation is None:
        return ""
    return _partial("file_tree", chat=Chat(scope, conversation), oob=True)


def for_list_event(scope: Scope, message: dict[str, Any]) -> str:
    """The conversation list only shows titles and the approvals badge."""
    event = message.get("event")
    if message.get("subagent"):
        return ""
    if event == "conversation_title_generated":
        conversation = services.get_conversation(scope, message.get("conversation"))
        if conversation is None:
            return ""
        return _partial("title_text", conversation=conversation, oob=True)
    if event == "status_changed":
        return _partial("inbox_count", inbox_count=inbox_count(scope), oob=True)
    return ""


def for_debug_event(message: dict[str, Any]) -> str:
    text = json.dumps(
        {"event": message.get("event"), "data": message.get("data")},
        ensure_ascii=False,
        default=str,
    )
    if len(text) > 4000:
        text = text[:4000] + "…"
    return _append(format_html("<li><pre>{}</pre></li>", text), "sg-debug")


class _TodoChat:
    """A chat whose todos come from the event (the newest list)."""

    def __init__(self, chat: Chat, data: dict[str, Any]) -> None:
        self.chat = chat
        todos = data.get("todos")
        self.todos = [
            {"content": str(t.get("content", "")), "status": str(t.get("status", ""))}
            for t in (todos if isinstance(todos, list) else [])
            if isinstance(t, dict)
        ]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.chat, name)


def _status(chat: Chat, data: dict[str, Any]) -> str:
    """The panels that follow the status, from the event: the approval form from
    its interrupt (a paused run's), the inbox badge when an approval came or went."""
    status = chat.status
    chat.approvals = (
        with_previews(chat.scope, chat.conversation, requests_of(data.get("data")))
        if status == "interrupted"
        else []
    )
    parts = _status_panels(chat)
    if status != "running":
        parts.append(clear_stream())
        parts.append(
            _partial("inbox_count", inbox_count=inbox_count(chat.scope), oob=True)
        )
    if status == "error":
        recent = services.load_display_messages(
            chat.scope, chat.conversation.pk, limit=3, tree=chat.tree
        )
        parts.append(rows_html(chat, recent, oob=True))
    return "".join(parts)


def row_from_json(conversation_id: Any, data: Any) -> DisplayMessage | None:
    """The row an event carries (``display_message_json``'s form), unsaved."""
    if not isinstance(data, dict):
        return None
    try:
        pk = int(data.get("id"))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    content = data.get("content")
    metadata = data.get("metadata")
    sequence = data.get("sequence")
    inserted = data.get("inserted_at")
    row = DisplayMessage(
        pk=pk,
        conversation_id=conversation_id,
        message_type=str(data.get("message_type", "")),
        content_type=str(data.get("content_type", "")),
        content=content if isinstance(content, dict) else {},
        sequence=sequence if isinstance(sequence, int) else 0,
        status=str(data.get("status", "completed")),
        metadata=metadata if isinstance(metadata, dict) else {},
    )
    row.inserted_at = parse_datetime(inserted) if isinstance(inserted, str) else None  # type: ignore[assignment]
    row.tool_call_id = transcript.call_id_of(row)
    return row


def _row(chat: Chat, data: dict[str, Any], *, updated: bool) -> str:
    row = row_from_json(chat.conversation.pk, data.get("display_message"))
    if row is None:
        return ""
    parts: list[str] = []
    if row.content_type == "tool_result":
        call = DisplayMessage.objects.filter(
            conversation_id=chat.conversation.pk,
            content_type="tool_call",
            tool_call_id=transcript.call_id_of(row),
        ).last()  # the branch shown's: a model may use an id in two branches
        if call is not None:
            card, marker = transcript.entries([call, row], status=chat.status)
            parts.append(_partial("message", e=card, chat=chat, oob=True))
            parts.append(_append(_partial("message", e=marker, chat=chat)))
            return "".join(parts)
    html = rows_html(chat, [row], oob=updated, live=True)
    parts.append(html if updated else _append(html))
    if row.message_type == "assistant" and row.content_type == "text":
        parts.append(clear_stream())
    return "".join(parts)


def _deltas(data: dict[str, Any]) -> str:
    deltas = data.get("deltas")
    text, thinking = [], []
    for delta in deltas if isinstance(deltas, list) else []:
        if not isinstance(delta, dict):
            continue
        if isinstance(delta.get("content"), str):
            text.append(delta["content"])
        if isinstance(delta.get("thinking"), str):
            thinking.append(delta["thinking"])
    parts = []
    if text:
        parts.append(_append(escape("".join(text)), "sg-stream-text"))
    if thinking:
        parts.append(_append(escape("".join(thinking)), "sg-stream-thinking"))
    return "".join(parts)


def _subagent(tag: Any, event: Any, data: dict[str, Any]) -> str:
    """A sub-agent's own work, drawn inside its task card."""
    call_id = tag.get("task_call_id") if isinstance(tag, dict) else None
    if not call_id:
        return ""
    target = f"sg-sub-{transcript.dom_id(call_id)}"
    if event == "llm_deltas":
        deltas = data.get("deltas")
        text = "".join(
            d["content"]
            for d in (deltas if isinstance(deltas, list) else [])
            if isinstance(d, dict) and isinstance(d.get("content"), str)
        )
        return _append(escape(text), target) if text else ""
    if event == "tool_execution_update":
        line = format_html(
            '<div class="sg-sub-tool">{} · {}</div>',
            str(data.get("name", "tool")),
            str(data.get("status", "")),
        )
        return _append(line, target)
    if event == "llm_message":
        return _append('<hr class="sg-sub-break">', target)
    return ""
