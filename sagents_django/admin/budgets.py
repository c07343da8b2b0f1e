"""Budgets and the usage ledger in the admin: edit limits (validated: no negative or
absurd amount), reset a period's spend, and read spend by user, owner, model and
day over any filtered selection of the ledger."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from sagents_django.admin.records import ReadOnlyAdmin
from sagents_django.budgets.limits import period_start
from sagents_django.budgets.reports import Dimension, spend_by
from sagents_django.models import Budget, BudgetCounter

RAISE = "sagents_django.raise_budget"
VIEWS: tuple[tuple[str, Dimension], ...] = (
    ("By user", "user"),
    ("By owner", "owner"),
    ("By model", "model"),
    ("By day", "day"),
)


class BudgetAdmin(admin.ModelAdmin):
    list_display = (
        "__str__",
        "scope",
        "period",
        "limit",
        "soft_percent",
        "spent_now",
        "enabled",
    )
    list_filter = ("scope", "period", "enabled")
    list_editable = ("limit", "enabled")
    raw_id_fields = ("user", "conversation")
    search_fields = ("user__username", "owner_key", "note")
    actions = ("reset_spend",)

    @admin.display(description="spent this period")
    def spent_now(self, budget: Budget) -> str:
        counter = current_counter(budget)
        return "-" if counter is None else f"${counter.spent:.4f}"

    @admin.action(description="Reset this period's spend", permissions=["raise"])
    def reset_spend(self, request: HttpRequest, queryset: QuerySet[Budget]) -> None:
        reset = 0
        for budget in queryset:
            reset += BudgetCounter.objects.filter(
                key=budget.key,
                period=budget.period,
                starts=period_start(budget.period),
            ).update(spent=0, soft_state="", decided_by=request.user)
        self.message_user(
            request, f"Reset the spend of {reset} budget period(s).", messages.SUCCESS
        )

    def has_raise_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm(RAISE))

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_change_permission(request, obj) or bool(
            request.user.has_perm(RAISE)
        )


def current_counter(budget: Budget) -> BudgetCounter | None:
    return BudgetCounter.objects.filter(
        key=budget.key, period=budget.period, starts=period_start(budget.period)
    ).first()


class UsageEntryAdmin(ReadOnlyAdmin):
    list_display = (
        "created_at",
        "user",
        "owner_key",
        "model",
        "input_tokens",
        "output_tokens",
        "cost",
        "charged",
        "conversation_id",
    )
    list_filter = ("model", "anonymised")
    date_hierarchy = "created_at"
    search_fields = ("user__username", "=owner_key", "model")
    list_select_related = ("user",)
    show_full_result_count = False  # a million rows: no COUNT(*) per page
    change_list_template = "admin/sagents_django/usageentry/change_list.html"

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        response = super().changelist_view(request, extra_context)
        if not isinstance(response, TemplateResponse) or response.context_data is None:
            return response
        changelist = response.context_data.get("cl")
        if changelist is not None:
            entries = changelist.get_queryset(request)
            response.context_data["spend"] = [
                (title, spend_by(entries, dimension)) for title, dimension in VIEWS
            ]
        return response
