"""The conversation admin: a support person's view of one conversation.

The changelist's computed columns (status, message count, last activity) are
subqueries annotated in ``get_queryset``, so a page of conversations costs a fixed
number of queries however many rows it shows. The change page shows the conversation
as its owner saw it (chat bubbles, tool cards), the writes of its turns that failed
(what may be missing) and the agent's state as indented JSON; only the title is
editable, because everything else is written by the runtime.

Every piece of tenant data on the page is behind its own model permission (display
messages, agent state, runs, recorded failures), so granting "view conversation"
alone shows the titles and not the content; the export and reset actions check the
permissions of the rows they read or rewrite.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.contrib.auth import get_permission_codename
from django.db import models
from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce, Greatest
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils import formats, timezone
from django.utils.formats import date_format
from django.utils.html import format_html
from django.utils.safestring import SafeString

from sagents_django.admin.actions import export_state, reset_conversations
from sagents_django.admin.presentation import (
    chat_entries,
    json_block,
    pretty_state,
    state_summary,
)
from sagents_django.admin.runs import (
    failures_url,
    format_cost,
    format_duration,
    format_tokens,
    with_failure_counts,
)
from sagents_django.admin.sharing import ConversationShareInline, ShareLinkInline
from sagents_django.models import (
    RUN_STATUSES,
    AbstractConversation,
    AgentRun,
    AgentState,
    DisplayMessage,
    PersistenceFailure,
)

CHAT_LIMIT = 500
"""The change page shows at most the latest this-many display messages."""

FAILURE_LIMIT = 20
"""The change page lists the latest this-many failed writes (all: their own list)."""

IDLE = "idle"
"""The status of a conversation that has never run."""


def has_model_permission(
    request: HttpRequest, model: type[models.Model], action: str
) -> bool:
    """Whether the user holds ``<app>.<action>_<model>`` (superusers hold all)."""
    opts = model._meta
    return request.user.has_perm(
        f"{opts.app_label}.{get_permission_codename(action, opts)}"
    )


def can_view(request: HttpRequest, model: type[models.Model]) -> bool:
    # Django's own rule: the change permission implies the view permission.
    return has_model_permission(request, model, "view") or has_model_permission(
        request, model, "change"
    )


class RunStatusFilter(admin.SimpleListFilter):
    """Filter on the latest run's status; "idle" is a conversation with no run."""

    title = "run status"
    parameter_name = "run_status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(IDLE, IDLE), *[(s, s) for s in RUN_STATUSES]]

    def queryset(
        self, request: HttpRequest, queryset: models.QuerySet
    ) -> models.QuerySet:
        value = self.value()
        if value == IDLE:
            return queryset.filter(latest_run_status__isnull=True)
        if value in RUN_STATUSES:
            return queryset.filter(latest_run_status=value)
        return queryset


def _compact_time(value: datetime | None) -> SafeString | str:
    # Date over time: the admin's long format wraps to four lines in a table cell.
    if value is None:
        return "-"
    local = timezone.localtime(value)
    return format_html(
        "{}<br>{}", date_format(local, "Y-m-d"), date_format(local, "H:i:s")
    )


