"""Display rows as the entries the chat page draws, each keyed by its row id.

Every entry carries the id of the row it shows (``msg-<pk>`` in the page), so a row
rendered by the page, pushed by the socket, or sent again after a reconnect replaces
itself instead of appearing twice. A tool result is folded into the card of the call
it answers (the card is re-rendered when the result arrives); the result's own row
leaves an empty, hidden marker so the page still knows it has it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from django.utils.safestring import SafeString

from sagents_django.admin.presentation import pretty_json
from sagents_django.budgets.texts import describe as describe_budget
from sagents_django.models import DISPLAY_STATUSES, MESSAGE_TYPES, DisplayMessage
from sagents_django.services.branches import Tree, path_filter

from .markdown import render_markdown

EntryKind = Literal[
    "text", "thinking", "tool", "result", "error", "notification", "other"
]

STOPPED = {
    "cancelled": "Stopped.",
    "length": "Cut off: the reply reached its length limit.",
    "content_filtered": "Cut off by the provider's content filter.",
    "stream_error": "Cut off: the provider's stream broke.",
}
"""The note beside a reply that did not finish, by its ``stop_reason``."""
STOP_LABELS = {"cancelled": "stopped"}
"""The short mark on the reply itself ("cut off" for every other reason)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class BranchNav:
    """Which of the alternatives of a branch point a row shows (from 1)."""

    index: int
    count: int

    @property
    def previous(self) -> int:
        return self.index - 1

    @property
    def next(self) -> int:
        return self.index + 1 if self.index < self.count else 0


@dataclass(kw_only=True, slots=True)
class Entry:
    """One block of the transcript."""

    pk: int
    """The display row's id: the element is ``msg-<pk>``."""
    kind: EntryKind
    role: str
    status: str
    inserted_at: Any = None
    sequence: int = 0
    html: SafeString | str = ""
    """Sanitized markdown of a text, thinking or error block."""
    text: str = ""
    """Plain text (pretty JSON for unknown content types)."""
    clipped: bool = False
    """``text`` is shown in part (``clip``): no Edit, which would send that part."""
    tool_name: str = ""
    call_id: str = ""
    arguments: str = ""
    result: str | None = None
    result_pk: int | None = None
    result_is_error: bool = False
    folded: bool = False
    """A tool result drawn inside its call's card (its own element stays empty)."""
    queued: bool = False
    """A person's message sent during a turn and not answered yet."""
    subagent: bool = False
    """A ``task`` call: the sub-agent's live work is drawn inside its card."""
    retry: bool = False
    """An error the person may retry (the last row of a failed turn)."""
    stopped: str = ""
    """Why the message this row ends did not finish (``STOPPED``), else empty."""
    started_by: str = ""
    """What started the turn of a message a trigger wrote (``sagents_django.triggers``)."""
    sent_by: dict[str, Any] | None = None
    """Who sent a person's message through a share (``{"id", "name"}``); None: the
    owner's scope sent it."""
    stop_label: str = ""
    """The mark on the reply itself: "stopped" or "cut off" (empty: it finished)."""
    stop_details: str = ""
    """The provider's words on a cut-off reply, when it gave some."""
    feedback: Any = None
    """The viewer's rating of this reply (a ``ReplyFeedback``), if any."""
    usage: Any = None
    """On the last reply of a user turn: the turn's ``TurnUsage`` (all its runs)."""
    branch: BranchNav | None = None
    """On the first row after a branch point: ``< n / m >``."""
    turn_end: bool = False
    """The last reply of a finished turn: the one that offers Regenerate (which
    answers the whole turn again). Set by ``Chat.annotate``."""
    extra: dict[str, Any] = field(default_factory=dict)


def content_of(row: DisplayMessage) -> dict[str, Any]:
    return row.content if isinstance(row.content, dict) else {"value": row.content}


def call_id_of(row: DisplayMessage) -> str:
    content = content_of(row)
    key = "tool_call_id" if row.content_type == "tool_result" else "call_id"
    return row.tool_call_id or _raw(content.get(key))


