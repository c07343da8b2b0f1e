"""Conversations in two views, their runs, and the agents' stored files.

A conversation is stored twice: ``AgentState`` holds the state the model works on (one
JSON document, replaced as the agent goes), ``DisplayMessage`` holds what people see
(one row per displayable item, appended and never rewritten by summarization).

The conversation model is swappable, as ``AUTH_USER_MODEL`` is: a site whose
conversations belong to a team or an organization generates its own concrete model
from ``AbstractConversation`` (``manage.py sagents_setup --owner-type team``) and points
``SAGENTS_DJANGO_CONVERSATION_MODEL`` at it before its first migrate. The other models refer to
whichever conversation model is active.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from typing import Any

import swapper
from django.conf import settings
from django.db import models
from django.db.models import Q

MESSAGE_TYPES = ("user", "assistant", "tool", "system")
CONTENT_TYPES = (
    "text",
    "thinking",
    "image",
    "file",
    "tool_call",
    "tool_result",
    "error",
    # A note of the system's (upstream v0.13): content["stop_reason"] says why.
    "notification",
)
DISPLAY_STATUSES = (
    "pending",
    "executing",
    "completed",
    "failed",
    "interrupted",
    "cancelled",
    # A reply the core marked as not finished (``Message.status``): cut off by the
    # provider's stream, its length limit or its content filter.
    "stream_error",
    "length",
    "content_filtered",
)
FAILURE_KINDS = ("state", "display")
RUN_STATUSES = ("queued", "running", "completed", "interrupted", "cancelled", "error")
ACTIVE_RUN_STATUSES = ("queued", "running")
COST_QUANTUM = Decimal("0.0000000001")
"""Run costs are kept to 1e-10 USD: cheap models cost about 1e-7 per token, which
six decimal places would round away on a short turn."""


CONVERSATION_MODEL = swapper.get_model_name("sagents_django", "Conversation")
"""The active conversation model, as "app_label.ModelName"."""


def _choices(values: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(v, v.replace("_", " ")) for v in values]


class AbstractConversation(models.Model):
    """A conversation; subclasses add the owner foreign key named by ``OWNER_FIELD``."""

    OWNER_FIELD: str | None = None
    """The foreign key scopes filter on (None: conversations have no owner)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    title = models.CharField(max_length=255, blank=True, default="")
    version = models.PositiveIntegerField(default=1)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True, db_index=True)

    class Meta:
        abstract = True
        ordering = ("-updated_at",)

    def __str__(self) -> str:
        return self.title or f"Conversation {self.pk}"

    @property
    def agent_id(self) -> str:
        """The agent id of this conversation (also its channel-layer group name)."""
        return f"conversation-{self.pk}"


class Conversation(AbstractConversation):
    """The default conversation, owned by a user."""

    OWNER_FIELD = "user"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="sagents_conversations",
    )

    class Meta(AbstractConversation.Meta):
        swappable = swapper.swappable_setting("sagents_django", "Conversation")
        db_table = "sagents_conversations"
        indexes = [
            models.Index(
                fields=["user", "-updated_at"], name="sagents_conv_owner_recent"
            )
        ]


class AgentState(models.Model):
    """The serialized agent state of one conversation (``StateSerializer`` envelope)."""

    conversation = models.OneToOneField(
        CONVERSATION_MODEL,
        on_delete=models.CASCADE,
        related_name="agent_state",
    )
    state_data = models.JSONField(default=dict)
    version = models.PositiveIntegerField(default=1)
    """The envelope's format version (as in Sagents), not a counter of saves."""
    revision = models.PositiveBigIntegerField(default=1)
    """How many times the state was saved: the first save writes 1, each later save
    the next number. Saves compare and set it, so a writer that read an older
    revision is refused (``StateConflict``) instead of overwriting."""
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "sagents_agent_states"

    def __str__(self) -> str:
        return f"State of {self.conversation_id}"


