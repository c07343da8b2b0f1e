"""Who a conversation is shared with, and the read-only links to it.

A share names a user or a group (exactly one, by constraint) and an access: "read"
(the transcript and files) or "write" (also send, approve, stop). A link is a row
whose id a signed token carries (``sharing.links``): deleting or revoking the row,
or its expiry passing, ends the link whatever copies of the token exist.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from sagents_django.models import CONVERSATION_MODEL

ACCESS_CHOICES = [("read", "read"), ("write", "read and write")]


class ConversationShare(models.Model):
    """One conversation shared with one user or one group."""

    id = models.BigAutoField(primary_key=True)
    conversation = models.ForeignKey(
        CONVERSATION_MODEL, on_delete=models.CASCADE, related_name="shares"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="sagents_shares",
    )
    group = models.ForeignKey(
        "auth.Group",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="sagents_shares",
    )
    access = models.CharField(max_length=8, choices=ACCESS_CHOICES, default="read")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Who shared it (the owner, or an operator in the admin).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "sagents_conversation_shares"
        ordering = ("id",)
        constraints = [
            models.CheckConstraint(
                condition=Q(user__isnull=False, group__isnull=True)
                | Q(user__isnull=True, group__isnull=False),
                name="sagents_share_user_xor_group",
            ),
            models.UniqueConstraint(
                fields=["conversation", "user"],
                condition=Q(user__isnull=False),
                name="sagents_one_share_per_user",
            ),
            models.UniqueConstraint(
                fields=["conversation", "group"],
                condition=Q(group__isnull=False),
                name="sagents_one_share_per_group",
            ),
        ]

    def __str__(self) -> str:
        target = self.user if self.user_id is not None else self.group
        return f"{self.conversation_id} → {target} ({self.access})"


class ShareLink(models.Model):
    """A read-only link to a conversation's transcript, for anyone who has it."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    """The token id the signed link carries."""
    conversation = models.ForeignKey(
        CONVERSATION_MODEL, on_delete=models.CASCADE, related_name="share_links"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    """None: until revoked."""
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "sagents_share_links"
        ordering = ("-created_at",)

    def __str__(self) -> str:
        return f"Link {self.pk} to {self.conversation_id}"
