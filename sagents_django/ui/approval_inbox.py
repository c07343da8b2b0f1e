"""What a person may decide, across conversations: the inbox and the forms.

The forms are drawn from the stored interrupt (``approvals.requests_of``) and
joined to its ``ApprovalRequest`` rows: a request already decided (a quorum's other
requests still wait) is shown settled, without inputs; each posts back the hash of
the arguments it showed. Who sees what is ``approvals.routing``'s rule: the owner's
waiting conversations, and those whose requests the person may decide by
permission within their tenancy.
"""

from __future__ import annotations

from typing import Any

from django.http import QueryDict

from sagents_django.approvals import records, routing
from sagents_django.approvals.deciding import Vote
from sagents_django.approvals.models import PENDING, ApprovalRequest
from sagents_django.exceptions import NotFound
from sagents_django.models import AgentState
from sagents_django.scope import Scope

from . import approvals
from .approvals import FormError, Pending, Request


def requests_for(user: Any, conversation: Any) -> list[Request]:
    """The conversation's waiting requests as ``user`` may decide them; NotFound
    when they may decide none (or nothing waits)."""
    records.ensure(conversation.pk)
    interrupt = (
        AgentState.objects.filter(conversation_id=conversation.pk)
        .values_list("state_data__state__interrupt_data", flat=True)
        .first()
    )
    requests = approvals.requests_of(interrupt)
    rows = {r.tool_call_id: r for r in records.open_requests(conversation.pk)}
    annotate(requests, rows, user=user)
    if not any(
        not r.settled
        and (row := rows.get(r.tool_call_id)) is not None
        and routing.may_decide(user, row)
        for r in requests
    ):
        raise NotFound("approval request", str(conversation.pk))
    return requests


def annotate(
    requests: list[Request], rows: dict[str, ApprovalRequest], *, user: Any = None
) -> list[Request]:
    """Mark the requests decided already, or already approved by ``user`` (a
    quorum waiting for someone else), and where a quorum stands."""
    for r in requests:
        row = rows.get(r.tool_call_id)
        if row is None:
            continue
        votes = list(row.votes.all())
        r.approvals_needed = row.approvals_needed
        r.approvals_given = sum(1 for v in votes if v.decision == "approve")
        if row.status != "pending":
            r.settled = row.get_status_display()
        elif user is not None and any(v.user_id == user.pk for v in votes):
            r.settled = "approved by you, waiting for another approver"
    return requests


def inbox(user: Any, scope: Scope, *, limit: int = 50) -> list[Pending]:
    """Every conversation waiting for ``user``'s decision, newest first."""
    conversations = _conversations(user, scope, limit)
    out = []
    for conversation in conversations:
        try:
            requests = requests_for(user, conversation)
        except NotFound:
            continue
        approvals.with_previews(_scope_of(conversation, scope), conversation, requests)
        out.append(Pending(conversation=conversation, requests=requests))
    return out


def inbox_count(user: Any, scope: Scope) -> int:
    """How many conversations wait for the person (the header's badge)."""
    own = list(_own(scope).values_list("conversation_id", flat=True))
    theirs = (
        _others(user, own)
        .order_by()
        .values_list("conversation_id", flat=True)
        .distinct()
        .count()
    )
    return len(own) + theirs


def votes_from_post(post: QueryDict, requests: list[Request]) -> list[Vote]:
    """The votes a form posted: its decisions (``approvals.decisions_from_post``)
    each with the hash of the arguments the form showed."""
    decisions = approvals.decisions_from_post(post, requests)
    votes = []
    for r, decision in zip(
        (r for r in requests if not r.settled), decisions, strict=True
    ):
        posted = post.get(f"hash-{r.index}", "")
        if not posted:
            raise FormError(
                f"Action {r.index + 1}: the form did not say which arguments it "
                "showed; reload the page."
            )
        votes.append(
            Vote(tool_call_id=r.tool_call_id, arguments_hash=posted, decision=decision)
        )
    return votes


def _conversation_ids(user: Any, scope: Scope, limit: int) -> list[Any]:
    own = list(
        _own(scope)
        .order_by("-updated_at", "-pk")
        .values_list("conversation_id", flat=True)[:limit]
    )
    theirs = list(
        _others(user, own)
        .order_by("-created_at")
        .values_list("conversation_id", flat=True)[:limit]
    )
    return list(dict.fromkeys([*own, *theirs]))[:limit]


def _own(scope: Scope) -> Any:
    """The scope's waiting conversations, when owners decide their requests; not
    those waiting only for requests no owner decides as owner (a budget's, a
    permission's): they are the person's only by that permission (``_others``)."""
    from sagents_django.conf import sagents_settings

    waiting = approvals.waiting(scope)
    if not sagents_settings.APPROVALS.owner_decides:
        return waiting.none()
    pending = ApprovalRequest.objects.filter(status=PENDING)
    not_for_owners = pending.filter(owner_decides=False).exclude(
        conversation_id__in=pending.filter(owner_decides=True).values("conversation_id")
    )
    return waiting.exclude(conversation_id__in=not_for_owners.values("conversation_id"))


def _others(user: Any, own: list[Any]) -> Any:
    """Requests ``user`` may decide in conversations not theirs that still wait."""
    return (
        routing.decidable(user)
        .exclude(conversation_id__in=own)
        .filter(
            conversation__agent_state__state_data__state__interrupt_data__isnull=False
        )
        .exclude(conversation__agent_state__state_data__state__interrupt_data=None)
    )


def _conversations(user: Any, scope: Scope, limit: int) -> list[Any]:
    from sagents_django.scope import conversation_model

    ids = _conversation_ids(user, scope, limit)
    found = conversation_model()._default_manager.in_bulk(ids)
    return [found[i] for i in ids if i in found]


def _scope_of(conversation: Any, fallback: Scope) -> Any:
    """The scope whose files a request's preview reads: the requester's."""
    from sagents_django.exceptions import Conflict

    row = (
        ApprovalRequest.objects.filter(conversation_ref=str(conversation.pk))
        .select_related("run")
        .order_by("-created_at")
        .first()
    )
    if row is None:
        return fallback
    try:
        return records.requester_scope(row)
    except Conflict:
        return fallback