class DisplayMessage(models.Model):
    """One displayable item: a text, a thinking block, a tool call or its result."""

    id = models.BigAutoField(primary_key=True)
    conversation = models.ForeignKey(
        CONVERSATION_MODEL,
        on_delete=models.CASCADE,
        related_name="display_messages",
    )
    message_type = models.CharField(max_length=16, choices=_choices(MESSAGE_TYPES))
    content_type = models.CharField(max_length=16, choices=_choices(CONTENT_TYPES))
    content = models.JSONField(default=dict)
    sequence = models.PositiveIntegerField(default=0)
    """Order among the items of one message (inserted together)."""
    status = models.CharField(
        max_length=16, choices=_choices(DISPLAY_STATUSES), default="completed"
    )
    tool_call_id = models.CharField(
        max_length=255, blank=True, default="", db_index=True
    )
    """For tool calls and results: the call id, so lifecycle updates find the row."""
    metadata = models.JSONField(default=dict, blank=True)
    inserted_at = models.DateTimeField(auto_now_add=True)
    run = models.ForeignKey(
        "AgentRun",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="display_messages",
    )
    """The run that wrote the row, or (a person's message) the run that answers it;
    None for rows of no run (a message waiting for its run, an older row)."""

    class Meta:
        db_table = "sagents_display_messages"
        ordering = ("inserted_at", "sequence", "id")
        indexes = [
            # "latest N of a conversation" and cursor pagination both walk this index.
            models.Index(
                fields=["conversation", "inserted_at", "sequence", "id"],
                name="sagents_dm_conv_order",
            ),
            models.Index(
                fields=["conversation", "tool_call_id"], name="sagents_dm_conv_call"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.message_type} {self.content_type} #{self.pk}"


class AgentRunQuerySet(models.QuerySet["AgentRun"]):
    """The questions asked of runs, named once."""

    def active(self) -> AgentRunQuerySet:
        """Queued or running: what holds a conversation (one at most each)."""
        return self.filter(status__in=ACTIVE_RUN_STATUSES)

    def finished(self) -> AgentRunQuerySet:
        return self.exclude(status__in=ACTIVE_RUN_STATUSES)

    def of(self, conversation_id: Any) -> AgentRunQuerySet:
        return self.filter(conversation_id=conversation_id)

    def held(self, *, owner: str, attempt: int) -> AgentRunQuerySet:
        """Running under this lease (owner and attempt: a fencing token)."""
        return self.filter(status="running", lease_owner=owner, attempts=attempt)

    def stale(self, cutoff: datetime) -> AgentRunQuerySet:
        """Running with no heartbeat since ``cutoff`` (their worker died)."""
        return self.filter(status="running").filter(
            Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True)
        )

    def latest_first(self) -> AgentRunQuerySet:
        return self.order_by("-created_at")


