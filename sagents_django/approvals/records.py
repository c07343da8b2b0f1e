"""Writing the evidence: a row per action request when a run pauses, the decision
when it is resumed or dismissed, the execution when the resumed run ends.

These are called by the runtime at the one place each fact happens (a run's
ending, ``admission.resume`` and ``dismiss``), in the runtime's own transaction,
so whatever asked (``interrupt_on``, a budget's soft limit, a site's policy) and
whatever decided (a form, a signed link, a script, the sweeper), the chain
proposed → decided → executed → result is written, once.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import secrets
from collections.abc import Iterator
from contextvars import ContextVar
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone

from sagents_django.conf import sagents_settings
from sagents_django.core.approvals import interrupt_from_dict
from sagents_django.exceptions import InvalidInput
from sagents_django.models import AgentRun, ToolCallRecord

from .models import APPROVED, EDITED, PENDING, REJECTED, ApprovalRequest, ApprovalVote

logger = logging.getLogger(__name__)

NOT_RUN = "not_run"
FINAL_BY_DECISION = {"approve": APPROVED, "edit": EDITED, "reject": REJECTED}


def arguments_hash(arguments: Any) -> str:
    """sha256 of ``arguments`` as canonical JSON (sorted keys, no spaces, UTF-8):
    the same arguments hash the same in any process, whatever their key order."""
    text = json.dumps(
        arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class ArgumentsChanged(InvalidInput):
    """A decision was made on other arguments than the pending request's."""


def with_hashes(interrupt_data: Any) -> Any:
    """A copy of the interrupt whose action requests each carry the
    ``arguments_hash`` of their arguments (what a client sends back with its
    decisions); anything else as it is."""
    if not isinstance(interrupt_data, dict):
        return interrupt_data
    requests = interrupt_data.get("action_requests")
    if not isinstance(requests, list):
        return interrupt_data
    return {
        **interrupt_data,
        "action_requests": [
            {**r, "arguments_hash": arguments_hash(r.get("arguments"))}
            if isinstance(r, dict)
            else r
            for r in requests
        ],
    }


def check_seen(interrupt_data: Any, seen: Any) -> None:
    """``seen`` (one hash per action request, in order) must be the pending
    requests' arguments hashes: else ``ArgumentsChanged`` (or ``InvalidInput`` for
    the wrong shape)."""
    requests = (
        interrupt_data.get("action_requests")
        if isinstance(interrupt_data, dict)
        else None
    )
    if not isinstance(requests, list):
        raise InvalidInput("arguments_hashes: the pending approval has no requests")
    if not isinstance(seen, list) or not all(isinstance(h, str) for h in seen):
        raise InvalidInput("arguments_hashes must be a list of strings")
    if len(seen) != len(requests):
        raise InvalidInput(
            f"arguments_hashes: expected {len(requests)}, one per action request, "
            f"got {len(seen)}"
        )
    for i, (request, given) in enumerate(zip(requests, seen, strict=True)):
        arguments = request.get("arguments") if isinstance(request, dict) else None
        if given != arguments_hash(arguments):
            name = request.get("tool_name") if isinstance(request, dict) else "?"
            raise ArgumentsChanged(
                f"arguments_hashes[{i}]: the arguments of {name!r} are not the ones "
                "you saw (the approval changed since): look again before deciding"
            )


def user_label(user: Any) -> str:
    if user is None or not getattr(user, "is_authenticated", False):
        return ""
    return str(user.get_username())[:255]


def requester_of(run: AgentRun) -> Any:
    """The user the run acted for (its stored scope's), or None."""
    from sagents_django.runtime.requests import RunRequest

    scope = RunRequest.of(run).scope or {}
    user_id = scope.get("user_id")
    if user_id is None:
        return None
    return get_user_model()._default_manager.filter(pk=user_id).first()


