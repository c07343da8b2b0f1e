"""Pending approvals: what a person is asked, and the decisions a form posts.

An interrupt is read from the stored agent state with the core's own types, so the
forms offer exactly the decisions each action request allows. The form posts one
group of fields per action request (``decision-<i>``, ``arguments-<i>``,
``message-<i>``), all together, and ``decisions_from_post`` turns them into the
core's decision JSON for ``agent_server.resume``; anything malformed is a
``FormError`` naming the request, and nothing is sent. The arguments are shown
and edited as fields drawn from the tool's JSON schema (``approval_fields``), and a
file call shows the change it would make (``previews``); an edit that does not pass
the schema raises ``FieldErrors``, the requests carrying each error beside its
field, for the form to be drawn again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.http import QueryDict

from sagents_django.admin.presentation import pretty_json
from sagents_django.approvals.records import action_requests_of, arguments_hash
from sagents_django.budgets import approval as budget_approval
from sagents_django.budgets import texts as budget_texts
from sagents_django.core.approvals import CustomInterrupt, interrupt_from_dict
from sagents_django.core.exceptions import SerializationError
from sagents_django.models import AgentRun, AgentState
from sagents_django.scope import Scope
from sagents_django.services.conversations import owned_conversations

from . import approval_fields, previews

MAX_ARGUMENTS_CHARS = 100_000
MAX_MESSAGE_CHARS = 10_000


class FormError(ValueError):
    """A decision form that cannot be sent as it is."""


class FieldErrors(FormError):
    """Edited arguments that do not fit the tool's schema: ``requests`` hold the
    typed values and each error, to draw the form again."""

    def __init__(self, requests: list[Request]) -> None:
        super().__init__("Some arguments need fixing: see the fields.")
        self.requests = requests


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
    values: dict[str, Any] = field(default_factory=dict)
    """The arguments the model sent."""
    schema: dict[str, Any] | None = None
    """The tool's JSON schema, when the interrupt carries it."""
    fields: list[approval_fields.Field] | None = None
    """The arguments as fields (None: the whole-JSON box)."""
    preview: previews.Preview | None = None
    chosen: str = ""
    """The decision to show selected ("" : the first allowed)."""
    arguments_hash: str = ""
    """The hash of the arguments shown: the form posts it back (``hash-<i>``), and a
    decision on other arguments (a stale page) is refused."""
    settled: str = ""
    """A request of the interrupt already decided (its status), shown without inputs."""
    approvals_needed: int = 1
    approvals_given: int = 0
    reason: str = ""
    error: str = ""
    budget: bool = False
    """A budget's approval (``budgets.approval``): approve or reject, no arguments
    to edit."""


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
    budget = budget_approval.is_budget(interrupt)
    return [
        Request(
            index=i,
            tool_call_id=r.tool_call_id,
            tool_name=r.tool_name,
            arguments=pretty_json(r.arguments),
            allowed=tuple(r.allowed_decisions),
            # A budget's sentence in the reader's language, from its figures.
            description=(
                budget_texts.pause_text(r.arguments, deciding=True)
                if budget
                else r.description
            )
            or "",
            subagent=r.subagent or "",
            values=dict(r.arguments),
            schema=r.parameters,
            fields=approval_fields.fields_for(r.parameters, r.arguments),
            arguments_hash=arguments_hash(r.arguments),
            budget=budget,
        )
        for i, r in enumerate(action_requests_of(interrupt))
    ]


def with_previews(
    scope: Scope, conversation: Any, requests: list[Request]
) -> list[Request]:
    """``requests``, each file call with the diff of what it would change."""
    for r in requests:
        r.preview = previews.preview(scope, conversation, r.tool_name, r.values)
    return requests


def pending_for(scope: Scope, conversation_id: Any) -> list[Request]:
    value = (
        waiting(scope)
        .filter(conversation_id=conversation_id)
        .values_list("state_data__state__interrupt_data", flat=True)
        .first()
    )
    requests = requests_of(value)
    if requests:
        from sagents_django.approvals import records

        from .approval_inbox import annotate

        records.ensure(conversation_id)
        rows = {r.tool_call_id: r for r in records.open_requests(conversation_id)}
        annotate(requests, rows, user=scope.user)
        # The person a budget's approval waits for someone else to give sees
        # the pause, not a form (``waiting_without_form``).
        requests = [r for r in requests if not r.budget or _decides(scope, rows, r)]
    return requests


