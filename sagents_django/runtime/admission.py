"""Admission: the verbs that start, stop or decide a conversation's turns.

A turn starts as an ``AgentRun`` created in the same transaction as the message that
caused it (the database refuses a second active run of a conversation) and is handed
to the executor after commit. Events about rows are published after commit.

Every state a conversation can reach has a way out for a person:

- a turn runs: a message is queued on it (``DOUBLE_TEXT``), ``cancel`` stops it;
- an approval is pending: ``resume`` decides it, ``dismiss`` abandons it (the
  calls are answered as not run, the transcript says so), and a message sent
  meanwhile is held on the paused run and answered after either
  (``WHILE_APPROVAL_PENDING = "hold"``), or dismisses the approval itself
  (``"dismiss"``). A follow-up never runs on a state that waits for decisions, so
  it can never invalidate the approval.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field, replace
from typing import Any

from django.db import transaction

from sagents_django import services
from sagents_django.approvals import records as approval_records
from sagents_django.conf import sagents_settings
from sagents_django.core import State
from sagents_django.core.approvals import decisions_from_list, interrupt_from_dict
from sagents_django.core.exceptions import InvalidResume
from sagents_django.core.middleware.patch_tool_calls import patch_dangling_tool_calls
from sagents_django.core.serialization import serialize_server_state
from sagents_django.exceptions import Conflict, InvalidInput, NotFound, RunConflict
from sagents_django.models import AgentRun
from sagents_django.scope import Scope
from sagents_django.services.conversations import conversation_pk
from sagents_django.services.validation import clean_json, clean_mapping, message_text

from . import control, runs
from .ending import Ending, end_run
from .events_out import after_commit, signal_after_commit
from .executors import get_executor
from .intake import Prepared, prepare
from .lookup import check_scope, last_run, load_state, pending_interrupt, require
from .publisher import display_message_json
from .requests import QueuedMessage, RunRequest

logger = logging.getLogger(__name__)

MAX_EVENT_BYTES = 256 * 1024
"""A published event's JSON and a middleware notification are bounded (they travel
over the channel layer, whose messages should stay small)."""

WAITS_FOR_DECISIONS = (
    "The conversation waits for decisions on its pending approval; resume it "
    "with them (or dismiss it) first"
)
NOTHING_TO_DISMISS = "Nothing to dismiss: no approval is pending"
DISMISSED_TEXT = "Approval dismissed: {tools} did not run."


@dataclass(frozen=True, slots=True)
class Submission:
    """What ``add_message`` did: the run that will answer and whether the message
    waits (``queued``) for a running turn to end or for a pending approval to be
    decided (``held``)."""

    run_id: str | None
    queued: bool
    message_ids: list[str] = field(default_factory=list)
    held: bool = False


def add_message(
    scope: Scope,
    conversation_id: Any,
    text: Any,
    *,
    metadata: dict[str, Any] | None = None,
    filesystem_scope: Any = None,
) -> Submission:
    """Save the user's message (shown at once) and have the agent answer it.

    Idle: a run starts (``Submission.run_id``). While a turn runs, the site's
    ``SAGENTS["DOUBLE_TEXT"]`` policy decides: "enqueue" keeps the message for a run
    right after the current one (``queued=True``, a ``message_queued`` event),
    "reject" raises ``RunConflict`` and writes nothing, "interrupt" queues it and
    cancels the current turn. While an approval is pending,
    ``SAGENTS["WHILE_APPROVAL_PENDING"]`` decides: "hold" keeps it on the paused run
    until the approval is decided or dismissed (``held=True``), "dismiss" dismisses
    the approval and answers at once. A bad message is ``InvalidInput`` before
    anything is written. The site's ``MESSAGE_PREPROCESSOR`` (``runtime.intake``)
    makes the text shown and the message the model reads."""
    text = message_text(text)
    extra = _metadata(metadata)
    pk = conversation_pk(conversation_id)
    check_scope(scope)
    check_files(scope, pk, filesystem_scope)
    if scope.lent is not None and scope.is_authenticated:
        # Someone the conversation is shared with: the turn is the owner's, the
        # message says whose it is (the run's scope JSON names them too).
        user = scope.user
        who = user.pk if isinstance(user.pk, int) else str(user.pk)
        extra = {**extra, "sent_by": {"id": who, "name": user.get_username()}}
    prepared = prepare(scope, pk, text, extra)
    for attempt in range(5):
        try:
            return _add_message(scope, pk, prepared, filesystem_scope)
        except RunConflict:
            # A turn ended and its queued messages' run began between our look and
            # our write: look again (a real "reject" raises at once).
            if attempt == 4 or sagents_settings.DOUBLE_TEXT == "reject":
                raise
    raise AssertionError("unreachable")


def _add_message(
    scope: Scope,
    pk: Any,
    prepared: Prepared,
    filesystem_scope: Any,
    *,
    trigger: str = "message",
) -> Submission:
    """``trigger``: the run's, when the message starts one (``edit`` for an
    edited message sent again: usage tells it from a new message)."""
    text, extra = prepared.text, prepared.metadata
    policy = sagents_settings.DOUBLE_TEXT
    with transaction.atomic():
        require(scope, pk, lock=True)
        active = AgentRun.objects.of(pk).active().select_for_update().first()
        paused = None
        if active is None and pending_interrupt(pk):
            paused = last_run(pk, lock=True)
            if paused is None:  # a state restored with a pending approval
                raise Conflict(WAITS_FOR_DECISIONS)
        if active is not None and policy == "reject":
            raise RunConflict(pk, run_id=active.pk)
        hold = paused is not None and sagents_settings.WHILE_APPROVAL_PENDING == "hold"
        dismissing = None
        if paused is not None and not hold:
            # The site's policy: a new message dismisses the pending approval (the
            # transcript says so before the message).
            dismissing = _abandon(scope, pk, reason="A new message")
        holder = active or paused
        run = None
        if holder is None and dismissing is None:
            request = RunRequest(
                scope=scope.to_dict(), filesystem_scope=_json_scope(filesystem_scope)
            )
            run = _begin(scope, pk, trigger, request)
        row = services.append_text_message(
            scope,
            pk,
            "user",
            text,
            metadata={**extra, "queued": active is not None or hold},
            run_id=run.pk if run is not None else None,
        )
        message = QueuedMessage(
            text=text, metadata=extra, display_ids=(row.pk,), llm=prepared.llm
        )
        ids = [str(row.pk)]
        row_json = display_message_json(row)
        after_commit(pk, "display_message_saved", {"display_message": row_json})
        answering = run or holder
        signal_after_commit(
            "message_received",
            conversation_id=str(pk),
            run_id=str(answering.pk) if answering is not None else None,
            display_message_ids=[row.pk],
        )
        if dismissing is not None:
            _save_request(dismissing, RunRequest.of(dismissing).with_queued(message))
            return Submission(_end_dismissal(scope, pk, dismissing), False, ids)
        if run is not None:
            _save_request(run, replace(RunRequest.of(run), messages=(message,)))
            return Submission(str(run.pk), False, ids)
        assert holder is not None
        _save_request(holder, RunRequest.of(holder).with_queued(message))
        after_commit(
            pk,
            "message_queued",
            {
                "run_id": str(holder.pk),
                "display_message": row_json,
                "policy": policy if active is not None else "hold",
                "waits_for": "run" if active is not None else "approval",
            },
        )
        if active is not None and policy == "interrupt":
            _request_cancel(scope, pk, "A new message interrupted the turn")
        return Submission(str(holder.pk), True, ids, held=active is None)


def execute(scope: Scope, conversation_id: Any, *, filesystem_scope: Any = None) -> str:
    """Run the agent on the stored state as it is (after a restore, or to retry a
    failed turn); the run's id. ``RunConflict`` while a turn runs, ``Conflict``
    while an approval is pending."""
    pk = conversation_pk(conversation_id)
    check_files(scope, pk, filesystem_scope)
    with transaction.atomic():
        require(scope, pk, lock=True)
        if pending_interrupt(pk):
            raise Conflict(WAITS_FOR_DECISIONS)
        request = RunRequest(
            scope=scope.to_dict(), filesystem_scope=_json_scope(filesystem_scope)
        )
        return str(_begin(scope, pk, "execute", request).pk)


def resume(
    scope: Scope,
    conversation_id: Any,
    decisions: Any,
    *,
    filesystem_scope: Any = None,
    arguments_hashes: Any = None,
) -> str:
    """Continue a turn paused for approval with the person's decisions (the core's
    decision JSON, one per action request); the run's id. The first resume of an
    interrupt wins: a second gets ``Conflict`` (or ``RunConflict`` while the first
    still runs). Decisions of the wrong shape are ``InvalidInput`` and change
    nothing. Messages held while the approval was pending are answered after it.
    ``arguments_hashes``: the ``arguments_hash`` of each action request the person
    was shown (``approvals.records.with_hashes``), in order; a pending approval
    whose arguments hash otherwise (a stale screen) is ``ArgumentsChanged``."""
    try:
        checked = decisions_from_list(decisions)
    except InvalidResume as exc:
        raise InvalidInput(str(exc)) from None
    as_json = bounded([d.to_dict() for d in checked], "decisions")
    pk = conversation_pk(conversation_id)
    check_files(scope, pk, filesystem_scope)
    with transaction.atomic():
        require(scope, pk, lock=True)
        revision = services.state_revision(scope, pk)
        pending = pending_interrupt(pk)
        if not pending:
            raise Conflict("Nothing to resume: no approval is pending")
        _fit(checked, pending)
        if arguments_hashes is not None:
            approval_records.check_seen(pending, arguments_hashes)
        request = RunRequest(
            scope=scope.to_dict(),
            filesystem_scope=_json_scope(filesystem_scope),
            decisions=as_json,
            revision=revision,
            queued=take_held(pk),
        )
        run = _begin(scope, pk, "resume", request)
        approval_records.on_resume(scope, pk, checked, run)
    return str(run.pk)


def dismiss(scope: Scope, conversation_id: Any) -> str | None:
    """Abandon the pending approval: its calls are answered as not run (the model
    is told), their cards end cancelled, the transcript says so, and the
    conversation is free again. Messages held meanwhile are answered at once: the
    id of the run that does, else None. ``Conflict`` when no approval is pending,
    ``RunConflict`` while a run holds the conversation (a resume being applied),
    ``NotFound`` outside the scope."""
    pk = conversation_pk(conversation_id)
    with transaction.atomic():
        require(scope, pk, lock=True)
        active = AgentRun.objects.of(pk).active().first()
        if active is not None:
            raise RunConflict(pk, run_id=active.pk)
        if not pending_interrupt(pk):
            raise Conflict(NOTHING_TO_DISMISS)
        return _dismiss(scope, pk, reason="Dismissed")


def _dismiss(scope: Scope, pk: Any, *, reason: str) -> Any:
    return _end_dismissal(scope, pk, _abandon(scope, pk, reason=reason))


def _abandon(scope: Scope, pk: Any, *, reason: str) -> AgentRun:
    """Abandon the pending approval (in the caller's transaction) in a short run of
    its own, which takes the messages held for it; that run, still open."""
    conversation = require(scope, pk)
    state = load_state(scope, conversation)
    revision = services.state_revision(scope, pk)
    calls = _pending_calls(state.interrupt_data or {})
    approval_records.close_open(pk, status="dismissed", user=scope.user)
    request = RunRequest(scope=scope.to_dict(), queued=take_held(pk))
    run = services.begin_run(scope, pk, trigger="dismiss", metadata=request.to_dict())
    services.save_agent_state(
        scope, pk, serialize_server_state(abandon(state)), expected_revision=revision
    )
    for call_id in calls:
        try:
            row = services.cancel_tool_call(scope, call_id, conversation_id=pk)
        except (NotFound, InvalidInput):
            continue  # a card that never was, or already settled
        after_commit(
            pk,
            "display_message_updated",
            {"display_message": display_message_json(row)},
        )
    names = ", ".join(sorted({name for name in calls.values() if name})) or "the calls"
    note = services.append_text_message(
        scope,
        pk,
        "system",
        DISMISSED_TEXT.format(tools=names),
        metadata={"kind": "approval_dismissed", "reason": reason},
        run_id=run.pk,
    )
    after_commit(
        pk, "display_message_saved", {"display_message": display_message_json(note)}
    )
    return run


def _end_dismissal(scope: Scope, pk: Any, run: AgentRun) -> str | None:
    """End the dismissal's run: the messages it carries start the next run (its
    id, or None)."""
    run.refresh_from_db()
    ended = end_run(scope, run, Ending(status="completed"))
    for event, data in ended.events():
        after_commit(pk, event, data)
    return ended.next_run_id


def abandon(state: State) -> State:
    """``state`` without its pending approval: every call it waited on is answered
    as not run (sub-agent pauses included), as a provider requires."""
    demoted = state.demote_interrupts(lambda _data: False)
    messages = patch_dangling_tool_calls(demoted.messages, include_last=True)
    return replace(demoted.set_messages(messages), interrupt_data=None)


def cancel(scope: Scope, conversation_id: Any) -> bool:
    """Stop the conversation's running turn, from any process; False when no turn
    runs. The turn stops within the core's bound and keeps its partial reply."""
    pk = conversation_pk(conversation_id)
    return _request_cancel(scope, pk, "Cancelled")


