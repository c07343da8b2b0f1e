"""A budget's approval is an approval request like a tool call's.

Why: past a soft threshold with ``SOFT_ACTION = "approve"``, ``SpendBudget`` pauses
the turn with its own interrupt (``budget_approval``). The inbox, the chat page,
the signed links and the audit all work on ``ApprovalRequest`` rows, routed by
permission; a pause without a row reached none of them (only Dismiss). So the
pause is read as one action request: its arguments are the budget's figures, it
is approved or rejected (never edited), and only holders of
``sagents_django.raise_budget`` decide it (the conversation's owner does not, for
being the owner: it is their spending). ``approvals.deciding`` records the vote;
the resumed turn asks ``decider`` who cast it, so the counter names the person who
approved, not the person the agent acts for.
"""

from __future__ import annotations

from typing import Any

from sagents_django.core.approvals import ActionRequest, CustomInterrupt
from sagents_django.core.middleware.spend_budget import APPROVAL_TYPE

PERMISSION = "sagents_django.raise_budget"
POLICY = "SpendBudget"
"""The policy of a budget's request (``ApprovalRequest.policy``)."""
TOOL_NAME = "budget_approval"
FIGURES = (
    "scope",
    "key",
    "period",
    "starts",
    "limit",
    "spent",
    "remaining",
    "estimate",
)


def is_budget(interrupt: Any) -> bool:
    return isinstance(interrupt, CustomInterrupt) and interrupt.type == APPROVAL_TYPE


def action_request(interrupt: Any) -> ActionRequest | None:
    """The request a budget's pause asks people to decide; None for any other."""
    if not is_budget(interrupt):
        return None
    from .texts import request_text

    figures = {k: interrupt.data[k] for k in FIGURES if k in interrupt.data}
    return ActionRequest(
        tool_call_id=":".join(
            ["budget", *(str(figures.get(k, "")) for k in ("key", "period", "starts"))]
        ),
        tool_name=TOOL_NAME,
        arguments=figures,
        description=request_text(figures),
        allowed_decisions=("approve", "reject"),
        middleware_id=POLICY,
        permission=PERMISSION,
        approvers=1,
    )


def decider(run_id: Any) -> tuple[bool, Any]:
    """Whether run ``run_id`` carries out a budget request's decision, and the user
    whose vote decided it (None: nobody signed in did)."""
    from sagents_django.approvals.models import ApprovalRequest

    row = ApprovalRequest.objects.filter(
        resumed_run_ref=str(run_id), policy=POLICY
    ).first()
    if row is None:
        return False, None
    vote = (
        row.votes.filter(decision__in=("approve", "reject"))
        .select_related("user")
        .order_by("-created_at")
        .first()
    )
    return True, vote.user if vote is not None else None
