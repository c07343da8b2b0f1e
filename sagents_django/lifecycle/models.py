"""The record of a user's data export: who may download it, and whether they have.

An archive is kept in a storage (``SAGENTS["EXPORT_STORAGE"]``) until its owner
downloads it, once: the download marks the row and deletes the file, so a link
replayed later (from a browser history, a proxy log) finds nothing. One never
downloaded expires (``export.KEEP_DAYS``), its file deleted by the retention pass.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class DataExport(models.Model):
    """One zip of a user's conversations, files, feedback and usage."""

    PENDING = "pending"
    READY = "ready"
    DOWNLOADED = "downloaded"
    FAILED = "failed"
    EXPIRED = "expired"
    STATUSES = [
        (PENDING, "pending"),
        (READY, "ready"),
        (DOWNLOADED, "downloaded"),
        (FAILED, "failed"),
        (EXPIRED, "expired"),
    ]

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="sagents_exports",
        help_text="Whose data it holds; only they may download it.",
    )
    status = models.CharField(max_length=12, choices=STATUSES, default=PENDING)
    file_name = models.CharField(max_length=255, blank=True, default="")
    """The archive's name in the export storage (empty once downloaded)."""
    size = models.PositiveBigIntegerField(default=0)
    conversations = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    downloaded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        app_label = "sagents_django"
        db_table = "sagents_data_exports"
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["user", "-created_at"], name="sagents_export_user")
        ]

    def __str__(self) -> str:
        return f"Export {self.pk} ({self.status})"
