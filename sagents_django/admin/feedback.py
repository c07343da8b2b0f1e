"""People's ratings of replies, read-only: filter by conversation, model, rating and
date, and export the selection as CSV (an evaluation set's raw material).

A rating is the person's own word, so nobody edits it here; superusers may delete
(a conversation's delete cascades through this admin's delete permission).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.text import Truncator

from sagents_django.admin.records import ReadOnlyAdmin
from sagents_django.models import ReplyFeedback

CSV_COLUMNS = (
    "id",
    "created_at",
    "updated_at",
    "user",
    "conversation_id",
    "conversation_title",
    "message_id",
    "model",
    "rating",
    "comment",
    "reply",
)
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""A cell a spreadsheet would read as a formula (CSV injection) gets a leading
quote."""


def csv_cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return f"'{text}" if text.startswith(FORMULA_STARTS) else text


def csv_rows(feedback: Iterable[ReplyFeedback]) -> Iterable[list[str]]:
    yield list(CSV_COLUMNS)
    for row in feedback:
        content = row.message.content if isinstance(row.message.content, dict) else {}
        reply = content.get("text")
        cells: list[Any] = [
            row.pk,
            row.created_at.isoformat(),
            row.updated_at.isoformat(),
            row.user.get_username(),
            row.conversation_id,
            row.conversation.title,
            row.message_id,
            row.model,
            row.rating,
            row.comment,
            reply if isinstance(reply, str) else "",
        ]
        yield [csv_cell(cell) for cell in cells]


@admin.action(description="Export the selected feedback as CSV")
def export_csv(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet
) -> HttpResponse:
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="reply-feedback.csv"'
    writer = csv.writer(response)
    rows = queryset.select_related("user", "conversation", "message").order_by("pk")
    for line in csv_rows(rows.iterator(chunk_size=500)):
        writer.writerow(line)
    return response


class ReplyFeedbackAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "rating",
        "short_comment",
        "conversation",
        "model",
        "user",
        "created_at",
    )
    list_filter = (
        "rating",
        ("conversation", admin.RelatedOnlyFieldListFilter),
        "model",
        ("created_at", admin.DateFieldListFilter),
    )
    list_select_related = ("conversation", "user")
    search_fields = ("comment", "=model")
    date_hierarchy = "created_at"
    actions = (export_csv,)
    fields = (
        "rating",
        "comment",
        "model",
        "user",
        "conversation",
        "message",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields

    @admin.display(description="comment")
    def short_comment(self, obj: ReplyFeedback) -> str:
        return Truncator(obj.comment).chars(80)
