"""Branches: regenerate a reply, edit a person's message and send it again, switch
between the branches that made (``< 2 / 3 >`` in the transcript).

Nothing is destroyed: a regenerate or an edit starts a new branch at a person's
message, and the branch it leaves keeps its rows and its agent state
(``ConversationBranch``; ``services.branches`` says how a branch's rows are told
apart). The agent follows the branch shown: switching stores the state of the
branch left and restores the one of the branch shown, so the next turn continues
from it.

What a new branch starts from:

- **Messages**: the agent's messages cut at the same turn boundary as a fork
  (``forks.cut_at``): before the edited message's turn, or (regenerate) after the
  person's messages of the turn whose reply is made again.
- **Todos**: those of the branch point where they can be known. When the turns
  cut away wrote no todos, the current list stands; otherwise the
  ``write_todos`` calls of the kept messages are replayed, as the TodoList
  middleware applied them (exact while the kept history is whole; a summarized
  history replays from its summary on).
- **Metadata** (a middleware's notes, a generated title) is the conversation's,
  kept as it is.
- **Files are not branched.** They live in a filesystem scope that other
  conversations may share (``owner_files``), a tool's write to them is a side
  effect the transcript cannot take back, and no checkpoint holds them (step
  checkpoints hold messages, todos and metadata, and are folded away when a turn
  ends). A branch sees the files as they are now.

Branching and switching are refused while a turn runs (``RunConflict``) or an
approval waits (``Conflict``): both would write rows or state of the branch being
left.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from sagents_django import services
from sagents_django.core import Message, State
from sagents_django.core.middleware.todo_list import (
    TOOL_NAME as WRITE_TODOS,
)
from sagents_django.core.middleware.todo_list import (
    clear_if_resolved,
    merge_todos,
    parse_todos,
)
from sagents_django.core.serialization import (
    deserialize_server_state,
    serialize_server_state,
)
from sagents_django.core.todo import Todo
from sagents_django.exceptions import Conflict, InvalidInput, NotFound, RunConflict
from sagents_django.models import AgentRun, ConversationBranch, DisplayMessage
from sagents_django.scope import Scope
from sagents_django.services.branches import Tree, load_tree, node_of, point_rows
from sagents_django.services.conversations import conversation_pk
from sagents_django.services.validation import message_text, parse_int

from .admission import (
    WAITS_FOR_DECISIONS,
    Submission,
    _add_message,
    _begin,
    _json_scope,
    _metadata,
    check_files,
)
from .events_out import after_commit
from .forks import MAX_MESSAGE_ID, cut_at, path_rows, unanswered_calls
from .intake import prepare
from .lookup import pending_interrupt, require
from .requests import RunRequest

NOT_SHOWN: Final = (
    "Message {id} is not in the branch shown: the page is out of date, reload it"
)
BRANCH_EVENT: Final = "branch_switched"


def regenerate(
    scope: Scope, conversation_id: Any, message_id: Any, *, filesystem_scope: Any = None
) -> Submission:
    """Make the reply ``message_id`` (a row the agent wrote in answer to a person)
    again, in a new branch: the person's message is shared, the new reply is its
    sibling. The run's id is ``Submission.run_id``."""
    pk = conversation_pk(conversation_id)
    wanted = _message_id(message_id)
    check_files(scope, pk, filesystem_scope)
    with transaction.atomic():
        require(scope, pk, lock=True)
        _check_idle(pk)
        rows, tree = _shown(pk)
        at = _position(pk, rows, wanted)
        first, last = _turn_of(rows, at)
        if at <= last:
            raise InvalidInput(
                f"Message {wanted} is the person's: regenerate a reply (or edit "
                "the message)"
            )
        state, data, revision = _state(scope, pk)
        cut = _cut_before(state, rows, first)
        through = cut
        while through < len(state.messages) and state.messages[through].role == "user":
            through += 1
        if through == cut:
            raise Conflict(
                "The agent no longer holds the messages of that turn: nothing to "
                "regenerate from"
            )
        _branch_off(scope, pk, tree, rows[last].pk, data, revision, state, through)
        request = RunRequest(
            scope=scope.to_dict(), filesystem_scope=_json_scope(filesystem_scope)
        )
        run = _begin(scope, pk, "regenerate", request)
        _announce(pk, "regenerate", wanted)
    return Submission(str(run.pk), False, [])


