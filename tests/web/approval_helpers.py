"""A conversation paused for approval (no turn runs), and the posts that decide it."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from sagents_django.approvals import records
from sagents_django.approvals.models import ApprovalRequest
from sagents_django.models import AgentState
from tests.django.factories import envelope

ARGS = {"file_path": "/notes.md", "content": "hello"}
PERMISSION = "sagents_django.decide_approvals"


def pause(
    conversation: Any, *tools: str, arguments: Any = None
) -> list[ApprovalRequest]:
    """``conversation`` waits for decisions on a call of each of ``tools``; its
    request rows."""
    requests = [
        {
            "tool_call_id": f"call-{i}",
            "tool_name": name,
            "arguments": arguments or ARGS,
            "allowed_decisions": ["approve", "edit", "reject"],
        }
        for i, name in enumerate(tools)
    ]
    AgentState.objects.update_or_create(
        conversation=conversation,
        defaults={
            "state_data": envelope(
                interrupt_data={"type": "hitl", "action_requests": requests}
            )
        },
    )
    records.ensure(conversation.pk)
    return list(
        ApprovalRequest.objects.filter(conversation_ref=str(conversation.pk)).order_by(
            "index"
        )
    )


def allow(user: Any) -> None:
    """Give ``user`` the permission to decide approvals."""
    app_label, codename = PERMISSION.split(".")
    user.user_permissions.add(
        Permission.objects.get(content_type__app_label=app_label, codename=codename)
    )


def routed(settings: Any, **approvals: Any) -> None:
    settings.SAGENTS = {
        **settings.SAGENTS,
        "APPROVALS": {"PERMISSIONS": {"*": PERMISSION}, **approvals},
    }


def decide(client: Client, conversation: Any, post: dict[str, Any], **extra: Any):
    url = reverse("sagents_django:decide", args=[conversation.pk])
    return client.post(url, post, **extra)


def approve_all(rows: list[ApprovalRequest]) -> dict[str, str]:
    post = {}
    for row in rows:
        post[f"decision-{row.index}"] = "approve"
        post[f"hash-{row.index}"] = row.arguments_hash
    return post
