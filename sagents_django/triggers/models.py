"""The record of every start a trigger asked for: the idempotency key, the queue a
storm waits in, and the error an operator reads in the admin."""

from __future__ import annotations

from django.db import models


class TriggerEvent(models.Model):
    """One (trigger, object, change): at most one run, however often the save or
    the beat that caused it is retried."""

    PENDING = "pending"
    STARTED = "started"
    FAILED = "failed"
    STATUSES = [(PENDING, "pending"), (STARTED, "started"), (FAILED, "failed")]

    trigger = models.CharField(max_length=200)
    object = models.CharField(
        max_length=255, help_text="What caused it: app_label.model:pk, or a schedule."
    )
    change = models.CharField(
        max_length=64, help_text="Which change of the object (a digest by default)."
    )
    label = models.CharField(max_length=255, help_text="Shown on the conversation.")
    status = models.CharField(max_length=10, choices=STATUSES, default=PENDING)
    scope = models.JSONField(help_text="Whose run it is (Scope.to_dict()).")
    conversation_id = models.CharField(
        max_length=64, blank=True, default="", help_text="Empty: a new conversation."
    )
    title = models.CharField(max_length=255, blank=True, default="")
    message = models.TextField()
    run_id = models.CharField(max_length=64, blank=True, default="")
    error = models.TextField(blank=True, default="")
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        app_label = "sagents_django"
        db_table = "sagents_trigger_events"
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["trigger", "object", "change"], name="sagents_trigger_once"
            )
        ]
        indexes = [
            models.Index(fields=["status", "id"], name="sagents_trigger_queue"),
            models.Index(fields=["trigger", "started_at"], name="sagents_trigger_rate"),
        ]

    def __str__(self) -> str:
        return f"{self.trigger}: {self.label}"
