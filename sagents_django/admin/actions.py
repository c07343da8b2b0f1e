"""The conversation admin's actions: export the agent state, reset a conversation.

Both are gated by ``ConversationAdmin.has_export_permission`` and
``has_reset_permission`` (Django offers an action only to users who pass its
permission checks, and refuses a posted action it did not offer). Reset is the
runtime's (``agent_server.reset``, for the conversation's owner), confirmed on an
intermediate page as ``delete_selected`` is; it skips conversations with a queued or
running turn: the turn's next checkpoint would write the old state back.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db import models
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.translation import ngettext

from sagents_django.core.serialization import StateSerializer
from sagents_django.core.state import State
from sagents_django.exceptions import NotFound, RunConflict
from sagents_django.models import AgentRun, AgentState
from sagents_django.scope import Scope, owned_by_users, owner_field, scope_class


def conversation_scope(conversation: Any) -> Scope:
    """The scope to act for on ``conversation``: its owner's (PermissionError when
    its owner is not a user the scope can be built for)."""
    field = owner_field(type(conversation))
    if field is None or not owned_by_users(type(conversation)):
        raise PermissionError("the conversation has no user owner to act for")
    return scope_class().for_user(getattr(conversation, field))


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


@admin.action(description="Reset the agent", permissions=["reset"])
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
    """Each conversation through ``agent_server.reset`` (the one reset: state
    cleared, metadata, files and transcript kept, a note in the transcript), for
    its owner's scope."""
    from sagents_django.runtime import agent_server

    done, skipped = 0, 0
    for conversation in queryset.order_by("pk"):
        try:
            agent_server.reset(conversation_scope(conversation), conversation.pk)
        except (RunConflict, NotFound, PermissionError):
            # A running turn would write its checkpoint over the reset; a
            # conversation with no owner to act for cannot be reset here.
            skipped += 1
            continue
        model_admin.log_change(request, conversation, "Reset the agent state.")
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
                "Skipped %(count)d conversation with a queued or running turn (or no "
                "owner to act for).",
                "Skipped %(count)d conversations with a queued or running turn (or "
                "no owner to act for).",
                skipped,
            )
            % {"count": skipped},
            messages.WARNING,
        )
