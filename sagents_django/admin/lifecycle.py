"""Exports and erasure in the admin: the exports' rows (read-only: an archive is
its owner's to download, from their usage page), and two actions a site adds to
its user admin::

    from django.contrib.auth.admin import UserAdmin
    from sagents_django.admin.lifecycle import erase_users, export_users

    class SiteUserAdmin(UserAdmin):
        actions = [export_users, erase_users]
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest

from sagents_django.admin.records import ReadOnlyAdmin
from sagents_django.exceptions import Conflict
from sagents_django.lifecycle.erasure import erase_user
from sagents_django.lifecycle.export import request_export


class DataExportAdmin(ReadOnlyAdmin):
    list_display = (
        "created_at",
        "user",
        "status",
        "conversations",
        "size",
        "downloaded_at",
    )
    list_filter = ("status",)
    date_hierarchy = "created_at"
    fields = (
        "user",
        "status",
        "conversations",
        "size",
        "error",
        "created_at",
        "finished_at",
        "downloaded_at",
    )


@admin.action(description="Export the selected users' agent data (for them)")
def export_users(
    modeladmin: Any, request: HttpRequest, queryset: QuerySet[Any]
) -> None:
    for user in queryset:
        export = request_export(user)
        modeladmin.message_user(
            request,
            f"Export of {user}: {export.status}; they download it from their "
            "usage page.",
            messages.SUCCESS,
        )


@admin.action(description="Erase the selected users' agent data (every store)")
def erase_users(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Any]) -> None:
    if not request.user.is_superuser:
        raise PermissionDenied("Only a superuser may erase a user's data.")
    for user in queryset:
        try:
            # Short: on SQLite a turn ends on the thread this view runs on.
            report = erase_user(user, wait=5)
        except Conflict as exc:
            modeladmin.message_user(request, f"{user}: {exc}", messages.ERROR)
            continue
        removed = ", ".join(f"{n} {name}" for name, n in report.removed.items() if n)
        modeladmin.message_user(
            request,
            f"Erased {user}: {removed or 'nothing was stored'}.",
            messages.SUCCESS,
        )
