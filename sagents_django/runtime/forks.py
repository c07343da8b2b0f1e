"""Forks: a new conversation that starts from another's history, cut at a turn.

Upstream Sagents v0.15 (``Sagents.Fork``) builds a fork from an idle agent's whole
state: the messages and nothing else (no todos, no metadata, no pending interrupt,
no files), never cut inside a turn. Here a fork is cut where a person chooses: at
the end of the *turn* (a person's message and everything that answered it) that
holds the chosen transcript row, so every tool call in it has its result.

Where this differs from upstream, and why:

- **The transcript comes along.** Upstream's primed messages have no display rows;
  a person forking from the chat page expects to see what they forked, so the
  rows up to the cut are copied (new rows, the original times), followed by a
  note saying where the fork came from.
- **Any point, not only the end.** The agent's messages are cut at the same turn as
  the transcript. The two views are matched by counting turns from the end (the
  state holds the latest turns whole; summaries replace only the oldest), so a
  point older than what the agent still remembers (summarized away, or before a
  reset) is refused with a clear error instead of forking a memory that does not
  match the transcript.
- **A busy source is not refused.** While a turn runs or an approval waits, the
  last turn is not finished: the fork is cut at the boundary before it (the last
  completed turn), and the source goes on untouched.
- **A title.** The fork is named after its source ("Fork of ..."), so people can
  tell them apart in the list; a caller may pass its own. The agent's metadata
  starts blank, as upstream, so no middleware key carries over.

Files are not copied (as upstream): a fork whose ``FILESYSTEM_SCOPE`` is its own
starts with none, one sharing its owner's files (``owner_files``) sees them.
Runs and their usage stay with the source, as does feedback.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from django.db import transaction
from django.db.models import Q

from sagents_django import services
from sagents_django.core import Message, State
from sagents_django.core.serialization import (
    deserialize_server_state,
    serialize_server_state,
)
from sagents_django.exceptions import Conflict, InvalidInput, NotFound
from sagents_django.models import ACTIVE_RUN_STATUSES, AgentRun, DisplayMessage
from sagents_django.scope import Scope
from sagents_django.services.branches import load_tree, path_filter
from sagents_django.services.conversations import (
    TITLE_MAX_LENGTH,
    conversation_pk,
    refuse_lent,
)
from sagents_django.services.usage import TURN_STARTS
from sagents_django.services.validation import clean_text, parse_int

from .events_out import after_commit
from .lookup import require
from .publisher import display_message_json
from .requests import RunRequest

FORK_NOTE: Final = (
    "Forked from “{title}”: the agent remembers the conversation up to here."
)
NOT_REMEMBERED: Final = (
    "The agent no longer remembers that part of the conversation in detail (it was "
    "summarized or reset): fork from a later message."
)
MAX_MESSAGE_ID: Final = 2**63 - 1


@dataclass(frozen=True, kw_only=True, slots=True)
class Cut:
    """Where a fork is cut: how many of the agent's messages and transcript rows
    it keeps."""

    messages: int
    rows: int


def fork(
    scope: Scope,
    conversation_id: Any,
    *,
    at_message: Any = None,
    title: Any = None,
) -> Any:
    """A new conversation of ``scope`` holding the history of conversation
    ``conversation_id`` up to the end of the turn of transcript row ``at_message``
    (None: the last completed turn); the new conversation.

    ``NotFound`` for a conversation or row outside the scope; ``InvalidInput`` for
    a point the agent no longer remembers or a bad title; ``Conflict`` when the
    history there has a tool call with no result (it cannot be continued)."""
    pk = conversation_pk(conversation_id)
    # A fork belongs to the scope's owner: through a share, that would be the
    # conversation's owner, not the person forking.
    refuse_lent(scope, pk)
    chosen = (
        None
        if at_message is None
        else parse_int(at_message, what="at_message", minimum=1, maximum=MAX_MESSAGE_ID)
    )
    if title is not None:
        title = clean_text(title, what="title", max_length=TITLE_MAX_LENGTH, strip=True)
    with transaction.atomic():
        # The row lock admission and a run's end take: no run starts or ends while
        # the turns are counted.
        source = require(scope, pk, lock=True)
        data, revision = services.load_agent_state_revision(scope, pk)
        state = deserialize_server_state(None, data) if data is not None else State()
        # The branch shown, as its state is the one loaded above.
        rows = path_rows(pk, load_tree(pk))
        at = _index_of(rows, chosen)
        waiting, open_turn = _undelivered(pk, revision, state)
        cut = cut_at(state.messages, rows, at, waiting=waiting, open_turn=open_turn)
        kept = state.messages[: cut.messages]
        unanswered = unanswered_calls(kept)
        if unanswered:
            raise Conflict(
                "The history there has tool calls with no result "
                f"({', '.join(unanswered[:5])}): it cannot be continued"
            )
        name = title if title is not None else _fork_title(source.title)
        new = services.create_conversation(
            scope,
            title=name,
            metadata={
                "forked_from": {
                    "conversation_id": str(pk),
                    "message_id": rows[at].pk if rows else None,
                }
            },
        )
        forked = State(agent_id=new.agent_id, messages=list(kept))
        services.save_agent_state(scope, new.pk, serialize_server_state(forked))
        copied = [row for row in rows[: cut.rows] if row.pk not in waiting]
        _copy_rows(new.pk, copied)
        note = services.append_display_message(
            scope,
            new.pk,
            message_type="system",
            content_type="notification",
            content={
                "text": FORK_NOTE.format(title=source.title or "Untitled"),
                "reason": "fork",
                "forked_from": str(pk),
            },
        )
    after_commit(
        new.pk, "display_message_saved", {"display_message": display_message_json(note)}
    )
    return new


def cut_at(
    messages: Sequence[Message],
    rows: Sequence[DisplayMessage],
    at: int,
    *,
    waiting: set[int] | frozenset[int] = frozenset(),
    open_turn: bool = False,
) -> Cut:
    """Where to cut for transcript row ``rows[at]``: after its turn, or before the
    open turn (one running or waiting for an approval) when it is in it.

    Turns are counted from the end in both views: in the agent's ``messages`` a
    turn starts at a user message that does not follow another; in the transcript
    at a person's text row (not ``waiting`` to be delivered) that does not follow
    another person's row."""
    starts = turn_starts(messages)
    people = [
        i
        for i, row in enumerate(rows)
        if row.message_type == "user"
        and row.content_type == "text"
        and row.pk not in waiting
        and not (i and _by_person(rows[i - 1]) and rows[i - 1].pk not in waiting)
    ]
    later = [i for i in people if i > at]
    drop = max(len(later), 1 if open_turn else 0)
    if drop > len(starts) or (drop and drop > len(people)):
        raise InvalidInput(NOT_REMEMBERED)
    if not drop:
        return Cut(messages=len(messages), rows=len(rows))
    return Cut(messages=starts[len(starts) - drop], rows=people[len(people) - drop])


