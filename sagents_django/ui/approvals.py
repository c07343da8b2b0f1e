"""Pending approvals: what a person is asked, and the decisions a form posts.

An interrupt is read from the stored agent state with the core's own types, so the
forms offer exactly the decisions each action request allows. The form posts one
group of fields per action request (``decision-<i>``, ``arguments-<i>``,
``message-<i>``), all together, and ``decisions_from_post`` turns them into the
core's decision JSON for ``agent_server.resume``; anything malformed is a
``FormError`` naming the request, and nothing is sent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.http import QueryDict

from sagents_django.admin.presentation import pretty_json
from sagents_django.core.approvals import CustomInterrupt, interrupt_from_dict
from sagents_django.core.exceptions import SerializationError
from sagents_django.models import AgentRun, AgentState
from sagents_django.scope import Scope
from sagents_django.services.conversations import owned_conversations

MAX_ARGUMENTS_CHARS = 100_000
MAX_MESSAGE_CHARS = 10_000


class FormError(ValueError):
    """A decision form that cannot be sent as it is."""


@dataclass(kw_only=True, slots=True)
class Request:
    """One action request as the form shows it."""

    index: int
    tool_call_id: str
    tool_name: str
    arguments: str
    """Pretty JSON, the starting text of the edit box."""
    allowed: tuple[str, ...]
    description: str = ""
    subagent: str = ""


@dataclass(kw_only=True, slots=True)
class Pending:
    """A conversation waiting for a person."""

    conversation: Any
    requests: list[Request]


def requests_of(interrupt_data: Any) -> list[Request]:
    """The action requests of a stored interrupt ([] for none, or for an interrupt
    no form can answer)."""
    if not interrupt_data:
        return []
    try:
        interrupt = interrupt_from_dict(interrupt_data)
    except SerializationError:
        return []
    if isinstance(interrupt, CustomInterrupt):
        return []
    return [
        Request(
            index=i,
            tool_call_id=r.tool_call_id,
            tool_name=r.tool_name,
            arguments=pretty_json(r.arguments),
            allowed=tuple(r.allowed_decisions),
            description=r.description or "",
            subagent=r.subagent or "",
        )
        for i, r in enumerate(interrupt.action_requests)
    ]


def pending_for(scope: Scope, conversation_id: Any) -> list[Request]:
    value = (
        _waiting(scope)
        .filter(conversation_id=conversation_id)
        .values_list("state_data__state__interrupt_data", flat=True)
        .first()
    )
    return requests_of(value)


def _waiting(scope: Scope) -> Any:
    # A resume already under way has answered the interrupt (its run clears it).
    answered = AgentRun.objects.active().values("conversation_id")
    return (
        AgentState.objects.filter(
            conversation__in=owned_conversations(scope).values("pk"),
            state_data__state__interrupt_data__isnull=False,
        )
        .exclude(state_data__state__interrupt_data=None)
        .exclude(conversation_id__in=answered)
    )


def inbox(scope: Scope, *, limit: int = 50) -> list[Pending]:
    """Every conversation of ``scope`` waiting for approval, newest first."""
    states = (
        _waiting(scope)
        .select_related("conversation")
        .order_by("-updated_at", "-pk")
        .only("conversation", "state_data", "updated_at")[:limit]
    )
    out = []
    for state in states:
        data = state.state_data if isinstance(state.state_data, dict) else {}
        inner = data.get("state")
        if not isinstance(inner, dict):
            continue
        requests = requests_of(inner.get("interrupt_data"))
        if requests:
            out.append(Pending(conversation=state.conversation, requests=requests))
    return out


def inbox_count(scope: Scope) -> int:
    """How many conversations wait for the person (the header's badge)."""
    return int(_waiting(scope).count())


def decisions_from_post(post: QueryDict, count: int) -> list[dict[str, Any]]:
    """The decisions a form posted for ``count`` action requests."""
    if count < 1:
        raise FormError("Nothing waits for a decision.")
    decisions: list[dict[str, Any]] = []
    for i in range(count):
        kind = post.get(f"decision-{i}", "")
        where = f"Action {i + 1}"
        if kind == "approve":
            decisions.append({"type": "approve"})
        elif kind == "edit":
            raw = post.get(f"arguments-{i}", "")
            if len(raw) > MAX_ARGUMENTS_CHARS:
                raise FormError(f"{where}: the arguments are too long.")
            try:
                arguments = json.loads(raw)
            except ValueError as exc:
                raise FormError(
                    f"{where}: the arguments are not JSON ({exc})."
                ) from None
            if not isinstance(arguments, dict):
                raise FormError(f"{where}: the arguments must be a JSON object.")
            decisions.append({"type": "edit", "arguments": arguments})
        elif kind == "reject":
            message = post.get(f"message-{i}", "").strip()
            if len(message) > MAX_MESSAGE_CHARS:
                raise FormError(f"{where}: the reason is too long.")
            decisions.append(
                {"type": "reject", "message": message}
                if message
                else {"type": "reject"}
            )
        else:
            raise FormError(f"{where}: choose approve, edit or reject.")
    return decisions
