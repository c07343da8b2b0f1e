"""The evidence of approvals: one row per action request, one per person's vote.

A request row is bound to the exact call it asks about (tool, call id, the sha256
of its canonical arguments, the policy that asked, the run and user that asked) and
keeps the chain proposed → decided → executed → result on itself, copied when each
step happens. Copies, not joins alone: the run, its tool-call journal and the
conversation may be deleted (retention, erasure) while the audit must stay, so the
rows point at them with ``SET_NULL`` and keep their ids as text.

Rows are append-only in practice: the admin offers no change or delete, code only
moves a pending row to a final status once (a conditional update), and erasure
anonymises personal fields instead of deleting (docs/approvals.md says why).
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from sagents_django.models import CONVERSATION_MODEL, AgentRun

PENDING = "pending"
APPROVED = "approved"
EDITED = "edited"
REJECTED = "rejected"
DISMISSED = "dismissed"
EXPIRED = "expired"
STATUSES = [
    (PENDING, "pending"),
    (APPROVED, "approved"),
    (EDITED, "approved with edits"),
    (REJECTED, "rejected"),
    (DISMISSED, "dismissed"),
    (EXPIRED, "expired"),
]
VOTES = [
    ("approve", "approve"),
    ("edit", "edit"),
    ("reject", "reject"),
    ("dismiss", "dismiss"),
    ("expire", "expire"),
]
CHANNELS = [
    ("page", "chat page or inbox"),
    ("link", "signed link"),
    ("api", "programmatic resume"),
    ("admin", "admin action"),
    ("sweeper", "expiry"),
]


class ApprovalRequest(models.Model):
    """One tool call that waited for people, and what became of it."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(
        CONVERSATION_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="approval_requests",
    )
    conversation_ref = models.CharField(max_length=64, db_index=True)
    """The conversation's id, kept after it is deleted."""
    run = models.ForeignKey(
        AgentRun,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="approval_requests",
        help_text="The run that asked.",
    )
    run_ref = models.CharField(max_length=64, db_index=True)
    """The asking run's id: the requests of one interrupt share it."""
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    requested_by_label = models.CharField(max_length=255, blank=True, default="")
    """Who asked, as text (the audit stays when the user row goes)."""
    index = models.PositiveSmallIntegerField(default=0)
    """The request's place in its interrupt (the order of the decisions)."""
    tool_name = models.CharField(max_length=255)
    tool_call_id = models.CharField(max_length=255)
    arguments = models.JSONField(default=dict, blank=True)
    arguments_hash = models.CharField(max_length=64)
    """sha256 of the arguments as sorted-key JSON: what a decision must name."""
    description = models.TextField(blank=True, default="")
    subagent = models.CharField(max_length=255, blank=True, default="")
    policy = models.CharField(max_length=255, blank=True, default="")
    """The id of the middleware that asked."""
    permission = models.CharField(max_length=255, blank=True, default="")
    """Whose holders may decide ("": only the owner)."""
    owner_decides = models.BooleanField(default=True)
    approvals_needed = models.PositiveSmallIntegerField(default=1)
    allowed_decisions = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=12, choices=STATUSES, default=PENDING)
    decision = models.JSONField(null=True, blank=True)
    """The decision the agent was resumed with (the core's JSON)."""
    decided_at = models.DateTimeField(null=True, blank=True)
    resumed_run = models.ForeignKey(
        AgentRun,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="approvals_applied",
        help_text="The run that carried the decision out.",
    )
    resumed_run_ref = models.CharField(max_length=64, blank=True, default="")
    execution_status = models.CharField(max_length=16, blank=True, default="")
    """What the call did: completed, failed, lost (the journal), or not_run."""
    result = models.JSONField(null=True, blank=True)
    executed_at = models.DateTimeField(null=True, blank=True)
    link_nonce = models.CharField(max_length=32, blank=True, default="")
    """The signed link's nonce; a link used once changes it (single use)."""
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    expires_at = models.DateTimeField(null=True, blank=True, db_index=True)

    class Meta:
        app_label = "sagents_django"
        db_table = "sagents_approval_requests"
        ordering = ["-created_at", "index"]
        permissions = [
            ("decide_approvals", "Can decide approval requests of any conversation")
        ]
        indexes = [
            models.Index(fields=["status", "expires_at"], name="sagents_appr_open"),
            models.Index(
                fields=["conversation_ref", "tool_call_id"], name="sagents_appr_call"
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["run_ref", "tool_call_id"],
                name="sagents_one_approval_per_call",
            )
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} {self.tool_call_id} ({self.status})"

    @property
    def is_final(self) -> bool:
        return self.status != PENDING


class ApprovalVote(models.Model):
    """One person's decision on a request (a request of quorum 2 has two)."""

    id = models.BigAutoField(primary_key=True)
    request = models.ForeignKey(
        ApprovalRequest, on_delete=models.CASCADE, related_name="votes"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    user_label = models.CharField(max_length=255, blank=True, default="")
    decision = models.CharField(max_length=8, choices=VOTES)
    arguments = models.JSONField(null=True, blank=True)
    """For an edit: the arguments the call runs with."""
    arguments_hash = models.CharField(max_length=64, blank=True, default="")
    reason = models.TextField(blank=True, default="")
    via = models.CharField(max_length=8, choices=CHANNELS, default="page")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "sagents_django"
        db_table = "sagents_approval_votes"
        ordering = ["request", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["request", "user"],
                condition=models.Q(user__isnull=False),
                name="sagents_one_vote_per_person",
            )
        ]

    def __str__(self) -> str:
        return f"{self.decision} by {self.user_label or 'nobody'}"
