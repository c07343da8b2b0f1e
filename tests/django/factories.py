"""Builders of test data that fixtures do not cover (helpers, not fixtures)."""

from __future__ import annotations

from typing import Any

from sagents_django import services
from sagents_django.models import (
    AgentRun,
    AgentState,
    DisplayMessage,
    Filesystem,
    FilesystemShare,
    PersistenceFailure,
    ReplyFeedback,
)
from sagents_django.scope import Scope


def envelope(**state: Any) -> dict[str, Any]:
    """A state envelope as ``serialize_server_state`` writes it."""
    body = {"messages": [], "todos": [], "metadata": {}, "interrupt_data": None}
    body.update(state)
    return {"version": 1, "state": body, "serialized_at": "2026-01-01T00:00:00+00:00"}


def tool_call_row(scope: Scope, conversation: Any, call_id: str) -> DisplayMessage:
    return services.append_display_message(
        scope,
        conversation.pk,
        message_type="assistant",
        content_type="tool_call",
        content={"call_id": call_id, "name": "search", "arguments": {"q": "x"}},
    )


def tool_result_row(
    scope: Scope, conversation: Any, call_id: str, *, interrupted: bool = False
) -> DisplayMessage:
    content: dict[str, Any] = {
        "tool_call_id": call_id,
        "name": "search",
        "content": "waiting" if interrupted else "found",
        "is_error": False,
    }
    if interrupted:
        content["is_interrupt"] = True
    return services.append_display_message(
        scope,
        conversation.pk,
        message_type="tool",
        content_type="tool_result",
        content=content,
    )


def snapshot() -> tuple[list[dict[str, Any]], ...]:
    """Every row the services can write, to prove a failed call changed nothing."""
    conversations = services.conversation_model().objects.order_by("pk")
    return (
        list(conversations.values()),
        list(AgentState.objects.order_by("pk").values()),
        list(DisplayMessage.objects.order_by("pk").values()),
        list(AgentRun.objects.order_by("pk").values()),
        list(PersistenceFailure.objects.order_by("pk").values()),
        list(ReplyFeedback.objects.order_by("pk").values()),
        list(Filesystem.objects.order_by("pk").values()),
        list(FilesystemShare.objects.order_by("pk").values()),
    )