def edit_and_resend(
    scope: Scope,
    conversation_id: Any,
    message_id: Any,
    text: Any,
    *,
    metadata: dict[str, Any] | None = None,
    filesystem_scope: Any = None,
) -> Submission:
    """Send ``text`` in place of the person's message ``message_id``, in a new
    branch (the old message and all that followed it stay in theirs). The text is
    checked and preprocessed as ``add_message`` does."""
    text = message_text(text)
    extra = _metadata(metadata)
    pk = conversation_pk(conversation_id)
    wanted = _message_id(message_id)
    require(scope, pk)
    check_files(scope, pk, filesystem_scope)
    prepared = prepare(scope, pk, text, extra)  # outside the transaction
    with transaction.atomic():
        require(scope, pk, lock=True)
        _check_idle(pk)
        rows, tree = _shown(pk)
        at = _position(pk, rows, wanted)
        first, _ = _turn_of(rows, at)
        if at != first:
            raise InvalidInput(
                f"Message {wanted} is not a person's message that starts a turn: "
                "edit the person's message"
            )
        state, data, revision = _state(scope, pk)
        cut = _cut_before(state, rows, first)
        before = rows[first - 1].pk if first else None
        _branch_off(scope, pk, tree, before, data, revision, state, cut)
        _announce(pk, "edit", wanted)
        return _add_message(scope, pk, prepared, filesystem_scope, trigger="edit")


def switch_branch(
    scope: Scope, conversation_id: Any, message_id: Any, index: Any
) -> int:
    """Show alternative ``index`` (from 1) of the branch point at row
    ``message_id`` (the row that shows ``< n / m >``): the latest branch through
    it, whose agent state becomes the conversation's. The branch's number."""
    pk = conversation_pk(conversation_id)
    wanted = _message_id(message_id)
    index = parse_int(index, what="index", minimum=1, maximum=10_000)
    with transaction.atomic():
        require(scope, pk, lock=True)
        _check_idle(pk)
        rows, tree = _shown(pk)
        _position(pk, rows, wanted)
        point = point_rows(pk, tree).get(wanted)
        if point is None:
            raise InvalidInput(f"Message {wanted} has no other branch to switch to")
        if index > point.count:
            raise InvalidInput(
                f"index must be between 1 and {point.count} for message {wanted}; "
                f"got {index}"
            )
        assert tree is not None
        target = tree.latest_in(point, index - 1)
        if target != tree.active.number:
            _show(scope, pk, target)
            _announce(pk, "switch", wanted)
    return target


# The steps ------------------------------------------------------------------------


def _message_id(value: Any) -> int:
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value) if len(value) <= 19 else value
    return parse_int(value, what="message_id", minimum=1, maximum=MAX_MESSAGE_ID)


def _check_idle(pk: Any) -> None:
    active = AgentRun.objects.of(pk).active().first()
    if active is not None:
        raise RunConflict(pk, run_id=active.pk)
    if pending_interrupt(pk):
        raise Conflict(WAITS_FOR_DECISIONS)


def _shown(pk: Any) -> tuple[list[DisplayMessage], Tree | None]:
    tree = load_tree(pk)
    return path_rows(pk, tree), tree


def _position(pk: Any, rows: list[DisplayMessage], wanted: int) -> int:
    for i, row in enumerate(rows):
        if row.pk == wanted:
            return i
    if DisplayMessage.objects.filter(pk=wanted, conversation_id=pk).exists():
        raise InvalidInput(NOT_SHOWN.format(id=wanted))
    raise NotFound("message", wanted)


def _by_person(row: DisplayMessage) -> bool:
    return row.message_type == "user" and row.content_type == "text"


def _turn_of(rows: list[DisplayMessage], at: int) -> tuple[int, int]:
    """The first and last of the person's rows that start the turn holding
    ``rows[at]`` (a turn starts at a person's text row)."""
    first = at
    while first >= 0 and not _by_person(rows[first]):
        first -= 1
    if first < 0:
        raise InvalidInput(
            f"Message {rows[at].pk} answers no person's message: nothing to branch from"
        )
    while first > 0 and _by_person(rows[first - 1]):
        first -= 1
    last = first
    while last + 1 < len(rows) and _by_person(rows[last + 1]):
        last += 1
    return first, last


def _state(scope: Scope, pk: Any) -> tuple[State, dict[str, Any] | None, int]:
    data, revision = services.load_agent_state_revision(scope, pk)
    state = deserialize_server_state(None, data) if data is not None else State()
    return state, data, revision