def path_rows(pk: Any, tree: Any = None) -> list[DisplayMessage]:
    """The rows of the branch shown (``services.branches``), in display order."""
    rows = DisplayMessage.objects.filter(conversation_id=pk)
    condition = path_filter(tree)
    if condition is not None:
        rows = rows.filter(condition)
    return list(rows.order_by("inserted_at", "sequence", "id"))


def turn_starts(messages: Sequence[Message]) -> list[int]:
    """Indexes of the agent's messages where a person's turn starts."""
    return [
        i
        for i, message in enumerate(messages)
        if message.role == "user" and not (i and messages[i - 1].role == "user")
    ]


def unanswered_calls(messages: Sequence[Message]) -> list[str]:
    """Ids of the tool calls in ``messages`` that have no result there."""
    answered = {r.tool_call_id for m in messages for r in m.tool_results}
    return [
        call.call_id
        for m in messages
        for call in m.tool_calls
        if call.call_id not in answered
    ]


def _by_person(row: DisplayMessage) -> bool:
    return row.message_type == "user" and row.content_type == "text"


def _index_of(rows: list[DisplayMessage], chosen: int | None) -> int:
    if chosen is None:
        return len(rows) - 1
    for i, row in enumerate(rows):
        if row.pk == chosen:
            return i
    raise NotFound("message", chosen)


def _undelivered(pk: Any, revision: int, state: State) -> tuple[set[int], bool]:
    """The transcript rows of messages the stored state does not hold yet (queued
    on a running turn, held for an approval, or not yet taken by their run), and
    whether the state's last turn is open (an approval waits, or a run goes on
    from it)."""
    waiting: set[int] = set()
    open_turn = bool(state.interrupt_data)
    runs = AgentRun.objects.of(pk).filter(
        Q(status__in=ACTIVE_RUN_STATUSES) | Q(metadata__has_key="queued")
    )
    for run in runs:
        request = RunRequest.of(run)
        for message in request.queued:
            waiting.update(message.display_ids)
        if not run.is_active:
            continue
        # A run's messages are in the state from the revision it declared; a
        # state read before that does not hold them.
        delivered = run.checkpoint_revision is not None and (
            run.checkpoint_revision <= revision
        )
        if run.trigger in TURN_STARTS and not delivered:
            for message in request.messages:
                waiting.update(message.display_ids)
        else:
            open_turn = True
    return waiting, open_turn


def _fork_title(title: str) -> str:
    return f"Fork of {title or 'Untitled'}"[:TITLE_MAX_LENGTH]


def _copy_rows(pk: Any, rows: list[DisplayMessage]) -> None:
    """The rows again in conversation ``pk``, at their original times (the
    transcript says when things were said; ``inserted_at`` orders the rows)."""
    copies = DisplayMessage.objects.bulk_create(
        [
            DisplayMessage(
                conversation_id=pk,
                message_type=row.message_type,
                content_type=row.content_type,
                content=row.content,
                sequence=row.sequence,
                status=row.status,
                tool_call_id=row.tool_call_id,
                metadata=row.metadata,
            )
            for row in rows
        ]
    )
    if not copies:
        return
    if any(copy.pk is None for copy in copies):  # a backend that returns no ids
        copies = list(DisplayMessage.objects.filter(conversation_id=pk).order_by("id"))
    for copy, row in zip(copies, rows, strict=True):
        copy.inserted_at = row.inserted_at
    DisplayMessage.objects.bulk_update(copies, ["inserted_at"], batch_size=500)
