"""Who a conversation is shared with, and the read-only links to it.

A share names a user or a group (exactly one, by constraint) and an access: "read"
(the transcript and files) or "write" (also send, approve, stop). A link is a row
whose id a signed token carries (``sharing.links``): deleting or revoking the row,
or its expiry passing, ends the link whatever copies of the token exist.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q

from sagents_django.models import CONVERSATION_MODEL

ACCESS_CHOICES = [("read", "read"), ("write", "read and write")]


def share_target(related_name: str) -> tuple[models.ForeignKey, models.ForeignKey]:
    """A share's ``user`` and ``group`` columns (exactly one set:
    ``share_constraints``)."""
    return (
        models.ForeignKey(
            settings.AUTH_USER_MODEL,
            null=True,
            blank=True,
            on_delete=models.CASCADE,
            related_name=related_name,
        ),
        models.ForeignKey(
            "auth.Group",
            null=True,
            blank=True,
            on_delete=models.CASCADE,
            related_name=related_name,
        ),
    )


def share_constraints(
    shared: str, names: tuple[str, str, str]
) -> list[models.BaseConstraint]:
    """A share names a user or a group, and one share per user (group) per
    ``shared`` object; ``names``: the three constraints' names."""
    return [
        models.CheckConstraint(
            condition=Q(user__isnull=False, group__isnull=True)
            | Q(user__isnull=True, group__isnull=False),
            name=names[0],
        ),
        models.UniqueConstraint(
            fields=[shared, "user"],
            condition=Q(user__isnull=False),
            name=names[1],
        ),
        models.UniqueConstraint(
            fields=[shared, "group"],
            condition=Q(group__isnull=False),
            name=names[2],
        ),
    ]


class Share(models.Model):
    """What every share has: an access, who made it and when (the user or group
    it names comes from ``share_target``)."""

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

    user_id: Any

    class Meta:
        abstract = True

    def target(self) -> Any:
        """The user or group shared with."""
        return getattr(self, "user" if self.user_id is not None else "group")


class ConversationShare(Share):
    """One conversation shared with one user or one group."""

    id = models.BigAutoField(primary_key=True)
    conversation = models.ForeignKey(
        CONVERSATION_MODEL, on_delete=models.CASCADE, related_name="shares"
    )
    user, group = share_target("sagents_shares")

    class Meta:
        db_table = "sagents_conversation_shares"
        ordering = ("id",)
        constraints = share_constraints(
            "conversation",
            (
                "sagents_share_user_xor_group",
                "sagents_one_share_per_user",
                "sagents_one_share_per_group",
            ),
        )

    def __str__(self) -> str:
        return f"{self.conversation_id} → {self.target()} ({self.access})"


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


class Filesystem(models.Model):
    """A filesystem scope (``("project", 7)``) and who owns it.

    The owner is the owner of the conversation that first claimed it as its own:
    a conversation's own filesystem is the one the site gives it
    (``SAGENTS["FILESYSTEM_SCOPE"]``, else ``("agent", <agent_id>)``), and the
    first time its owner shares it or names it in a call, this row is written
    (``sharing.filesystems``). A call naming a key that holds no files and no one
    claimed makes it the caller's (no conversation, and no shares); naming a key
    with files never does: keys are easy to guess (``("user", 42)``), the site's
    assignment is not, and it takes such a row over.
    """

    id = models.BigAutoField(primary_key=True)
    kind = models.CharField(max_length=64)
    ident = models.CharField(max_length=255)
    """The scope's two parts as ``StoredFile`` keeps them (``filesystems.keys``)."""
    owner_key = models.CharField(max_length=255, db_index=True)
    """The primary key, as text, of what owns conversations (a user, or a team)."""
    conversation = models.ForeignKey(
        CONVERSATION_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The conversation whose own filesystem it was when claimed.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "sagents_filesystems"
        ordering = ("id",)
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "ident"], name="sagents_one_filesystem_per_scope"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind}:{self.ident}"

    @property
    def key(self) -> tuple[str, str]:
        return (self.kind, self.ident)


class FilesystemShare(Share):
    """One filesystem shared with one user or one group: "read" (its files on the
    shared files page and over the socket) or "write" (also a turn may use it,
    and uploads)."""

    id = models.BigAutoField(primary_key=True)
    filesystem = models.ForeignKey(
        Filesystem, on_delete=models.CASCADE, related_name="shares"
    )
    user, group = share_target("sagents_filesystem_shares")

    class Meta:
        db_table = "sagents_filesystem_shares"
        ordering = ("id",)
        constraints = share_constraints(
            "filesystem",
            (
                "sagents_fs_share_user_xor_group",
                "sagents_one_fs_share_per_user",
                "sagents_one_fs_share_per_group",
            ),
        )

    def __str__(self) -> str:
        return f"{self.filesystem} → {self.target()} ({self.access})"