class AgentRunInline(admin.TabularInline):
    """The run history with what each run cost and what of it failed; runs are
    written by the runtime only (the run list has the actions)."""

    model = AgentRun
    extra = 0
    can_delete = False
    show_change_link = True
    fields = (
        "status",
        "trigger",
        "created",
        "started",
        "finished",
        "duration",
        "attempts",
        "tokens",
        "cost_usd",
        "error",
        "failures",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> models.QuerySet:
        return with_failure_counts(super().get_queryset(request))

    @admin.display(description="created", ordering="created_at")
    def created(self, run: AgentRun) -> SafeString | str:
        return _compact_time(run.created_at)

    @admin.display(description="started")
    def started(self, run: AgentRun) -> SafeString | str:
        return _compact_time(run.started_at)

    @admin.display(description="finished")
    def finished(self, run: AgentRun) -> SafeString | str:
        return _compact_time(run.finished_at)

    @admin.display(description="duration")
    def duration(self, run: AgentRun) -> str:
        return format_duration(run)

    @admin.display(description="tokens (in / out)")
    def tokens(self, run: AgentRun) -> str:
        return format_tokens(run)

    @admin.display(description="cost (USD)")
    def cost_usd(self, run: AgentRun) -> str:
        return format_cost(run.cost)

    @admin.display(description="failed writes")
    def failures(self, run: AgentRun) -> SafeString | str:
        count = getattr(run, "failure_count", 0)
        if not count:
            return "0"
        url = failures_url(self.admin_site.name, run=run.pk)
        return format_html('<a href="{}">{}</a>', url, count)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ConversationAdmin(admin.ModelAdmin):
    """Works for the default Conversation and for any ``AbstractConversation``."""

    change_form_template = "admin/sagents_django/conversation/change_form.html"
    search_fields = ("title", "display_messages__content__text")
    search_help_text = "Search titles and message text."
    inlines = (AgentRunInline, ConversationShareInline, ShareLinkInline)
    actions = (export_state, reset_conversations)
    list_per_page = 50

    # Owner-dependent options are computed: a swapped model may name its owner
    # differently (OWNER_FIELD) or have none.
    @property
    def owner_field(self) -> str | None:
        return getattr(self.model, "OWNER_FIELD", None)

    def get_queryset(self, request: HttpRequest) -> models.QuerySet:
        runs = AgentRun.objects.filter(conversation=OuterRef("pk")).order_by(
            "-created_at", "-pk"
        )
        rows = DisplayMessage.objects.filter(conversation=OuterRef("pk"))
        message_count = (
            rows.order_by().values("conversation").annotate(n=Count("pk")).values("n")
        )
        last_message_at = rows.order_by("-inserted_at").values("inserted_at")[:1]
        last_run_at = runs.values("created_at")[:1]
        return (
            super()
            .get_queryset(request)
            .annotate(
                latest_run_status=Subquery(runs.values("status")[:1]),
                message_count=Coalesce(
                    Subquery(message_count, output_field=models.IntegerField()), 0
                ),
                last_activity=Greatest(
                    "updated_at",
                    # Coalesce: Greatest is NULL on SQLite if any argument is.
                    Coalesce(Subquery(last_message_at), "updated_at"),
                    Coalesce(Subquery(last_run_at), "updated_at"),
                ),
            )
        )

    # Changelist -------------------------------------------------------------------
    def get_list_display(self, request: HttpRequest) -> tuple[str, ...]:
        owner = [self.owner_field] if self.owner_field else []
        return (
            "display_title",
            *owner,
            "status",
            "message_count",
            "last_activity",
        )

    def get_list_display_links(
        self, request: HttpRequest, list_display: Any
    ) -> tuple[str, ...]:
        return ("display_title",)

    def get_list_select_related(self, request: HttpRequest) -> Any:
        return [self.owner_field] if self.owner_field else False

    def get_list_filter(self, request: HttpRequest) -> list[Any]:
        # RelatedOnly: list owners that have conversations, not every user.
        owner = (
            [(self.owner_field, admin.RelatedOnlyFieldListFilter)]
            if self.owner_field
            else []
        )
        return [RunStatusFilter, *owner, "created_at", "updated_at"]

    @admin.display(description="title", ordering="title")
    def display_title(self, conversation: AbstractConversation) -> str:
        return conversation.title or "(untitled)"

    @admin.display(description="status", ordering="latest_run_status")
    def status(self, conversation: AbstractConversation) -> str:
        return getattr(conversation, "latest_run_status", None) or IDLE

    @admin.display(description="messages", ordering="message_count")
    def message_count(self, conversation: AbstractConversation) -> int:
        return getattr(conversation, "message_count", 0)

    @admin.display(description="last activity", ordering="last_activity")
    def last_activity(self, conversation: AbstractConversation) -> str:
        # Formatted here: a read-only field would print a raw datetime's repr.
        value = getattr(conversation, "last_activity", None) or conversation.updated_at
        return formats.localize(timezone.localtime(value))

    # Change page ------------------------------------------------------------------
    def get_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        owner = [self.owner_field] if self.owner_field else []
        return (
            "id",
            *owner,
            "title",
            "status",
            "message_count",
            "created_at",
            "updated_at",
            "last_activity",
            "pretty_metadata",
        )

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # Everything but the title: the rest is the runtime's (owner, counters) or
        # would move a tenant's data to another tenant.
        return [f for f in self.get_fields(request, obj) if f != "title"]

    @admin.display(description="metadata")
    def pretty_metadata(self, conversation: AbstractConversation) -> SafeString:
        return json_block(conversation.metadata)

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Any = None,
    ) -> HttpResponse:
        if obj is not None:
            context.update(self._transcript_context(request, obj))
        return super().render_change_form(request, context, add, change, form_url, obj)

    def _transcript_context(
        self, request: HttpRequest, conversation: Any
    ) -> dict[str, Any]:
        context: dict[str, Any] = {
            "can_view_messages": can_view(request, DisplayMessage),
            "can_view_state": can_view(request, AgentState),
            "can_view_failures": can_view(request, PersistenceFailure),
            "can_view_runs": can_view(request, AgentRun),
        }
        if context["can_view_runs"]:
            opts = AgentRun._meta
            changelist = reverse(
                f"admin:{opts.app_label}_{opts.model_name}_changelist",
                current_app=self.admin_site.name,
            )
            context["runs_url"] = (
                f"{changelist}?{urlencode({'conversation': conversation.pk})}"
            )
        if context["can_view_messages"]:
            latest = list(
                DisplayMessage.objects.filter(conversation=conversation).order_by(
                    "-inserted_at", "-sequence", "-id"
                )[:CHAT_LIMIT]
            )
            latest.reverse()
            context["chat_entries"] = chat_entries(latest)
            context["chat_total"] = getattr(conversation, "message_count", len(latest))
            context["chat_shown"] = len(latest)
        if context["can_view_failures"]:
            failures = PersistenceFailure.objects.filter(
                conversation=conversation
            ).select_related("run")
            context["failures"] = list(failures[:FAILURE_LIMIT])
            context["failure_total"] = (
                len(context["failures"])
                if len(context["failures"]) < FAILURE_LIMIT
                else failures.count()
            )
            context["failures_url"] = failures_url(
                self.admin_site.name, conversation=conversation.pk
            )
        if context["can_view_state"]:
            state = AgentState.objects.filter(conversation=conversation).first()
            context["agent_state"] = state
            if state is not None:
                context["agent_state_json"] = pretty_state(state.state_data)
                context["agent_state_summary"] = state_summary(state.state_data)
        return context

    # Permissions --------------------------------------------------------------------
    def has_add_permission(self, request: HttpRequest) -> bool:
        # Conversations are created by the services, with an owner and a scope.
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Deleting cascades to messages, state and runs: superusers only.
        return request.user.is_superuser and super().has_delete_permission(request, obj)

    def has_export_permission(self, request: HttpRequest) -> bool:
        return can_view(request, AgentState)

    def has_reset_permission(self, request: HttpRequest) -> bool:
        return has_model_permission(
            request, AgentState, "change"
        ) and has_model_permission(request, DisplayMessage, "add")