def _request_cancel(scope: Scope, pk: Any, reason: str) -> bool:
    with transaction.atomic():
        run = services.request_cancel(scope, pk)
        if run is None:
            return False
        if runs.end_unattended(run, stale_after=sagents_settings.LEASE_SECONDS):
            # Nobody runs it (not started yet, or its process died): it ends here,
            # and the run of the messages queued on it starts.
            ending = Ending.cancelled(carry_own=run.started_at is None)
            for event, data in end_run(scope, run, ending).events():
                after_commit(pk, event, data)
            return True
    message = {"action": "cancel", "run_id": str(run.pk), "reason": reason}
    transaction.on_commit(lambda: send_control(pk, message))
    return True


def _begin(scope: Scope, pk: Any, trigger: str, request: RunRequest) -> AgentRun:
    run = services.begin_run(
        scope, pk, trigger=trigger, queued=True, metadata=request.to_dict()
    )
    get_executor().submit(str(run.pk))
    return run


def take_held(pk: Any) -> tuple[QueuedMessage, ...]:
    """The messages held for a pending approval, taken off the ended runs that
    hold them (the paused run, or a short run of a verb that came after it), oldest
    first, in the caller's transaction."""
    held: list[QueuedMessage] = []
    holders = (
        AgentRun.objects.of(pk)
        .finished()
        .filter(metadata__has_key="queued")
        .select_for_update()
        .order_by("created_at")
    )
    for run in holders:
        request = RunRequest.of(run)
        if request.queued:
            held += request.queued
            _save_request(run, replace(request, queued=()))
    return tuple(held)


