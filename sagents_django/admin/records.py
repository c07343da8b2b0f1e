"""Read-only admins for the rows the runtime writes.

Display messages, agent states, stored files and recorded write failures (and
runs: ``runs`` adds the operations actions) are the record of what agents did for tenants; editing one by hand would make the two
views of a conversation disagree or corrupt a state the next turn loads (or hide a
failure). So nobody adds or changes them here:
people with the view permission browse them, and superusers may delete them (the
conversation's delete cascades through these admins' delete permissions, so refusing
deletion here would make conversations undeletable).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db import models
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from sagents_django.admin.presentation import chat_entries, json_block, state_summary
from sagents_django.models import (
    AgentState,
    DisplayMessage,
    PersistenceFailure,
    StoredFile,
)


class ReadOnlyAdmin(admin.ModelAdmin):
    """No add, no change; delete for superusers only."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.is_superuser and super().has_delete_permission(request, obj)


class DisplayMessageAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "conversation",
        "message_type",
        "content_type",
        "status",
        "preview",
        "inserted_at",
    )
    list_filter = ("message_type", "content_type", "status")
    list_select_related = ("conversation",)
    search_fields = ("content__text", "content__name", "=tool_call_id")
    search_help_text = "Search message text, tool names and exact tool call ids."
    fields = (
        "conversation",
        "message_type",
        "content_type",
        "status",
        "sequence",
        "tool_call_id",
        "inserted_at",
        "rendered",
        "pretty_content",
        "pretty_metadata",
    )
    readonly_fields = fields

    @admin.display(description="content")
    def preview(self, message: DisplayMessage) -> str:
        content = message.content if isinstance(message.content, dict) else {}
        text = content.get("text") or content.get("name") or content.get("content")
        return Truncator(str(text or "")).chars(80)

    @admin.display(description="as shown")
    def rendered(self, message: DisplayMessage) -> SafeString:
        # A rendered template is safe because it autoescapes what it inserts.
        return render_to_string(
            "admin/sagents_django/includes/chat.html",
            {"chat_entries": chat_entries([message])},
        )

    @admin.display(description="content (JSON)")
    def pretty_content(self, message: DisplayMessage) -> SafeString:
        return json_block(message.content)

    @admin.display(description="metadata")
    def pretty_metadata(self, message: DisplayMessage) -> SafeString:
        return json_block(message.metadata)


class AgentStateAdmin(ReadOnlyAdmin):
    list_display = ("conversation", "version", "revision", "created_at", "updated_at")
    list_select_related = ("conversation",)
    search_fields = ("conversation__title",)
    fields = (
        "conversation",
        "version",
        "revision",
        "created_at",
        "updated_at",
        "summary",
        "pretty_state",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> models.QuerySet:
        # A state can be megabytes; the list never shows it and the detail page
        # loads it on access.
        return super().get_queryset(request).defer("state_data")

    @admin.display(description="summary")
    def summary(self, state: AgentState) -> str:
        s = state_summary(state.state_data)
        waiting = (
            f", waiting for a decision on {s['waiting_for']}"
            if s["interrupted"]
            else ""
        )
        return (
            f"envelope version {s['version']}, {s['messages']} messages, "
            f"{s['todos']} todos{waiting}"
        )

    @admin.display(description="state")
    def pretty_state(self, state: AgentState) -> SafeString:
        return json_block(state.state_data, envelope=True)


class StoredFileAdmin(ReadOnlyAdmin):
    list_display = ("path", "scope_kind", "scope_id", "size", "mime_type", "updated_at")
    list_filter = ("scope_kind", "mime_type")
    search_fields = ("path", "scope_id")
    fields = (
        "scope_kind",
        "scope_id",
        "path",
        "size",
        "mime_type",
        "created_at",
        "updated_at",
        "pretty_metadata",
        "file_content",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> models.QuerySet:
        return super().get_queryset(request).defer("content")

    @admin.display(description="metadata")
    def pretty_metadata(self, stored: StoredFile) -> SafeString:
        return json_block(stored.custom_metadata)

    @admin.display(description="content")
    def file_content(self, stored: StoredFile) -> SafeString:
        # Files are shown verbatim (not as JSON), escaped.
        return format_html('<pre class="sagents-json">{}</pre>', stored.content)


class PersistenceFailureAdmin(ReadOnlyAdmin):
    """Writes of turns that failed: the operator's list of what was not saved."""

    list_display = (
        "created_at",
        "conversation",
        "kind",
        "operation",
        "error_type",
        "short_error",
        "run",
    )
    list_filter = ("kind", "operation", "error_type")
    list_select_related = ("conversation", "run")
    date_hierarchy = "created_at"
    search_fields = ("conversation__title", "error", "error_type", "=run__id")
    search_help_text = "Search error messages, error types and exact run ids."
    fields = (
        "conversation",
        "run",
        "kind",
        "operation",
        "error_type",
        "error",
        "created_at",
        "pretty_details",
    )
    readonly_fields = fields

    @admin.display(description="error")
    def short_error(self, failure: PersistenceFailure) -> str:
        return Truncator(failure.error).chars(120)

    @admin.display(description="details")
    def pretty_details(self, failure: PersistenceFailure) -> SafeString:
        return json_block(failure.details)