class AgentRun(models.Model):
    """One turn of an agent: who asked, how it went, what it cost."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(
        CONVERSATION_MODEL,
        on_delete=models.CASCADE,
        related_name="runs",
    )
    status = models.CharField(
        max_length=16, choices=_choices(RUN_STATUSES), default="queued"
    )
    trigger = models.CharField(max_length=32, default="message")
    """What started the run: message, resume, retry, recovery..."""
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    lease_owner = models.CharField(max_length=255, blank=True, default="")
    attempts = models.PositiveIntegerField(default=0)
    cancel_requested = models.BooleanField(default=False)
    submitted_at = models.DateTimeField(null=True, blank=True)
    """When the run was last handed to the executor (a queued run not claimed long
    after is handed over again: its task was lost with the broker)."""
    checkpoint_revision = models.PositiveBigIntegerField(null=True, blank=True)
    """The state revision this run's step checkpoints build on (set once the turn
    has changed the state); a takeover continues from it."""
    error = models.TextField(blank=True, default="")
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(
        max_digits=20, decimal_places=10, null=True, blank=True, default=0
    )
    """USD, from litellm's offline price list; NULL when the run's model has no
    price there (unknown is not free: see ``runtime.usage``)."""
    model = models.CharField(max_length=255, blank=True, default="", db_index=True)
    """The agent's model (a litellm model string) that ran the turn; empty for a
    run that built no agent."""
    metadata = models.JSONField(default=dict, blank=True)
    """The run's request (``runtime.requests.RunRequest``'s JSON form)."""
    next_run = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    """The run that took over the messages queued on this one."""

    objects = AgentRunQuerySet.as_manager()

    class Meta:
        db_table = "sagents_agent_runs"
        ordering = ("-created_at",)
        constraints = [
            models.UniqueConstraint(
                fields=["conversation"],
                condition=Q(status__in=ACTIVE_RUN_STATUSES),
                name="sagents_one_active_run_per_conversation",
            )
        ]

    def __str__(self) -> str:
        return f"Run {self.pk} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_RUN_STATUSES


class AgentStep(models.Model):
    """What one step of a running turn added to the state: a checkpoint that costs
    the same at 10 and 10,000 messages. The turn's end folds its steps into the
    state row and deletes them; a worker taking a run over loads the state row plus
    the steps built on its revision."""

    id = models.BigAutoField(primary_key=True)
    run = models.ForeignKey(AgentRun, on_delete=models.CASCADE, related_name="steps")
    number = models.PositiveIntegerField()
    base_revision = models.PositiveBigIntegerField()
    keep = models.PositiveIntegerField()
    """Messages kept from the checkpoint before (all of them, unless a middleware
    rewrote the history: then 0 and ``messages`` holds all)."""
    messages = models.JSONField(default=list)
    todos = models.JSONField(default=list)
    metadata = models.JSONField(default=dict)
    interrupt_data = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "sagents_agent_steps"
        ordering = ("run", "number")
        constraints = [
            models.UniqueConstraint(
                fields=["run", "number"], name="sagents_one_step_number_per_run"
            )
        ]

    def __str__(self) -> str:
        return f"Step {self.number} of run {self.run_id}"


TOOL_CALL_STATUSES = ("completed", "failed", "lost")


class ToolCallRecord(models.Model):
    """The journal of a run's finished tool calls, keyed by run and call id: a
    worker that takes a run over replays them from here instead of running them
    again; a non-idempotent call that was running when its worker died is
    ``lost`` (answered with an error result, not run twice)."""

    id = models.BigAutoField(primary_key=True)
    run = models.ForeignKey(
        AgentRun, on_delete=models.CASCADE, related_name="tool_calls"
    )
    call_id = models.CharField(max_length=255)
    name = models.CharField(max_length=255)
    status = models.CharField(max_length=16, choices=_choices(TOOL_CALL_STATUSES))
    attempt = models.PositiveIntegerField(default=1)
    """The attempt at the run that recorded it."""
    result = models.JSONField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "sagents_tool_calls"
        ordering = ("id",)
        constraints = [
            models.UniqueConstraint(
                fields=["run", "call_id"], name="sagents_one_record_per_tool_call"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} {self.call_id} ({self.status})"


class PersistenceFailure(models.Model):
    """A write of a turn that failed: what an operator must see, not only a log line.

    ``kind`` says which view of the conversation missed the write: "state" (the
    model's memory: the turn's result said so and the conversation went on from its
    last saved state) or "display" (a transcript row; the turn went on, as Sagents
    does).
    """

    id = models.BigAutoField(primary_key=True)
    conversation = models.ForeignKey(
        CONVERSATION_MODEL,
        on_delete=models.CASCADE,
        related_name="persistence_failures",
    )
    run = models.ForeignKey(
        AgentRun,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="persistence_failures",
    )
    kind = models.CharField(max_length=16, choices=_choices(FAILURE_KINDS))
    operation = models.CharField(max_length=64)
    """What was being written: a lifecycle (on_completion...) or a display write."""
    error_type = models.CharField(max_length=255)
    error = models.TextField(blank=True, default="")
    details = models.JSONField(default=dict, blank=True)
    """Small facts about the write (the agent id, revisions, a tool call id)."""
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        db_table = "sagents_persistence_failures"
        ordering = ("-created_at", "-id")
        indexes = [
            models.Index(
                fields=["conversation", "-created_at"], name="sagents_pf_conv_recent"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.operation}: {self.error_type}"


class StoredFile(models.Model):
    """A file of an agent filesystem, kept by the database backend.

    Files belong to a filesystem scope (e.g. ``("user", 42)``), not to a conversation,
    so several conversations can share them.
    """

    id = models.BigAutoField(primary_key=True)
    scope_kind = models.CharField(max_length=64)
    scope_id = models.CharField(max_length=255)
    path = models.CharField(max_length=1024)
    content = models.TextField(blank=True, default="")
    size = models.PositiveBigIntegerField(default=0)
    mime_type = models.CharField(max_length=255, blank=True, default="")
    custom_metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "sagents_stored_files"
        ordering = ("scope_kind", "scope_id", "path")
        constraints = [
            models.UniqueConstraint(
                fields=["scope_kind", "scope_id", "path"],
                name="sagents_file_unique_path",
            )
        ]

    def __str__(self) -> str:
        return f"{self.scope_kind}:{self.scope_id}{self.path}"


RATINGS = ("up", "down")
FEEDBACK_COMMENT_MAX_LENGTH = 2000


class ReplyFeedback(models.Model):
    """A person's thumbs up or down on one reply of the agent, with a comment.

    One row per user and reply (a second rating replaces the first). The reply's
    conversation and model are copied here when it is rated, so the admin filters
    and exports without joining the transcript.
    """

    id = models.BigAutoField(primary_key=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="sagents_feedback",
    )
    message = models.ForeignKey(
        DisplayMessage, on_delete=models.CASCADE, related_name="feedback"
    )
    """The reply's display row (an assistant text)."""
    conversation = models.ForeignKey(
        CONVERSATION_MODEL, on_delete=models.CASCADE, related_name="feedback"
    )
    rating = models.CharField(max_length=8, choices=_choices(RATINGS))
    comment = models.TextField(
        blank=True, default="", max_length=FEEDBACK_COMMENT_MAX_LENGTH
    )
    model = models.CharField(max_length=255, blank=True, default="", db_index=True)
    """The model that wrote the reply (its run's), empty when not known."""
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "sagents_reply_feedback"
        ordering = ("-created_at", "-id")
        verbose_name_plural = "reply feedback"
        constraints = [
            models.UniqueConstraint(
                fields=["user", "message"], name="sagents_one_feedback_per_reply"
            )
        ]

    def __str__(self) -> str:
        return f"{self.rating} on message {self.message_id}"