def record_interrupt(
    run: AgentRun | None, interrupt_data: Any, *, conversation_id: Any = None
) -> list[ApprovalRequest]:
    """One row per action request of the interrupt ``run`` paused with (none for an
    interrupt without requests); the ``approval_requested`` signal after commit.
    A run ended twice (a replayed ending) writes nothing twice. Without a run (an
    interrupt written by a script), the rows name the conversation's owner."""
    try:
        typed = interrupt_from_dict(interrupt_data or {})
    except Exception:
        return []
    requests = getattr(typed, "action_requests", None) or []
    if not requests:
        return []
    config = sagents_settings.APPROVALS
    if run is not None:
        conversation_id = run.conversation_id
        requester = requester_of(run)
        run_ref = str(run.pk)
    else:
        requester = _owner_user(conversation_id)
        run_ref = f"state-{conversation_id}-{interrupt_hash(interrupt_data)[:16]}"
    now = timezone.now()
    expires = (
        now + timedelta(seconds=config.expires_after)
        if config.expires_after is not None
        else None
    )
    rows = []
    for i, r in enumerate(requests):
        policy = r.middleware_id or ""
        rows.append(
            ApprovalRequest(
                conversation_id=conversation_id,
                conversation_ref=str(conversation_id),
                run=run,
                run_ref=run_ref,
                requested_by=requester,
                requested_by_label=user_label(requester),
                index=i,
                tool_name=r.tool_name[:255],
                tool_call_id=r.tool_call_id[:255],
                arguments=r.arguments,
                arguments_hash=arguments_hash(r.arguments),
                description=r.description or "",
                subagent=r.subagent or "",
                policy=policy[:255],
                permission=r.permission or config.permission_for(r.tool_name, policy),
                owner_decides=config.owner_decides,
                approvals_needed=r.approvers or config.approvers_for(r.tool_name),
                allowed_decisions=list(r.allowed_decisions),
                expires_at=expires,
                link_nonce=secrets.token_hex(16),
            )
        )
    ApprovalRequest.objects.bulk_create(rows, ignore_conflicts=True)
    created = list(
        ApprovalRequest.objects.filter(run_ref=run_ref, status=PENDING).order_by(
            "index"
        )
    )
    from .signals import announce

    for row in created:
        announce(row)
    return created


def open_requests(conversation_id: Any) -> list[ApprovalRequest]:
    """The requests of the conversation's latest interrupt that are not carried out
    yet (pending, or decided while others of the interrupt still wait)."""
    latest = (
        ApprovalRequest.objects.filter(conversation_ref=str(conversation_id))
        .order_by("-created_at")
        .values_list("run_ref", flat=True)
        .first()
    )
    if latest is None:
        return []
    return list(
        ApprovalRequest.objects.filter(
            run_ref=latest, resumed_run_ref="", execution_status=""
        ).order_by("index")
    )


_acting: ContextVar[tuple[Any, str] | None] = ContextVar("approval_actor", default=None)


@contextlib.contextmanager
def acting(user: Any, *, via: str) -> Iterator[None]:
    """Resumes in the block are decided by ``user`` through ``via`` (the admin's
    actions act in the requester's scope, but the operator decides)."""
    token = _acting.set((user, via))
    try:
        yield
    finally:
        _acting.reset(token)


def on_resume(
    scope: Any, conversation_id: Any, decisions: list[Any], run: AgentRun
) -> None:
    """``admission.resume`` started ``run`` with ``decisions``: the open requests
    are decided (by the scope's user, when nobody decided them through the
    approval service: a script's resume, an admin action) and point at the run
    that carries them out. A request that needs several approvers, or that the
    scope's user may not decide, is refused here (``InvalidInput``): only the
    approval service counts votes."""
    rows = open_requests(conversation_id)
    if len(rows) != len(decisions):
        return  # an interrupt written before the rows (or a custom one)
    now = timezone.now()
    user, via = _acting.get() or (getattr(scope, "user", None), "api")
    for row in rows:
        if row.status == PENDING:
            _check_outside_vote(user, via, row)
    for row, decision in zip(rows, decisions, strict=True):
        data = decision.to_dict() if hasattr(decision, "to_dict") else dict(decision)
        if row.status == PENDING:
            ApprovalVote.objects.create(
                request=row,
                user=user if getattr(user, "is_authenticated", False) else None,
                user_label=user_label(user),
                decision=data["type"],
                arguments=data.get("arguments"),
                arguments_hash=arguments_hash(data["arguments"])
                if "arguments" in data
                else "",
                reason=str(data.get("message") or ""),
                via=via,
            )
            row.status = FINAL_BY_DECISION[data["type"]]
            row.decided_at = now
        row.decision = data
        row.resumed_run = run
        row.resumed_run_ref = str(run.pk)
        row.save(
            update_fields=[
                "status",
                "decided_at",
                "decision",
                "resumed_run",
                "resumed_run_ref",
            ]
        )


