"""The triggers' starts in the admin: what started, what waits for its trigger's
rate, and what failed with its error; a failed start can be started again."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.text import Truncator

from sagents_django.admin.records import ReadOnlyAdmin
from sagents_django.triggers import start_event
from sagents_django.triggers.models import TriggerEvent


class TriggerEventAdmin(ReadOnlyAdmin):
    list_display = (
        "created_at",
        "trigger",
        "label",
        "status",
        "conversation_id",
        "short_error",
        "attempts",
    )
    list_filter = ("status", "trigger")
    search_fields = ("label", "object", "=conversation_id", "=run_id")
    search_help_text = "Search labels and objects, or an exact conversation or run id."
    date_hierarchy = "created_at"
    actions = ("start_again",)
    # The scope is the acting user's id only; the message may hold the object's
    # data, so it is shown (escaped) to whoever may view these rows.
    fields = (
        "trigger",
        "object",
        "change",
        "label",
        "status",
        "error",
        "scope",
        "conversation_id",
        "run_id",
        "title",
        "message",
        "attempts",
        "created_at",
        "started_at",
    )

    @admin.display(description="error")
    def short_error(self, event: TriggerEvent) -> str:
        return Truncator(event.error).chars(120)

    @admin.action(description="Start the selected failed starts again")
    def start_again(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        failed = list(
            queryset.filter(status=TriggerEvent.FAILED)
            .exclude(message="")  # the trigger itself raised: nothing to start
            .values_list("pk", flat=True)
        )
        TriggerEvent.objects.filter(pk__in=failed).update(
            status=TriggerEvent.PENDING, error=""
        )
        started = sum(start_event(pk) for pk in failed)
        self.message_user(
            request,
            f"{started} of {len(failed)} started; the rest wait for their trigger's "
            "rate or failed again (see their error).",
            messages.SUCCESS if started == len(failed) else messages.WARNING,
        )

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Changing is only the action above; the rows stay as recorded.
        return obj is None and request.user.has_perm(
            "sagents_django.change_triggerevent"
        )
