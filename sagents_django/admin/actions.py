"""The conversation admin's actions: export the agent state, reset a conversation.

Both are gated by ``ConversationAdmin.has_export_permission`` and
``has_reset_permission`` (Django offers an action only to users who pass its
permission checks, and refuses a posted action it did not offer). Reset confirms on an
intermediate page, as ``delete_selected`` does, and skips conversations with a queued
or running turn: the turn's next checkpoint would write the old state back.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db import models, transaction
from django.db.models import F
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.translation import ngettext

from sagents_django.core.serialization import StateSerializer
from sagents_django.core.state import State
from sagents_django.models import (
    AgentRun,
    AgentState,
    DisplayMessage,
)


def empty_state_envelope() -> dict[str, Any]:
    """What a conversation's state is after a reset (and before its first turn)."""
    return StateSerializer.serialize_server_state(State())


@admin.action(description="Export state as JSON", permissions=["export"])
def export_state(
    model_admin: admin.ModelAdmin, request: HttpRequest, queryset: models.QuerySet
) -> HttpResponse:
    pks = list(queryset.values_list("pk", flat=True))
    stored = dict(
        AgentState.objects.filter(conversation__in=pks).values_list(
            "conversation_id", "state_data"
        )
    )
    # A conversation that never ran has no state row: export what it would load.
    envelopes = {pk: stored.get(pk) or empty_state_envelope() for pk in pks}
    if len(pks) == 1:
        body: Any = envelopes[pks[0]]
        filename = f"conversation-{pks[0]}-state.json"
    else:
        body = {str(pk): envelope for pk, envelope in envelopes.items()}
        filename = "conversations-state.json"
    response = HttpResponse(
        json.dumps(body, indent=2, ensure_ascii=False),
        content_type="application/json; charset=utf-8",
    )
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@admin.action(description="Reset agent state and messages", permissions=["reset"])
def reset_conversations(
    model_admin: admin.ModelAdmin, request: HttpRequest, queryset: models.QuerySet
) -> HttpResponse | None:
    if request.POST.get("post") == "yes":
        _reset(model_admin, request, queryset)
        return None  # back to the changelist, as delete_selected does
    conversations = list(queryset)
    busy = set(
        AgentRun.objects.active()
        .filter(conversation__in=conversations)
        .values_list("conversation_id", flat=True)
    )
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Reset conversations?",
        "opts": model_admin.opts,
        "conversations": [(c, c.pk in busy) for c in conversations],
        "any_busy": bool(busy),
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "action_name": "reset_conversations",
        "media": model_admin.media,
    }
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(
        request,
        "admin/sagents_django/conversation/reset_confirmation.html",
        context,
    )


def _reset(
    model_admin: admin.ModelAdmin, request: HttpRequest, queryset: models.QuerySet
) -> None:
    pks = list(queryset.values_list("pk", flat=True))
    envelope = empty_state_envelope()
    done, skipped = 0, 0
    with transaction.atomic():
        # Lock the rows (in pk order, against deadlocks) so no run starts while
        # its conversation is being emptied.
        locked = list(
            model_admin.model._default_manager.select_for_update()
            .filter(pk__in=pks)
            .order_by("pk")
        )
        busy = set(
            AgentRun.objects.active()
            .filter(conversation__in=locked)
            .values_list("conversation_id", flat=True)
        )
        for conversation in locked:
            if conversation.pk in busy:
                # A running turn would write its checkpoint over the reset.
                skipped += 1
                continue
            deleted, _ = DisplayMessage.objects.filter(
                conversation=conversation
            ).delete()
            # A new revision: a session that read the old state cannot save over
            # the reset (its compare-and-set fails).
            AgentState.objects.filter(conversation=conversation).update(
                state_data=envelope,
                revision=F("revision") + 1,
                updated_at=timezone.now(),
            )
            model_admin.log_change(
                request,
                conversation,
                f"Reset the agent state and deleted {deleted} display messages.",
            )
            done += 1
    if done:
        model_admin.message_user(
            request,
            ngettext(
                "Reset %(count)d conversation.",
                "Reset %(count)d conversations.",
                done,
            )
            % {"count": done},
            messages.SUCCESS,
        )
    if skipped:
        model_admin.message_user(
            request,
            ngettext(
                "Skipped %(count)d conversation with a queued or running turn.",
                "Skipped %(count)d conversations with a queued or running turn.",
                skipped,
            )
            % {"count": skipped},
            messages.WARNING,
        )