def _check_outside_vote(user: Any, via: str, row: ApprovalRequest) -> None:
    from . import routing

    if row.approvals_needed > 1:
        raise InvalidInput(
            f"{row.tool_name!r} needs {row.approvals_needed} approvers: decide it "
            "in the approvals inbox, where each person's vote is counted"
        )
    if via != "admin" and user is not None and not routing.may_decide(user, row):
        raise InvalidInput(
            f"This person may not decide the request for {row.tool_name!r}: it "
            "waits for someone with its permission (the approvals inbox)"
        )


def close_open(
    conversation_id: Any, *, status: str, user: Any = None, via: str = "api"
) -> int:
    """Close the open requests of the conversation without running them (dismissed,
    or expired with the dismiss outcome): a vote names who (or what) did."""
    rows = open_requests(conversation_id)
    now = timezone.now()
    kind = "expire" if via == "sweeper" else "dismiss"
    for row in rows:
        if row.status == PENDING:
            ApprovalVote.objects.create(
                request=row,
                user=user if getattr(user, "is_authenticated", False) else None,
                user_label=user_label(user),
                decision=kind,
                via=via,
            )
            row.status = status
            row.decided_at = now
        row.execution_status = NOT_RUN
        row.executed_at = now
        row.save(
            update_fields=["status", "decided_at", "execution_status", "executed_at"]
        )
    return len(rows)


def settle(run: AgentRun, status: str) -> None:
    """``run`` ended (``status``): the requests it carried out get what the tool
    did, from the run's tool-call journal (a rejected call did not run)."""
    rows = list(
        ApprovalRequest.objects.filter(resumed_run_ref=str(run.pk), execution_status="")
    )
    if not rows:
        return
    journal = {
        r.call_id: r
        for r in ToolCallRecord.objects.filter(
            run_id=run.pk, call_id__in=[row.tool_call_id for row in rows]
        )
    }
    now = timezone.now()
    for row in rows:
        record = journal.get(row.tool_call_id)
        if record is not None:
            row.execution_status = record.status
            row.result = record.result
            row.executed_at = record.finished_at or now
        elif (row.decision or {}).get("type") == "reject":
            row.execution_status = NOT_RUN
            row.executed_at = now
        else:
            # Approved, but the journal has no result: the run ended first, or a
            # sub-agent ran it inside its task call (whose result is the task's).
            row.execution_status = "no_record" if status == "completed" else status
            row.executed_at = now
        row.save(update_fields=["execution_status", "result", "executed_at"])


def ensure(conversation_id: Any) -> None:
    """Rows for the conversation's pending interrupt when it has none (one stored
    before this table existed, or written by a script), on its last run."""
    from sagents_django.runtime.lookup import pending_interrupt

    data = pending_interrupt(conversation_id)
    try:
        typed = interrupt_from_dict(data or {})
    except Exception:
        return
    ids = [r.tool_call_id for r in getattr(typed, "action_requests", None) or []]
    if (
        not ids
        or ApprovalRequest.objects.filter(
            conversation_ref=str(conversation_id), tool_call_id__in=ids
        ).exists()
    ):
        return
    run = (
        AgentRun.objects.filter(conversation_id=conversation_id)
        .order_by("-created_at")
        .first()
    )
    record_interrupt(run, data, conversation_id=conversation_id)


def interrupt_hash(data: Any) -> str:
    return arguments_hash(data)


def _owner_user(conversation_id: Any) -> Any:
    """The user owning the conversation, when conversations belong to users."""
    from sagents_django.scope import conversation_model, owned_by_users, owner_field

    model = conversation_model()
    field = owner_field(model)
    if field is None or not owned_by_users(model):
        return None
    found = model._default_manager.filter(pk=conversation_id).first()
    return getattr(found, field, None) if found is not None else None


def requester_scope(row: ApprovalRequest) -> Any:
    """The scope the agent acts in after a decision: its requesting run's (the
    person deciding may be someone else; the agent keeps acting for whoever
    asked), else the conversation's owning user's. ``Conflict`` when neither."""
    from sagents_django.exceptions import Conflict
    from sagents_django.runtime.requests import RunRequest
    from sagents_django.scope import scope_class

    stored = RunRequest.of(row.run).scope if row.run is not None else None
    if stored is not None:
        return scope_class().from_dict(stored)
    owner = _owner_user(row.conversation_id)
    if owner is None:
        raise Conflict("The request cannot be resumed: nobody it could act for.")
    return scope_class().for_user(owner)
