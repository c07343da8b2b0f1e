"""Waiting for a run to end: what a script, a shell or the generated coordinator
does after ``add_message`` or ``resume`` when it wants the answer, not the events.

The database is the truth, so the waiter reads the run's row, first every few
milliseconds and then less often. That works the same for every executor (an
inline turn on this process's runtime loop, a Celery worker on another machine) and
every channel layer, none included. A run that ended with messages queued on it
names the run that answers them (``AgentRun.next_run``, written in the same
transaction that ended it); ``follow=True`` waits for that one too, and for its own
follow-up, to the end of the chain.

A wait is bounded: past ``timeout`` seconds it raises ``RunTimeout`` and leaves the
run alone (it goes on; wait again, or cancel it).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

from asgiref.sync import sync_to_async
from django.db import transaction

from sagents_django import services
from sagents_django.core import TokenUsage
from sagents_django.core.exceptions import SagentsError
from sagents_django.exceptions import NotFound
from sagents_django.models import (
    AgentRun,
    AgentState,
    DisplayMessage,
)
from sagents_django.scope import Scope
from sagents_django.services.conversations import conversation_pk
from sagents_django.services.validation import parse_uuid

from . import loop

DEFAULT_TIMEOUT = 600.0
"""Seconds a wait lasts unless told otherwise (a long multi-step turn fits)."""

FIRST_DELAY = 0.01
MAX_DELAY = 0.25
"""The row is read again after 10 ms, then half as often again each time up to
four times a second: a quick turn is seen at once, a long one costs little."""

EndStatus = Literal["completed", "interrupted", "cancelled", "error"]


class RunTimeout(SagentsError, TimeoutError):
    """A run did not end within the time the caller was willing to wait."""

    def __init__(self, run_id: str, timeout: float) -> None:
        self.run_id = run_id
        self.timeout = timeout
        super().__init__(
            f"Run {run_id!r} did not end within {timeout:g} s; it goes on. Wait "
            "for it again, or cancel the conversation's turn."
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class RunOutcome:
    """How a run ended (the last one followed, when following)."""

    run_id: str
    """The run that ended (with ``follow``: the last of the chain)."""
    status: EndStatus
    error: str = ""
    """For ``error`` and ``cancelled``: what the run recorded, for people."""
    text: str = ""
    """The last assistant text the run added to the transcript ("" when none)."""
    interrupt_data: dict[str, Any] | None = None
    """For ``interrupted``: what a person must decide (the core's JSON)."""
    usage: TokenUsage = field(default_factory=TokenUsage)
    cost: Decimal = Decimal(0)
    next_run_id: str | None = None
    """The run of messages queued while this one ran (not followed)."""
    followed: tuple[str, ...] = ()
    """Every run waited for, in order (the first is the one asked for)."""

    @property
    def ok(self) -> bool:
        return self.status == "completed"


def wait_run(
    scope: Scope,
    conversation_id: Any,
    run_id: Any,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    follow: bool = True,
) -> RunOutcome:
    """Block until ``run_id`` (one of the conversation's runs, as ``scope`` sees
    it) ends; how it ended. ``NotFound`` for a run or conversation outside the
    scope, ``RunTimeout`` after ``timeout`` seconds."""
    _check_loop()
    _check_transaction()
    pk, current = _start(scope, conversation_id, run_id)
    deadline = time.monotonic() + timeout
    followed = [current]
    delay = FIRST_DELAY
    while True:
        outcome = _look(pk, current, followed)
        if outcome is not None and follow and outcome.next_run_id:
            current, delay = outcome.next_run_id, FIRST_DELAY
            followed.append(current)
            continue
        if outcome is not None:
            return outcome
        left = deadline - time.monotonic()
        if left <= 0:
            raise RunTimeout(current, timeout)
        time.sleep(min(delay, left))
        delay = min(delay * 1.5, MAX_DELAY)


async def await_run(
    scope: Scope,
    conversation_id: Any,
    run_id: Any,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    follow: bool = True,
) -> RunOutcome:
    """``wait_run`` for async code: the loop is free while the run goes on."""
    _check_loop()
    await sync_to_async(_check_transaction)()
    pk, current = await sync_to_async(_start)(scope, conversation_id, run_id)
    deadline = time.monotonic() + timeout
    followed = [current]
    delay = FIRST_DELAY
    look = sync_to_async(_look)
    while True:
        outcome = await look(pk, current, followed)
        if outcome is not None and follow and outcome.next_run_id:
            current, delay = outcome.next_run_id, FIRST_DELAY
            followed.append(current)
            continue
        if outcome is not None:
            return outcome
        left = deadline - time.monotonic()
        if left <= 0:
            raise RunTimeout(current, timeout)
        await asyncio.sleep(min(delay, left))
        delay = min(delay * 1.5, MAX_DELAY)


def _check_loop() -> None:
    if loop.on_runtime_loop():
        # The turn waited for may need this very loop: it would never end.
        raise RuntimeError("A run cannot be waited for from the runtime's own loop")


def _check_transaction() -> None:
    if transaction.get_connection().in_atomic_block:
        # A run is handed to its executor when the transaction that made it
        # commits, and a transaction may not see the rows others commit meanwhile.
        raise RuntimeError(
            "A run cannot be waited for inside transaction.atomic(): it starts "
            "only when the transaction commits"
        )


def _start(scope: Scope, conversation_id: Any, run_id: Any) -> tuple[Any, str]:
    pk = conversation_pk(conversation_id)
    run_pk = parse_uuid(run_id, what="run_id")
    if services.get_conversation(scope, pk) is None:
        raise NotFound("conversation", str(pk))
    if not AgentRun.objects.filter(pk=run_pk, conversation_id=pk).exists():
        raise NotFound("run", str(run_pk))
    return pk, str(run_pk)


def _look(pk: Any, run_id: str, followed: list[str]) -> RunOutcome | None:
    """How ``run_id`` ended, or None while it runs."""
    run = AgentRun.objects.filter(pk=run_id, conversation_id=pk).first()
    if run is None:  # deleted meanwhile (with its conversation)
        raise NotFound("run", run_id)
    if run.is_active:
        return None
    return _outcome(run, followed)


def _outcome(run: AgentRun, followed: list[str]) -> RunOutcome:
    handed = str(run.next_run_id) if run.next_run_id is not None else None
    interrupt = None
    if run.status == "interrupted":
        interrupt = (
            AgentState.objects.filter(conversation_id=run.conversation_id)
            .values_list("state_data__state__interrupt_data", flat=True)
            .first()
        )
    return RunOutcome(
        run_id=str(run.pk),
        status=run.status,  # type: ignore[arg-type]
        error=run.error,
        text=_last_text(run),
        interrupt_data=interrupt,
        usage=TokenUsage(input=run.input_tokens, output=run.output_tokens),
        cost=run.cost if run.cost is not None else Decimal(0),
        next_run_id=handed if isinstance(handed, str) and handed else None,
        followed=tuple(followed),
    )


def _last_text(run: AgentRun) -> str:
    """The last assistant text row the run wrote."""
    rows = DisplayMessage.objects.filter(
        conversation_id=run.conversation_id,
        run_id=run.pk,
        message_type="assistant",
        content_type="text",
    )
    content = rows.order_by("-inserted_at", "-sequence", "-id").values_list(
        "content", flat=True
    )
    first = content.first()
    text = first.get("text") if isinstance(first, dict) else None
    return text if isinstance(text, str) else ""
