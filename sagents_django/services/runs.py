"""A conversation's runs: one active at a time, held while a turn runs.

Whoever runs a turn begins a run first and finishes it on every exit path. The
database is the lock: a partial unique constraint allows one queued or running run
per conversation, so a second ``begin_run`` gets ``RunConflict`` whichever process
or session it comes from, and nothing is written for it. The runtime's workers
(leases, heartbeats, recovery) build on the same rows; the in-process coordinator
uses only these three functions.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from sagents_django.core.messages import TokenUsage
from sagents_django.exceptions import NotFound, RunConflict
from sagents_django.models import ACTIVE_RUN_STATUSES, RUN_STATUSES, AgentRun
from sagents_django.scope import Scope

from .conversations import owned_ids, refuse_read_only, require_conversation
from .validation import choice, clean_text, parse_uuid

FINAL_STATUSES = tuple(s for s in RUN_STATUSES if s not in ACTIVE_RUN_STATUSES)
ERROR_MAX_LENGTH = 10_000
"""A run's error is a message for people; a longer one is cut (a stored failure
record keeps the details)."""


def begin_run(
    scope: Scope,
    conversation_id: Any,
    *,
    trigger: str = "message",
    owner: str = "",
    queued: bool = False,
    metadata: dict[str, Any] | None = None,
) -> AgentRun:
    """A new running run of the conversation; RunConflict while another is active,
    NotFound outside ``scope``. ``owner`` names who holds it (a process, a session).

    ``queued=True`` makes a run for an executor to ``claim_run`` later (the runtime's
    path: the run is created with the message that caused it, and handed over after
    commit); ``metadata`` is what the executor needs to run it (JSON)."""
    trigger = clean_text(trigger, what="trigger", max_length=32, strip=True)
    owner = clean_text(owner, what="owner", max_length=255)
    refuse_read_only(scope, conversation_id)
    pk = require_conversation(scope, conversation_id, touch=False)
    now = timezone.now()
    started = {} if queued else {"started_at": now, "heartbeat_at": now, "attempts": 1}
    try:
        with transaction.atomic():
            return AgentRun.objects.create(
                conversation_id=pk,
                status="queued" if queued else "running",
                trigger=trigger,
                lease_owner=owner,
                metadata=metadata or {},
                **started,
            )
    except IntegrityError:
        active = AgentRun.objects.of(pk).active().values_list("pk", flat=True).first()
        raise RunConflict(pk, run_id=active) from None


def finish_run(
    scope: Scope,
    run_id: Any,
    *,
    status: str,
    error: str = "",
    usage: TokenUsage | None = None,
    cost: Decimal | None = Decimal(0),
    model: str = "",
) -> bool:
    """End an active run with ``status`` (completed, interrupted, cancelled, error),
    which frees the conversation for the next turn. False when the run had already
    ended; NotFound when it is not ``scope``'s.

    ``cost`` None (or anything but a finite, non-negative Decimal) is stored as
    NULL: the run's model has no known price. ``model`` names the agent's model
    (a litellm model string, kept to 255 characters)."""
    status = choice(status, FINAL_STATUSES, what="status")
    if not isinstance(error, str):
        error = str(error)
    usage = usage or TokenUsage()
    runs = _owned_runs(scope, run_id)
    ended = runs.active().update(
        status=status,
        finished_at=timezone.now(),
        error=error[:ERROR_MAX_LENGTH],
        input_tokens=max(usage.input, 0),
        output_tokens=max(usage.output, 0),
        cost=cost
        if isinstance(cost, Decimal) and cost.is_finite() and cost >= 0
        else None,
        model=model[:255] if isinstance(model, str) else "",
    )
    if not ended and not runs.exists():
        raise NotFound("run", str(run_id))
    return bool(ended)


def active_run(scope: Scope, conversation_id: Any) -> AgentRun | None:
    """The conversation's queued or running run, if any (NotFound outside scope)."""
    pk = require_conversation(scope, conversation_id, touch=False)
    return AgentRun.objects.of(pk).active().first()


def request_cancel(scope: Scope, conversation_id: Any) -> AgentRun | None:
    """Flag the conversation's active run to stop; the run, or None when idle."""
    refuse_read_only(scope, conversation_id)
    pk = require_conversation(scope, conversation_id, touch=False)
    runs = AgentRun.objects.of(pk).active()
    runs.update(cancel_requested=True)
    return runs.first()


def discard_run(scope: Scope, run_id: Any) -> bool:
    """Delete a run that did nothing (its turn was refused before it started), so
    the history shows no run that never was. False when the run had already ended
    (it is kept); NotFound when it is not ``scope``'s."""
    runs = _owned_runs(scope, run_id)
    deleted, _ = runs.active().delete()
    if not deleted and not runs.exists():
        raise NotFound("run", str(run_id))
    return bool(deleted)


def _owned_runs(scope: Scope, run_id: Any) -> Any:
    # Only writes (finish, discard) look runs up by id.
    refuse_read_only(scope, run_id)
    pk = parse_uuid(run_id, what="run_id")
    return AgentRun.objects.filter(pk=pk, conversation__in=owned_ids(scope))
