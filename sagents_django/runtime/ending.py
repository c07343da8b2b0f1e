"""How every run ends: one function, whatever ended it.

A run ends because its turn completed, paused for approval, failed, was cancelled
(by its turn, or by ``cancel`` when no process holds it), or because its workers kept
dying (the sweeper's last word). Each of these used to end the run its own way, and
the ``run_finished`` payload was built in two places; the differences were bugs
(a cancelled run nobody held wrote a different note than one a turn stopped). Here
``end_run`` does it once, in one transaction:

- the transcript's note for a cancel or an error (``SyntheticMessage`` rows);
- the run's row: status, error, usage, cost, its step checkpoints folded;
- the run of the messages queued on it, created and handed to the executor after
  commit, unless the run paused for approval: then they wait for the decision
  (``admission.resume`` / ``dismiss`` take them), so a follow-up never runs on a
  state that waits for decisions;
- the lifecycle signals, after commit.

It returns an ``Ended`` whose ``events()`` are the frames to publish, in order; the
caller publishes them (a turn through its own publisher, keeping one publisher per
conversation while it runs; a verb after commit). A database that keeps failing still
frees the conversation (``runs.end_plainly``) and is recorded for operators.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, Literal

from django.db import transaction

from sagents_django import services
from sagents_django.approvals import records as approval_records
from sagents_django.core import AgentResult, TokenUsage
from sagents_django.core.persistence import PersistenceContext, SyntheticMessage
from sagents_django.exceptions import RunConflict
from sagents_django.models import AgentRun, DisplayMessage
from sagents_django.persistence import DjangoDisplayMessagePersistence, record_failure
from sagents_django.scope import Scope
from sagents_django.services.sql import unit

from . import checkpoints, runs
from .events_out import signal_after_commit
from .publisher import display_message_json
from .requests import RunRequest

logger = logging.getLogger(__name__)

FinalStatus = Literal["completed", "interrupted", "cancelled", "error"]

CANCELLED_TEXT = "Agent execution cancelled."
RETRIES = (0.2, 0.5, 1.0)
"""Pauses (seconds) between attempts to end a run when the database fails."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Ending:
    """How a run ended, and what the transcript says of it."""

    status: FinalStatus
    error: str = ""
    error_type: str | None = None
    """For an error: the kind of the transcript's error row (None: no row)."""
    retryable: bool = False
    note_cancel: bool = False
    """Write the transcript's "cancelled" note."""
    usage: TokenUsage = field(default_factory=TokenUsage)
    cost: Decimal | None = Decimal(0)
    model: str = ""
    """The agent's model (stored on the run: feedback and usage name it)."""
    interrupt_data: dict[str, Any] | None = None
    details: dict[str, Any] = field(default_factory=dict)
    """For an error: JSON the transcript's row keeps beside its text (a budget's
    numbers, so the page can say it in the reader's language)."""
    carry_own: bool = False
    """The run's own messages never reached the state: its follow-up takes them."""

    @classmethod
    def failed(
        cls,
        error: str,
        error_type: str = "agent_error",
        *,
        retryable: bool = False,
        **rest: Any,
    ) -> Ending:
        return cls(
            status="error",
            error=error,
            error_type=error_type,
            retryable=retryable,
            **rest,
        )

    @classmethod
    def cancelled(cls, **rest: Any) -> Ending:
        return cls(status="cancelled", note_cancel=True, **rest)

    @property
    def agent_status(self) -> str:
        """The agent's status after it (Sagents: a completed agent is idle)."""
        return "idle" if self.status == "completed" else self.status

    def notes(self) -> list[SyntheticMessage]:
        notes: list[SyntheticMessage] = []
        if self.note_cancel:
            notes.append(
                {
                    "message_type": "system",
                    "content_type": "notification",
                    "content": {"text": CANCELLED_TEXT, "stop_reason": "cancelled"},
                }
            )
        if self.status == "error" and self.error_type is not None:
            notes.append(
                {
                    "message_type": "system",
                    "content_type": "error",
                    "content": {
                        "text": self.error,
                        "error_type": self.error_type,
                        "retryable": self.retryable,
                        **({"details": self.details} if self.details else {}),
                    },
                }
            )
        return notes


