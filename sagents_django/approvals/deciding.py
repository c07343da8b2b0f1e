"""Deciding an approval request: the one function every door calls.

The chat page, the inbox, a signed link's page (and any other client: a socket,
an AG-UI endpoint) turn what a person sent into ``Vote``s and call ``decide``. It
refuses, changing nothing, when:

- the person may not decide the request (``NotFound``: as for another tenant's);
- the vote names arguments that no longer hash to the request's (a stale page, a
  tampered form): ``ArgumentsChanged``;
- the request was already decided (``AlreadyDecided``), or expired;
- the person already voted on it, or is its requester trying to be a second
  approver (``NotAllowed``), or the decision is not one the request offers.

A vote of a request needing one approver decides it. A request that needs
``approvals_needed`` people is approved by that many distinct approvals (the
requester's counting only as the first), and rejected by any one rejection; an
edit needs everyone to agree on the same arguments, so it is refused there (reject
with a reason instead). When every request of the interrupt is decided, the agent
is resumed in the requester's scope, in the same transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from sagents_django.core.approvals import decision_from_dict
from sagents_django.core.exceptions import InvalidResume
from sagents_django.exceptions import Conflict, InvalidInput, NotFound
from sagents_django.scope import conversation_model

from . import links, records, routing
from .models import (
    DISMISSED,
    PENDING,
    ApprovalRequest,
    ApprovalVote,
)
from .records import ArgumentsChanged
from .signals import announce


class NotAllowed(InvalidInput):
    """This person cannot cast this vote (again, or as the second approver)."""


class AlreadyDecided(Conflict):
    """The request was decided (or expired) before this vote."""


@dataclass(frozen=True, kw_only=True)
class Vote:
    """One person's decision on one request, as sent."""

    tool_call_id: str
    arguments_hash: str
    """The hash of the arguments the person was shown."""
    decision: dict[str, Any]
    """The core's decision JSON: approve, edit (with arguments) or reject."""


@dataclass(kw_only=True)
class Outcome:
    decided: list[ApprovalRequest] = field(default_factory=list)
    """Requests this call decided."""
    waiting: list[ApprovalRequest] = field(default_factory=list)
    """Requests that still need more approvers (or other requests of the
    interrupt that still wait)."""
    run_id: str | None = None
    """The run that carries the decisions out, when the interrupt is decided."""


def visible(user: Any, request_id: Any) -> ApprovalRequest:
    """A request ``user`` may decide (pending or not); ``NotFound`` otherwise."""
    row = ApprovalRequest.objects.filter(pk=request_id).first()
    if row is None or not routing.may_decide(user, row):
        raise NotFound("approval request", str(request_id))
    return row


def decide(
    user: Any,
    conversation_id: Any,
    votes: Sequence[Vote],
    *,
    via: str = "page",
    link_of: ApprovalRequest | None = None,
) -> Outcome:
    """Record ``votes`` of ``user`` on the conversation's open requests; resume the
    agent when they complete its interrupt. ``link_of``: the request whose signed
    link was used (spent in the same transaction)."""
    if not votes:
        raise InvalidInput("Nothing to decide: no decision was sent.")
    with transaction.atomic():
        _lock_conversation(conversation_id)
        rows = {r.tool_call_id: r for r in _open(conversation_id)}
        outcome = Outcome()
        for i, vote in enumerate(votes):
            row = rows.get(vote.tool_call_id)
            if row is None:
                _missing(user, conversation_id, vote.tool_call_id)
            assert row is not None
            if _cast(user, row, vote, via=via, where=f"decisions[{i}]"):
                outcome.decided.append(row)
        if link_of is not None:
            links.spend(link_of)
        waiting = [r for r in rows.values() if r.status == PENDING]
        outcome.waiting = waiting
        if not waiting:
            outcome.run_id = _resume(conversation_id, list(rows.values()))
        else:
            for row in waiting:
                if row in outcome.decided or any(
                    v.tool_call_id == row.tool_call_id for v in votes
                ):
                    announce(row, still_needed=row.approvals_needed - _approvals(row))
        return outcome