# Per-user and per-tenant MCP servers: their rules live beside the MCP client.
from sagents_django.approvals.models import (  # noqa: E402
    ApprovalRequest as ApprovalRequest,
)
from sagents_django.approvals.models import ApprovalVote as ApprovalVote  # noqa: E402
from sagents_django.branches.models import (  # noqa: E402
    ConversationBranch as ConversationBranch,
)
from sagents_django.budgets.models import Budget as Budget  # noqa: E402
from sagents_django.budgets.models import BudgetCounter as BudgetCounter  # noqa: E402
from sagents_django.budgets.models import (  # noqa: E402
    BudgetReservation as BudgetReservation,
)
from sagents_django.budgets.models import UsageEntry as UsageEntry  # noqa: E402
from sagents_django.lifecycle.models import DataExport as DataExport  # noqa: E402
from sagents_django.mcp.models import StoredMcpServer as StoredMcpServer  # noqa: E402
from sagents_django.sharing.models import ConversationShare as ConversationShare  # noqa: E402
from sagents_django.sharing.models import Filesystem as Filesystem  # noqa: E402
from sagents_django.sharing.models import FilesystemShare as FilesystemShare  # noqa: E402
from sagents_django.sharing.models import ShareLink as ShareLink  # noqa: E402
from sagents_django.triggers.models import TriggerEvent as TriggerEvent  # noqa: E402