@dataclass(frozen=True, kw_only=True, slots=True)
class Ended:
    """A run that ended: the rows its ending wrote and the run that follows it."""

    run_id: str
    trigger: str
    ending: Ending
    rows: list[Any] = field(default_factory=list)
    next_run_id: str | None = None
    saved: bool = True
    """False when only the run's own row could be ended (the database failed)."""

    def events(self) -> list[tuple[str, dict[str, Any]]]:
        """The frames announcing it, in the order they are published."""
        ending = self.ending
        events: list[tuple[str, dict[str, Any]]] = [
            ("display_message_saved", {"display_message": display_message_json(row)})
            for row in self.rows
        ]
        if ending.status == "error" and ending.error_type is not None:
            events.append(
                (
                    "error",
                    {
                        "error": ending.error,
                        "error_type": ending.error_type,
                        "retryable": ending.retryable,
                    },
                )
            )
        cost = ending.cost
        events.append(
            (
                "run_finished",
                {
                    "run_id": self.run_id,
                    "trigger": self.trigger,
                    "status": ending.status,
                    "error": ending.error,
                    "usage": ending.usage.to_dict(),
                    "cost": None if cost is None else f"{cost.normalize():f}",
                    # Created already: a client never sees a moment with neither
                    # run active.
                    "next_run_id": self.next_run_id,
                },
            )
        )
        status: dict[str, Any] = {"status": ending.agent_status, "run_id": self.run_id}
        if ending.status == "interrupted":
            # With each request's arguments hash: a client sends them back with
            # its decisions, so a decision on a stale screen is refused.
            status["data"] = approval_records.with_hashes(ending.interrupt_data)
        elif ending.status == "error":
            status["data"] = {"error": ending.error}
        events.append(("status_changed", status))
        return events


def end_run(
    scope: Scope,
    run: AgentRun,
    ending: Ending,
    *,
    display: Any = None,
    context: PersistenceContext | None = None,
) -> Ended:
    """End ``run`` (on a database thread or in a request). Tries the whole ending a
    few times when the database fails, then at least the run's own row."""
    for pause in (*RETRIES, None):
        try:
            with transaction.atomic():
                return end_within(scope, run, ending, display=display, context=context)
        except Exception as exc:
            if pause is not None:
                logger.warning("Ending run %s failed; trying again", run.pk)
                time.sleep(pause)
                continue
            logger.exception("Could not end run %s", run.pk)
            failure = exc
    for pause in (*RETRIES, None):
        try:
            runs.end_plainly(run.pk, ending.status, ending.error)
            break
        except Exception:
            if pause is None:
                logger.exception("Run %s could not be ended", run.pk)
            else:
                time.sleep(pause)
    try:
        record_failure(
            scope,
            context or _context(run),
            failure,
            kind="state",
            operation="finish_run",
        )
    except Exception:
        logger.exception("Could not record the failed ending of run %s", run.pk)
    return Ended(run_id=str(run.pk), trigger=run.trigger, ending=ending, saved=False)


def end_with_state(
    scope: Scope,
    run: AgentRun,
    ending: Ending,
    *,
    save: Callable[[], Any],
    signals: list[tuple[str, dict[str, Any]]],
    display: Any = None,
    context: PersistenceContext | None = None,
) -> tuple[Any, Ended]:
    """A turn's last save (``save()``, fenced by its lease) and its ending in one
    transaction: one commit and one database hop fewer than the save, then
    ``end_run``. The lifecycle ``signals`` that came between the two go after the
    commit, before the ending's own. Raises on any failure, with nothing written:
    the caller then saves and ends apart, with ``end_run``'s retries."""
    with unit():
        row = save()
        for name, kwargs in signals:
            signal_after_commit(name, **kwargs)
        return row, end_within(scope, run, ending, display=display, context=context)