def dismiss(user: Any, conversation_id: Any, *, via: str = "page") -> str | None:
    """Abandon the conversation's open requests (the agent is told the calls did
    not run); anyone who may decide every one of them may. The id of the run that
    answers messages held meanwhile, or None."""
    from sagents_django.runtime import agent_server

    with transaction.atomic():
        _lock_conversation(conversation_id)
        rows = _open(conversation_id)
        if not rows:
            raise AlreadyDecided("Nothing to dismiss: no approval is pending.")
        if not all(routing.may_decide(user, r) for r in rows):
            raise NotFound("approval request", str(conversation_id))
        records.close_open(conversation_id, status=DISMISSED, user=user, via=via)
        return agent_server.dismiss(records.requester_scope(rows[0]), conversation_id)


# Steps -----------------------------------------------------------------------------
def _lock_conversation(conversation_id: Any) -> None:
    # The conversation first, as the runtime's verbs take it (no lock-order cycle).
    manager = conversation_model()._default_manager
    list(manager.select_for_update().filter(pk=conversation_id).values_list("pk"))


def _open(conversation_id: Any) -> list[ApprovalRequest]:
    rows = records.open_requests(conversation_id)
    ids = [r.pk for r in rows]
    return list(
        ApprovalRequest.objects.select_for_update().filter(pk__in=ids).order_by("index")
    )


def _missing(user: Any, conversation_id: Any, tool_call_id: str) -> None:
    """Why a vote names no open request: decided already, or not this person's."""
    done = (
        ApprovalRequest.objects.filter(
            conversation_ref=str(conversation_id), tool_call_id=tool_call_id
        )
        .order_by("-created_at")
        .first()
    )
    if done is not None and routing.may_decide(user, done):
        raise AlreadyDecided(
            f"The request for {done.tool_name!r} was already decided ({done.status})."
        )
    raise NotFound("approval request", tool_call_id)


def _cast(user: Any, row: ApprovalRequest, vote: Vote, *, via: str, where: str) -> bool:
    """Record the vote on ``row`` (locked); whether it decided the request."""
    if not routing.may_decide(user, row):
        raise NotFound("approval request", row.tool_call_id)
    if row.status != PENDING:
        raise AlreadyDecided(
            f"The request for {row.tool_name!r} was already decided ({row.status})."
        )
    if row.expires_at is not None and row.expires_at <= timezone.now():
        raise AlreadyDecided(f"The request for {row.tool_name!r} has expired.")
    if (
        not isinstance(vote.arguments_hash, str)
        or vote.arguments_hash != row.arguments_hash
    ):
        raise ArgumentsChanged(
            f"The arguments of {row.tool_name!r} are not the ones this decision was "
            "made on (the page is out of date, or the form was changed): nothing "
            "was decided. Reload and decide again."
        )
    try:
        decision = decision_from_dict(vote.decision, where=where)
    except InvalidResume as exc:
        raise InvalidInput(str(exc)) from None
    if decision.type not in row.allowed_decisions:
        raise InvalidInput(
            f"{where}: {decision.type!r} is not offered for {row.tool_name!r}; "
            f"allowed: {row.allowed_decisions}"
        )
    votes = list(row.votes.all())
    if any(v.user_id == user.pk for v in votes):
        raise NotAllowed(f"You already decided the request for {row.tool_name!r}.")
    quorum = row.approvals_needed > 1
    if quorum and decision.type == "edit":
        raise NotAllowed(
            f"{row.tool_name!r} needs {row.approvals_needed} approvers, who must "
            "agree on the same call: approve it as it is, or reject it with a reason."
        )
    if quorum and votes and row.requested_by_id == user.pk:
        raise NotAllowed(
            "The person who asked cannot be a second approver of their own request."
        )
    data = decision.to_dict()
    edited = data.get("arguments")
    ApprovalVote.objects.create(
        request=row,
        user=user,
        user_label=records.user_label(user),
        decision=decision.type,
        arguments=edited,
        arguments_hash=records.arguments_hash(edited) if edited is not None else "",
        reason=str(data.get("message") or ""),
        via=via,
    )
    if decision.type == "approve" and _approvals(row) < row.approvals_needed:
        return False
    row.status = records.FINAL_BY_DECISION[decision.type]
    row.decision = data
    row.decided_at = timezone.now()
    row.save(update_fields=["status", "decision", "decided_at"])
    return True


def _approvals(row: ApprovalRequest) -> int:
    return row.votes.filter(decision="approve").count()


def _resume(conversation_id: Any, rows: list[ApprovalRequest]) -> str:
    from sagents_django.runtime import agent_server

    decisions = [r.decision for r in sorted(rows, key=lambda r: r.index)]
    scope = records.requester_scope(rows[0])
    return str(agent_server.resume(scope, conversation_id, decisions))