def _cut_before(state: State, rows: list[DisplayMessage], first: int) -> int:
    """How many of the agent's messages come before the turn at ``rows[first]``."""
    cut = cut_at(state.messages, rows, first - 1).messages
    unanswered = unanswered_calls(state.messages[:cut])
    if unanswered:
        raise Conflict(
            "The history there has tool calls with no result "
            f"({', '.join(unanswered[:5])}): it cannot be continued"
        )
    return cut


def todos_at(state: State, cut: int) -> list[Todo]:
    """The todos after the agent's first ``cut`` messages (see the module's
    docstring): the current ones when the rest wrote none, else a replay."""
    if not _writes_todos(state.messages[cut:]):
        return list(state.todos)
    kept = state.messages[:cut]
    answered = {r.tool_call_id: r for m in kept for r in m.tool_results}
    todos: list[Todo] = []
    for message in kept:
        for call in message.tool_calls:
            result = answered.get(call.call_id)
            if call.name != WRITE_TODOS or result is None or result.is_error:
                continue
            try:
                written = parse_todos(call.arguments.get("todos"), todos)
            except ValueError:
                continue
            if call.arguments.get("merge") is True:
                written = merge_todos(todos, written)
            todos = clear_if_resolved(written)
    return todos


def _writes_todos(messages: list[Message]) -> bool:
    return any(c.name == WRITE_TODOS for m in messages for c in m.tool_calls)


def _branch_off(
    scope: Scope,
    pk: Any,
    tree: Tree | None,
    keeps_through: int | None,
    data: dict[str, Any] | None,
    revision: int,
    state: State,
    cut: int,
) -> ConversationBranch:
    """A new branch after row ``keeps_through``, shown from now on, whose agent
    starts from the first ``cut`` messages of ``state``."""
    now = timezone.now()
    top = _top_row(pk)
    branches = list(
        ConversationBranch.objects.select_for_update().filter(conversation_id=pk)
    )
    if not branches:
        trunk = ConversationBranch.objects.create(
            conversation_id=pk,
            number=0,
            segments=[[0, None]],
            active=True,
            activated_at=now,
        )
        branches = [trunk]
        tree = Tree([node_of(trunk)])
    assert tree is not None
    owner = 0 if keeps_through is None else tree.owner_of(keeps_through)
    if owner is None:
        raise Conflict("The transcript changed while branching: try again")
    shown = next(b for b in branches if b.active)
    _leave(shown, data, top)
    new = ConversationBranch.objects.create(
        conversation_id=pk,
        number=max(b.number for b in branches) + 1,
        parent=owner,
        keeps_through=keeps_through,
        segments=[[top, None]],
        active=True,
        activated_at=now,
    )
    kept = state.messages[:cut]
    start = replace(
        state,
        messages=list(kept),
        todos=todos_at(state, cut),
        interrupt_data=None,
    )
    services.save_agent_state(
        scope, pk, serialize_server_state(start), expected_revision=revision
    )
    return new


def _show(scope: Scope, pk: Any, number: int) -> None:
    """Show branch ``number``: the shown one keeps its state and rows, the other's
    state becomes the conversation's."""
    data, revision = services.load_agent_state_revision(scope, pk)
    branches = {
        b.number: b
        for b in ConversationBranch.objects.select_for_update().filter(
            conversation_id=pk
        )
    }
    top = _top_row(pk)
    _leave(next(b for b in branches.values() if b.active), data, top)
    target = branches[number]
    restored = target.state_data
    target.state_data = None
    target.active = True
    target.activated_at = timezone.now()
    target.segments = [*target.segments, [top, None]]
    target.save(update_fields=["state_data", "active", "activated_at", "segments"])
    envelope = restored or serialize_server_state(State())
    services.save_agent_state(scope, pk, envelope, expected_revision=revision)


def _leave(branch: ConversationBranch, data: dict[str, Any] | None, top: int) -> None:
    """``branch`` stops being shown: its open range closes at row ``top`` and it
    keeps the agent state ``data``."""
    segments = [list(s) for s in branch.segments]
    if segments and segments[-1][1] is None:
        after = segments[-1][0]
        if top > after:
            segments[-1][1] = top
        else:
            segments.pop()  # shown, but nothing was written
    branch.segments = segments
    branch.state_data = data
    branch.active = False
    branch.save(update_fields=["segments", "state_data", "active"])


def _top_row(pk: Any) -> int:
    top = DisplayMessage.objects.filter(conversation_id=pk).aggregate(top=Max("id"))
    return int(top["top"] or 0)


def _announce(pk: Any, reason: str, message_id: int) -> None:
    after_commit(pk, BRANCH_EVENT, {"reason": reason, "message_id": message_id})