def end_within(
    scope: Scope,
    run: AgentRun,
    ending: Ending,
    *,
    display: Any = None,
    context: PersistenceContext | None = None,
) -> Ended:
    """The ending's writes, in the caller's transaction (``end_run`` retries it)."""
    pk = run.conversation_id
    # The conversation first, then the run, as admission takes them: a message
    # arriving now either queues on this run or starts after its follow-up.
    conversations = services.conversation_model()._default_manager
    list(conversations.select_for_update().filter(pk=pk).values_list("pk", flat=True))
    locked = AgentRun.objects.select_for_update().get(pk=run.pk)
    display = display or DjangoDisplayMessagePersistence()
    context = context or _context(run)
    rows = [
        row
        for note in ending.notes()
        if (row := display.save_synthetic_message(scope, note, context)) is not None
    ]
    checkpoints.fold(run.pk)
    services.finish_run(
        scope,
        run.pk,
        status=ending.status,
        error=ending.error,
        usage=ending.usage,
        cost=ending.cost,
        model=ending.model,
    )
    if run.trigger == "resume":
        # The decided calls it carried out: what they did goes on their requests.
        approval_records.settle(run, ending.status)
    if ending.status == "interrupted":
        approval_records.record_interrupt(locked, ending.interrupt_data)
    follow = None
    if ending.status != "interrupted":
        # Paused for approval: the queued messages wait for the decision.
        follow = start_queued(scope, locked, carry_own=ending.carry_own)
    _signal(run, ending)
    return Ended(
        run_id=str(run.pk),
        trigger=run.trigger,
        ending=ending,
        rows=rows,
        next_run_id=str(follow.pk) if follow is not None else None,
    )


def start_queued(
    scope: Scope, run: AgentRun, *, carry_own: bool = False
) -> AgentRun | None:
    """A run for the messages queued on ``run`` (which has ended, or whose
    approval was decided), handed to the executor after commit; None when nothing
    was queued. With ``carry_own``, ``run``'s own messages (which never reached the
    state) first. A chain of runs that keeps queueing itself stops after
    ``MAX_QUEUED_ROUNDS``: the messages are kept, the agent is not run again."""
    from sagents_django.conf import sagents_settings

    from .executors import get_executor

    request = RunRequest.of(run)
    if not request.queued:
        return None
    follow = request.follow_up(carry_own=carry_own)
    if follow.round > sagents_settings.MAX_QUEUED_ROUNDS:
        follow = replace(follow, halted=True)
    try:
        with transaction.atomic():
            new = services.begin_run(
                scope,
                run.conversation_id,
                trigger="queued",
                queued=True,
                metadata=follow.to_dict(),
            )
    except RunConflict:
        return None  # another run started; the messages stay on this one's row
    AgentRun.objects.filter(pk=run.pk).update(
        metadata=replace(request, queued=()).to_dict(),
        next_run=new,
    )
    # The messages' rows name the run that answers them from now on.
    ids = [i for message in follow.messages for i in message.display_ids]
    DisplayMessage.objects.filter(pk__in=ids, run__isnull=True).update(run=new)
    get_executor().submit(str(new.pk))
    return new


def _signal(run: AgentRun, ending: Ending) -> None:
    conversation_id = str(run.conversation_id)
    signal_after_commit(
        "status_changed",
        conversation_id=conversation_id,
        status=ending.agent_status,
        run_id=str(run.pk),
    )
    signal_after_commit(
        "run_finished",
        conversation_id=conversation_id,
        run_id=str(run.pk),
        status=ending.status,
        error=ending.error,
        usage=ending.usage.to_dict(),
        cost=ending.cost,
    )


def _context(run: AgentRun) -> PersistenceContext:
    return PersistenceContext(
        agent_id=f"conversation-{run.conversation_id}",
        conversation_id=str(run.conversation_id),
        run_id=str(run.pk),
    )


def closing_signals(result: AgentResult) -> list[tuple[str, dict[str, Any]]]:
    """The lifecycle signals between a turn's last save and its ending."""
    signals: list[tuple[str, dict[str, Any]]] = []
    state = result.state
    if result.status == "interrupted":
        signals.append(("interrupt_raised", {"interrupt_data": state.interrupt_data}))
    last = state.messages[-1] if state.messages else None
    # The agent's reply: a turn paused for approval has not answered yet.
    if result.status == "completed" and last is not None and last.role == "assistant":
        signals.append(("agent_response", {"message": last.to_dict()}))
    return signals
