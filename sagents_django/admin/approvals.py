"""The approval audit: append-only, filterable, exportable.

Nobody adds, changes or deletes an approval request or vote here, superusers
included: the rows are evidence of who decided what (erasure anonymises their
personal fields instead, docs/approvals.md). People with the view permission browse
them, filter by status, tool, outcome and date, and export the selection (or every
row the filters match: "select all") as CSV or JSON, each row with its chain
proposed → decided → executed → result.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from sagents_django.admin.presentation import json_block
from sagents_django.approvals import audit
from sagents_django.approvals.models import ApprovalRequest, ApprovalVote


class AppendOnly(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class VoteInline(admin.TabularInline):
    model = ApprovalVote
    extra = 0
    can_delete = False
    fields = ("created_at", "user_label", "decision", "reason", "arguments_hash", "via")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ApprovalRequestAdmin(AppendOnly):
    list_display = (
        "created_at",
        "tool_name",
        "requested_by_label",
        "status",
        "deciders",
        "execution_status",
        "conversation_ref",
    )
    list_filter = (
        "status",
        "execution_status",
        "tool_name",
        "approvals_needed",
        ("created_at", admin.DateFieldListFilter),
    )
    search_fields = (
        "=tool_call_id",
        "=arguments_hash",
        "requested_by_label",
        "=run_ref",
    )
    search_help_text = "Search exact call ids, argument hashes, run ids, or who asked."
    date_hierarchy = "created_at"
    inlines = [VoteInline]
    actions = ["export_csv", "export_json"]
    fields = (
        "chain_view",
        "tool_name",
        "tool_call_id",
        "arguments_hash",
        "pretty_arguments",
        "policy",
        "permission",
        "approvals_needed",
        "requested_by_label",
        "conversation_ref",
        "run_ref",
        "created_at",
        "expires_at",
        "status",
        "pretty_decision",
        "decided_at",
        "resumed_run_ref",
        "execution_status",
        "executed_at",
        "pretty_result",
    )
    readonly_fields = fields

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def get_queryset(self, request: HttpRequest) -> QuerySet[ApprovalRequest]:
        return super().get_queryset(request).prefetch_related("votes")

    @admin.display(description="decided by")
    def deciders(self, row: ApprovalRequest) -> str:
        return ", ".join(
            f"{v.user_label or 'nobody'} ({v.decision})" for v in row.votes.all()
        )

    @admin.display(description="chain")
    def chain_view(self, row: ApprovalRequest) -> SafeString:
        steps = [
            (
                "proposed",
                f"{row.created_at:%Y-%m-%d %H:%M:%S} by {row.requested_by_label or 'unknown'}",
            ),
            (
                "decided",
                f"{row.get_status_display()}"
                + (f" at {row.decided_at:%Y-%m-%d %H:%M:%S}" if row.decided_at else ""),
            ),
            ("executed", row.execution_status or "not yet"),
            ("result", "recorded" if row.result is not None else "none"),
        ]
        return format_html(
            '<ol class="sg-chain">{}</ol>',
            format_html_join("", "<li><b>{}</b>: {}</li>", steps),
        )

    @admin.display(description="arguments")
    def pretty_arguments(self, row: ApprovalRequest) -> SafeString:
        return json_block(row.arguments)

    @admin.display(description="decision")
    def pretty_decision(self, row: ApprovalRequest) -> SafeString:
        return json_block(row.decision)

    @admin.display(description="result")
    def pretty_result(self, row: ApprovalRequest) -> SafeString:
        return json_block(row.result)

    @admin.action(description="Export the chain as CSV", permissions=["view"])
    def export_csv(self, request: HttpRequest, queryset: QuerySet) -> HttpResponse:
        return _download(audit.as_csv(queryset.prefetch_related("votes")), "csv")

    @admin.action(description="Export the chain as JSON", permissions=["view"])
    def export_json(self, request: HttpRequest, queryset: QuerySet) -> HttpResponse:
        return _download(audit.as_json(queryset.prefetch_related("votes")), "json")


def _download(text: str, kind: str) -> HttpResponse:
    content_type = "text/csv" if kind == "csv" else "application/json"
    response = HttpResponse(text, content_type=f"{content_type}; charset=utf-8")
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    response["Content-Disposition"] = f'attachment; filename="approvals-{stamp}.{kind}"'
    return response