def _save_request(run: AgentRun, request: RunRequest) -> None:
    run.metadata = request.to_dict()
    run.save(update_fields=["metadata"])


def _pending_calls(interrupt: dict[str, Any]) -> dict[str, str]:
    """The tool calls a pending approval holds, by call id: its action requests'
    and, for a sub-agent's pause, the parent's ``task`` call."""
    calls: dict[str, str] = {}
    try:
        typed = interrupt_from_dict(interrupt)
    except Exception:
        typed = None
    for request in getattr(typed, "action_requests", None) or ():
        if request.tool_call_id:
            calls[request.tool_call_id] = request.tool_name
    task_call = getattr(typed, "tool_call_id", None) or interrupt.get("tool_call_id")
    if isinstance(task_call, str) and task_call:
        calls[task_call] = "task"
    return calls


def _fit(decisions: list[Any], pending: Any) -> None:
    """Decisions that cannot answer the pending approval are ``InvalidInput``
    before a run exists: one per action request, each of a type it allows. (The
    turn checks again against the state's pending calls.)"""
    try:
        interrupt = interrupt_from_dict(pending)
    except Exception:
        return  # unreadable: the turn says what it makes of it
    requests = getattr(interrupt, "action_requests", None)
    if requests is None:
        return  # a custom interrupt: its middleware checks its own resume
    if len(decisions) != len(requests):
        raise InvalidInput(
            f"Expected {len(requests)} decision(s), one per action request, "
            f"got {len(decisions)}"
        )
    for i, (request, decision) in enumerate(zip(requests, decisions, strict=True)):
        if decision.type not in request.allowed_decisions:
            raise InvalidInput(
                f"decisions[{i}].type {decision.type!r} is not allowed for "
                f"{request.tool_name!r}; allowed: {list(request.allowed_decisions)}"
            )