SHOWN_CHARS = 20_000
"""At most this much of one text (a message, a tool's arguments or result) is
drawn on a page: a message of a megabyte would make every page and every socket
frame that carries its row a megabyte (daphne refuses a WebSocket frame over 1 MiB,
and the page's socket would reconnect forever). The agent still has all of it."""


def clip(text: str) -> str:
    """``text``, cut to ``SHOWN_CHARS`` with a note saying how much is not shown."""
    if len(text) <= SHOWN_CHARS:
        return text
    left = len(text) - SHOWN_CHARS
    return f"{text[:SHOWN_CHARS]}\n\n… ({left:,} more characters not shown here)"


def _text(value: Any) -> str:
    """``value`` as text to show (clipped)."""
    return clip(_raw(value))


def _raw(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else pretty_json(value)


def entries(
    rows: Iterable[DisplayMessage],
    *,
    results: dict[str, DisplayMessage] | None = None,
    status: str = "idle",
) -> list[Entry]:
    """Entries of ``rows`` (in display order). ``results`` adds tool results
    answering calls on this page that the rows do not include; ``status`` is the
    conversation's, which decides whether queued messages still wait and whether
    the last error offers a retry."""
    rows = list(rows)
    answers: dict[str, DisplayMessage] = dict(results or {})
    for row in rows:
        if row.content_type == "tool_result":
            answers.setdefault(call_id_of(row), row)
    out = [entry(row, answers) for row in rows]
    calls = {e.call_id for e in out if e.kind == "tool"}
    for item in out:
        if item.kind == "result" and item.call_id in calls:
            item.folded = True
    _mark_waiting(out, status)
    return out


def by_person(item: Entry) -> bool:
    """A person's message: what starts a turn (``runtime.branches``' rule)."""
    return item.role == "user" and item.kind == "text"


def is_reply(item: Entry) -> bool:
    return item.role == "assistant" and item.kind == "text"


def mark_turn_ends(
    items: list[Entry], *, opened: bool, followed_by_person: bool | None
) -> None:
    """Set ``turn_end`` on the last reply of each turn among ``items`` (display
    order). ``opened``: a person's message comes before the first item (else the
    replies before the first person's message answer none: nothing to
    regenerate). ``followed_by_person``: what comes after the last item: a
    person's message (True), a reply (False), or nothing, the turn is over
    (None; pass False while it still runs or waits for an approval)."""
    last: Entry | None = None
    for item in items:
        if by_person(item):
            if last is not None:
                last.turn_end = True
            last, opened = None, True
        elif is_reply(item) and opened:
            last = item
    if last is not None and followed_by_person is not False:
        last.turn_end = True


def _mark_waiting(out: list[Entry], status: str) -> None:
    # A queued message waits until something of the agent follows it.
    answered = False
    for item in reversed(out):
        if item.role in ("assistant", "tool"):
            answered = True
        elif item.role == "user" and item.queued and answered:
            item.queued = False
    if status != "running":
        for item in out:
            item.queued = False
    if status == "error" and out and out[-1].kind == "error":
        out[-1].retry = True


def _started_by(metadata: dict[str, Any]) -> str:
    started_by = metadata.get("started_by")
    label = started_by.get("label") if isinstance(started_by, dict) else None
    return label if isinstance(label, str) else ""


def _sent_by(metadata: dict[str, Any]) -> dict[str, Any] | None:
    sent_by = metadata.get("sent_by")
    return sent_by if isinstance(sent_by, dict) else None


def sender_label(entry: Entry, viewer_pk: Any, *, lent: bool) -> str:
    """Who wrote a person's message, as the viewer reads it: "You", the name of
    whoever sent it through a share, or (to someone the conversation is shared
    with) "The owner"."""
    sent_by = entry.sent_by
    if sent_by is not None:
        if viewer_pk is not None and str(sent_by.get("id")) == str(viewer_pk):
            return "You"
        name = sent_by.get("name")
        return name if isinstance(name, str) and name else "Someone"
    return "The owner" if lent else "You"


def entry(row: DisplayMessage, answers: dict[str, DisplayMessage]) -> Entry:
    content = content_of(row)
    base: dict[str, Any] = {
        "pk": row.pk,
        "role": row.message_type if row.message_type in MESSAGE_TYPES else "other",
        "status": row.status if row.status in DISPLAY_STATUSES else "other",
        "inserted_at": row.inserted_at,
        "sequence": row.sequence if isinstance(row.sequence, int) else 0,
    }
    metadata = row.metadata if isinstance(row.metadata, dict) else {}
    reason = str(content.get("stop_reason"))
    base["stopped"] = STOPPED.get(reason, "")
    if base["stopped"]:
        base["stop_label"] = STOP_LABELS.get(reason, "cut off")
        details = content.get("stop_details")
        base["stop_details"] = details if isinstance(details, str) else ""
    match row.content_type:
        case "text":
            raw = _raw(content.get("text"))
            text = clip(raw)
            return Entry(
                kind="text",
                text=text,
                clipped=len(raw) > SHOWN_CHARS,
                html=render_markdown(text),
                queued=bool(metadata.get("queued")) and row.message_type == "user",
                started_by=_started_by(metadata),
                sent_by=_sent_by(metadata),
                **base,
            )
        case "thinking":
            text = _text(content.get("text"))
            return Entry(kind="thinking", text=text, html=render_markdown(text), **base)
        case "error":
            text = _text(content.get("text", content.get("message", "")))
            if content.get("error_type") == "budget_exhausted":
                text = describe_budget(content.get("details"), exhausted=True) or text
            return Entry(kind="error", text=text, html=render_markdown(text), **base)
        case "notification":
            base["stopped"] = base["stop_label"] = ""  # the note says it itself
            text = _text(content.get("text"))
            if "budget" in content:  # said again in the reader's language
                text = describe_budget(content["budget"], exhausted=False) or text
            return Entry(kind="notification", text=text, **base)
        case "tool_call":
            call_id = call_id_of(row)
            answer = answers.get(call_id)
            name = _text(content.get("name"))
            item = Entry(
                kind="tool",
                tool_name=name,
                call_id=call_id,
                arguments=clip(pretty_json(content.get("arguments", {}))),
                subagent=name == "task",
                **base,
            )
            if answer is not None:
                _fold(item, answer)
            return item
        case "tool_result":
            # Shown in its call's card; alone only when the call is not known.
            return Entry(
                kind="result",
                tool_name=_text(content_of(row).get("name")),
                call_id=call_id_of(row),
                result=clip(pretty_json(_raw(content.get("content")))),
                result_is_error=bool(content.get("is_error")) or row.status == "failed",
                **base,
            )
        case _:
            return Entry(kind="other", text=clip(pretty_json(content)), **base)


def _fold(item: Entry, answer: DisplayMessage) -> None:
    content = content_of(answer)
    item.result = clip(pretty_json(_raw(content.get("content"))))
    item.result_pk = answer.pk
    item.result_is_error = bool(content.get("is_error")) or answer.status == "failed"
    if item.result_is_error and item.status == "completed":
        item.status = "failed"


def dom_id(value: Any) -> str:
    """A short id for an element named after any string (a tool call id may hold
    characters a CSS selector cannot)."""
    import hashlib

    return hashlib.sha256(str(value).encode("utf-8", "replace")).hexdigest()[:16]


def tool_results_for(
    conversation_id: Any, rows: list[DisplayMessage], *, tree: Tree | None = None
) -> dict[str, Any]:
    """Results of the calls among ``rows`` that are outside ``rows`` (a page of
    history cut between a call and its answer), in the branch shown (``tree``: a
    model may use a call id in two branches)."""
    calls = {call_id_of(r) for r in rows if r.content_type == "tool_call"} - {""}
    have = {call_id_of(r) for r in rows if r.content_type == "tool_result"}
    missing = calls - have
    if not missing:
        return {}
    found = DisplayMessage.objects.filter(
        conversation_id=conversation_id,
        content_type="tool_result",
        tool_call_id__in=missing,
    )
    shown = path_filter(tree)
    if shown is not None:
        found = found.filter(shown)
    return {call_id_of(r): r for r in found}