def _decides(scope: Scope, rows: dict[str, Any], request: Request) -> bool:
    from sagents_django.approvals import routing

    row = rows.get(request.tool_call_id)
    return row is not None and routing.may_decide(scope.user, row)


def waiting_without_form(scope: Scope, conversation_id: Any) -> str:
    """What a pause no form can answer says (a middleware's own interrupt, such as
    a budget's approval), or "" when none waits: the chat shows it with Dismiss,
    so the conversation never waits for good."""
    value = (
        waiting(scope)
        .filter(conversation_id=conversation_id)
        .values_list("state_data__state__interrupt_data", flat=True)
        .first()
    )
    if not value:
        return ""
    try:
        interrupt = interrupt_from_dict(value)
    except SerializationError:
        return "The agent is paused on a request this page cannot show."
    if not isinstance(interrupt, CustomInterrupt):
        return ""
    if budget_approval.is_budget(interrupt):
        said = budget_texts.pause_text(interrupt.data, deciding=False)
        if said:
            return said
    message = interrupt.data.get("message")
    return (
        message
        if isinstance(message, str) and message
        else ("The agent is paused, waiting for something this page cannot decide.")
    )


def waiting(scope: Scope) -> Any:
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
    """Every conversation waiting for ``scope``'s user, newest first: their own and
    those they may decide by permission (``approval_inbox``)."""
    from .approval_inbox import inbox as across

    return across(scope.user, scope, limit=limit)


def inbox_count(scope: Scope) -> int:
    """How many conversations wait for the person (the header's badge)."""
    from .approval_inbox import inbox_count as count

    return count(scope.user, scope)


def decisions_from_post(
    post: QueryDict, requests: list[Request]
) -> list[dict[str, Any]]:
    """The decisions a form posted for ``requests`` (their fields keep what was
    typed: on ``FieldErrors`` the form is drawn again from them)."""
    if not requests:
        raise FormError("Nothing waits for a decision.")
    decisions: list[dict[str, Any]] = []
    failed = False
    for r in requests:
        if r.settled:
            continue  # decided already (a quorum's other requests wait)
        i = r.index
        kind = post.get(f"decision-{i}", "")
        where = f"Action {i + 1}"
        r.chosen = kind if kind in r.allowed else ""
        r.reason = post.get(f"message-{i}", "")[:MAX_MESSAGE_CHARS]
        if kind not in ("approve", "edit", "reject"):
            raise FormError(f"{where}: choose approve, edit or reject.")
        if kind not in r.allowed:
            raise FormError(f"{where}: {kind} is not offered for this call.")
        if kind == "approve":
            decisions.append({"type": "approve"})
        elif kind == "edit":
            arguments = _edited(post, r, where)
            if arguments is None:
                failed = True
                continue
            decisions.append({"type": "edit", "arguments": arguments})
        else:
            message = post.get(f"message-{i}", "").strip()
            if len(message) > MAX_MESSAGE_CHARS:
                raise FormError(f"{where}: the reason is too long.")
            decisions.append(
                {"type": "reject", "message": message}
                if message
                else {"type": "reject"}
            )
    if failed:
        raise FieldErrors(requests)
    return decisions


def _edited(post: QueryDict, r: Request, where: str) -> dict[str, Any] | None:
    """The edited arguments of ``r`` (None: an error is set on ``r`` or a field)."""
    if r.fields is not None and r.schema is not None:
        arguments, ok = approval_fields.read_fields(
            post, f"arg-{r.index}-", r.fields, r.schema
        )
        return arguments if ok else None
    raw = post.get(f"arguments-{r.index}", "")
    r.arguments = raw[:MAX_ARGUMENTS_CHARS]
    if len(raw) > MAX_ARGUMENTS_CHARS:
        raise FormError(f"{where}: the arguments are too long.")
    try:
        arguments = json.loads(raw)
    except ValueError as exc:
        r.error = f"The arguments are not JSON ({exc})."
        return None
    if not isinstance(arguments, dict):
        r.error = "The arguments must be a JSON object."
        return None
    r.error = approval_fields.check_json(r.schema, arguments)
    return None if r.error else arguments
