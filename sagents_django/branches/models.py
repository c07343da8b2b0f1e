"""The branches of a conversation's transcript (``runtime.branches``), a model of
its own beside the app's core tables (re-exported by ``sagents_django.models``)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from sagents_django.models import CONVERSATION_MODEL


class ConversationBranch(models.Model):
    """One branch of a conversation's transcript (``runtime.branches``).

    Regenerating a reply or editing a person's message starts a branch instead of
    rewriting the transcript. A conversation with none has one implicit line; the
    first branching writes its trunk (number 0) and the new branch. A branch's own
    rows are the display rows written while it was shown: ranges of row ids
    (``segments``), so nothing that appends rows needs to know about branches.
    Its transcript is its parent's up to ``keeps_through``, then its own rows.
    """

    id = models.BigAutoField(primary_key=True)
    conversation = models.ForeignKey(
        CONVERSATION_MODEL, on_delete=models.CASCADE, related_name="branches"
    )
    number = models.PositiveIntegerField()
    """0 for the trunk, then 1, 2... in the order they were made."""
    parent = models.PositiveIntegerField(null=True, blank=True)
    """The number of the branch it departs from (None: the trunk)."""
    keeps_through = models.BigIntegerField(null=True, blank=True)
    """The id of the parent's last row it shares (None: none, it starts afresh)."""
    segments = models.JSONField(default=list)
    """Its own rows: ``[after, through]`` pairs of row ids (``after < id <=
    through``; ``through`` None while it is shown and rows are being added)."""
    state_data = models.JSONField(null=True, blank=True)
    """Its agent state envelope while it is not shown (the shown branch's is the
    ``AgentState`` row)."""
    active = models.BooleanField(default=False)
    activated_at = models.DateTimeField()
    """When it was last shown: switching to a point shows its latest branch."""
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "sagents_branches"
        ordering = ("conversation", "number")
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "number"], name="sagents_one_branch_number"
            ),
            models.UniqueConstraint(
                fields=["conversation"],
                condition=Q(active=True),
                name="sagents_one_shown_branch",
            ),
        ]

    def __str__(self) -> str:
        return f"Branch {self.number} of {self.conversation_id}"