def send_control(pk: Any, message: dict[str, Any]) -> None:
    from . import loop

    loop.submit(control.send(pk, message))


def _metadata(value: Any) -> dict[str, Any]:
    return clean_mapping(value, what="metadata", max_bytes=MAX_EVENT_BYTES)


def bounded(value: Any, what: str) -> Any:
    """``value`` as JSON the database and the channel layer take: bounded in size
    and depth, NULs and lone surrogates replaced; else ``InvalidInput``."""
    return clean_json(value, what=what, max_bytes=MAX_EVENT_BYTES, require_dict=False)[
        0
    ]


def check_files(scope: Scope, pk: Any, filesystem_scope: Any) -> None:
    """A filesystem scope a call names must be one ``scope`` may write
    (``sharing.filesystems.check_named``): else ``PermissionDenied`` (a read
    share) or ``NotFound``, before anything is written."""
    if filesystem_scope is None:
        return
    _json_scope(filesystem_scope)
    from sagents_django.sharing.filesystems import check_named

    check_named(scope, pk, filesystem_scope)


def _json_scope(value: Any) -> Any:
    if value is None:
        return None
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        raise InvalidInput("filesystem_scope must be JSON, e.g. ['user', 42]") from None
    return list(value) if isinstance(value, tuple) else value
