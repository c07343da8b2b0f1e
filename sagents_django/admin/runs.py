"""The run admin: the operations console.

Runs are listed by status (the filter names them as an operator thinks of them:
running, waiting for approval, failed...) with their errors, attempts, durations,
tokens, cost and the writes of theirs that failed, and the actions of
``run_actions`` act on the selected ones. A page costs a fixed number of queries:
conversations and owners are joined, failure counts are a subquery.

Runs are written by the runtime only, so every field is read-only; the actions
need the "change run" permission (``has_operate_permission``), which no one holds
by default but superusers.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.contrib.auth import get_permission_codename
from django.db import models
from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from sagents_django.admin.presentation import json_block
from sagents_django.admin.records import ReadOnlyAdmin
from sagents_django.admin.run_actions import RUN_ACTIONS
from sagents_django.models import AgentRun, PersistenceFailure
from sagents_django.scope import owner_field
from sagents_django.services import conversation_model

STATUS_LABELS = {
    "running": "running",
    "queued": "queued",
    "interrupted": "waiting for approval",
    "error": "failed",
    "cancelled": "cancelled",
    "completed": "completed",
}
"""The run statuses in the order and words of the status filter."""


def format_duration(run: AgentRun, now: datetime | None = None) -> str:
    """How long the run ran (so far, while it runs); "-" before it started."""
    if run.started_at is None:
        return "-"
    end = run.finished_at or now or timezone.now()
    seconds = max((end - run.started_at) / timedelta(seconds=1), 0.0)
    if seconds < 60:
        text = f"{seconds:.1f} s"
    elif seconds < 3600:
        text = f"{int(seconds // 60)} min {int(seconds % 60)} s"
    else:
        text = f"{int(seconds // 3600)} h {int(seconds % 3600 // 60)} min"
    return text if run.finished_at else f"{text} so far"


def format_cost(cost: Decimal | None) -> str:
    """USD without trailing zeros; "-" for a model with no known price."""
    if cost is None:
        return "-"
    if cost == 0:
        return "$0"
    return f"${cost.normalize():f}"


def format_tokens(run: AgentRun) -> str:
    return f"{run.input_tokens:,} / {run.output_tokens:,}"


def failures_url(site_name: str, **params: Any) -> str:
    opts = PersistenceFailure._meta
    changelist = reverse(
        f"admin:{opts.app_label}_{opts.model_name}_changelist", current_app=site_name
    )
    return f"{changelist}?{urlencode(params)}"


def with_failure_counts(queryset: models.QuerySet) -> models.QuerySet:
    """``failure_count`` on each run: its recorded failed writes (a subquery)."""
    counts = (
        PersistenceFailure.objects.filter(run=OuterRef("pk"))
        .order_by()
        .values("run")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return queryset.annotate(
        failure_count=Coalesce(Subquery(counts, output_field=models.IntegerField()), 0)
    )


class RunStatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return list(STATUS_LABELS.items())

    def queryset(
        self, request: HttpRequest, queryset: models.QuerySet
    ) -> models.QuerySet:
        value = self.value()
        return queryset.filter(status=value) if value in STATUS_LABELS else queryset


class AgentRunAdmin(ReadOnlyAdmin):
    list_display_links = ("short_id",)
    list_filter = (RunStatusFilter, "trigger", "cancel_requested")
    date_hierarchy = "created_at"
    search_fields = ("=id", "=conversation__id", "conversation__title", "error")
    search_help_text = (
        "Search conversation titles, errors, exact run or conversation ids."
    )
    list_per_page = 50
    actions = RUN_ACTIONS
    fields = (
        "id",
        "conversation",
        "status_label",
        "trigger",
        "created_at",
        "started_at",
        "finished_at",
        "duration",
        "heartbeat_at",
        "lease_owner",
        "attempts",
        "cancel_requested",
        "tokens",
        "cost_usd",
        "error",
        "failures",
        "journal",
        "checkpoint_revision",
        "pretty_metadata",
    )
    readonly_fields = fields

    @property
    def owner_field(self) -> str | None:
        return owner_field(conversation_model())

    def get_queryset(self, request: HttpRequest) -> models.QuerySet:
        return with_failure_counts(super().get_queryset(request))

    def get_list_display(self, request: HttpRequest) -> tuple[str, ...]:
        owner = ("owner",) if self.owner_field else ()
        return (
            "short_id",
            "conversation",
            *owner,
            "status_label",
            "trigger",
            "created_at",
            "duration",
            "attempts",
            "tokens",
            "cost_usd",
            "short_error",
            "failures",
        )

    def get_list_select_related(self, request: HttpRequest) -> Any:
        owner = [f"conversation__{self.owner_field}"] if self.owner_field else []
        return ["conversation", *owner]

    # Columns -------------------------------------------------------------------------
    @admin.display(description="run", ordering="created_at")
    def short_id(self, run: AgentRun) -> str:
        return str(run.pk)[:8]

    @admin.display(description="owner")
    def owner(self, run: AgentRun) -> Any:
        return getattr(run.conversation, self.owner_field or "", None) or "-"

    @admin.display(description="status", ordering="status")
    def status_label(self, run: AgentRun) -> SafeString:
        label = STATUS_LABELS.get(run.status, run.status)
        if run.cancel_requested and run.is_active:
            label = f"{label} (cancelling)"
        return format_html(
            '<span class="sagents-badge sagents-badge--{}">{}</span>',
            run.status,
            label,
        )

    @admin.display(description="duration")
    def duration(self, run: AgentRun) -> str:
        return format_duration(run)

    @admin.display(description="tokens (in / out)", ordering="input_tokens")
    def tokens(self, run: AgentRun) -> str:
        return format_tokens(run)

    @admin.display(description="cost (USD)", ordering="cost")
    def cost_usd(self, run: AgentRun) -> str:
        return format_cost(run.cost)

    @admin.display(description="error")
    def short_error(self, run: AgentRun) -> str:
        return Truncator(run.error).chars(100) if run.error else ""

    @admin.display(description="failed writes", ordering="failure_count")
    def failures(self, run: AgentRun) -> SafeString | str:
        count = getattr(run, "failure_count", 0)
        if not count:
            return "0"
        url = failures_url(self.admin_site.name, run=run.pk)
        return format_html('<a href="{}">{}</a>', url, count)

    @admin.display(description="tool calls")
    def journal(self, run: AgentRun) -> SafeString | str:
        """The run's tool-call journal: a ``lost`` call was running when its worker
        died and, not being idempotent, was answered with an error, not run again."""
        records = list(run.tool_calls.all()[:200])
        if not records:
            return "-"
        rows = format_html_join(
            "",
            '<tr class="sagents-call--{}"><td>{}</td><td><code>{}</code></td>'
            "<td>{}</td><td>{}</td></tr>",
            (
                (
                    r.status,
                    r.name,
                    r.call_id,
                    r.status.upper() if r.status == "lost" else r.status,
                    r.attempt,
                )
                for r in records
            ),
        )
        return format_html(
            "<table><thead><tr><th>tool</th><th>call id</th><th>status</th>"
            "<th>attempt</th></tr></thead><tbody>{}</tbody></table>",
            rows,
        )

    @admin.display(description="metadata")
    def pretty_metadata(self, run: AgentRun) -> SafeString:
        return json_block(run.metadata)

    # Permissions ---------------------------------------------------------------------
    def has_operate_permission(self, request: HttpRequest) -> bool:
        """Cancel, resume and re-run: the "change run" permission."""
        opts = self.opts
        return request.user.has_perm(
            f"{opts.app_label}.{get_permission_codename('change', opts)}"
        )
