"""The tool-call lifecycle on display rows, found by ``tool_call_id`` within a scope.

A tool call's card moves pending → executing → completed | failed, or to interrupted
(waiting for a person) and cancelled; each transition only applies from the states
listed below, as in Sagents, and anything else is NotFound (no such call *in that
state* in the scope). ``conversation_id`` narrows the search to one conversation;
pass it when known, since providers do not promise call ids unique across
conversations. Among several matches the newest row wins.

On PostgreSQL a transition is one statement (``sql``): an UPDATE of the row its
locking SELECT finds, a transaction of its own in autocommit.

A row's ``metadata`` or ``content`` that is not a JSON object (left by another
writer) is read as an empty object, so the card still moves: the merge replaces it
with the merged keys instead of failing with a TypeError on every transition.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from django.db import router, transaction
from django.db.models import QuerySet

from sagents_django.conf import sagents_settings
from sagents_django.core.approvals import (
    Approve,
    Decision,
    Edit,
    Reject,
    decision_from_dict,
)
from sagents_django.core.exceptions import InvalidResume
from sagents_django.exceptions import InvalidInput, NotFound
from sagents_django.models import DisplayMessage
from sagents_django.scope import Scope

from . import sql
from .conversations import (
    METADATA_MAX_BYTES,
    conversation_pk,
    owned_ids,
    refuse_read_only,
)
from .validation import clean_mapping, clean_text

OPEN: Final = ("pending", "executing", "interrupted")
HITL_DECISIONS: Final = {
    "approve": "approved",
    "approved": "approved",
    "edit": "edited",
    "edited": "edited",
    "reject": "rejected",
    "rejected": "rejected",
}
"""Accepted decision names (a decision type or its past tense) and what is stored."""


def mark_tool_executing(
    scope: Scope,
    call_id: str,
    info: dict[str, Any] | None = None,
    *,
    conversation_id: Any = None,
) -> DisplayMessage:
    """pending → executing, merging ``info`` (the tool's ``display_text``)."""
    return _transition(
        scope, call_id, conversation_id, to="executing", only=("pending",), merge=info
    )


def complete_tool_call(
    scope: Scope,
    call_id: str,
    metadata: dict[str, Any] | None = None,
    *,
    conversation_id: Any = None,
) -> DisplayMessage:
    """pending | executing | interrupted → completed, merging ``metadata``."""
    return _transition(scope, call_id, conversation_id, to="completed", merge=metadata)


def fail_tool_call(
    scope: Scope,
    call_id: str,
    error_info: dict[str, Any] | None = None,
    *,
    conversation_id: Any = None,
) -> DisplayMessage:
    """pending | executing | interrupted → failed, merging ``error_info``."""
    return _transition(scope, call_id, conversation_id, to="failed", merge=error_info)


def interrupt_tool_call(
    scope: Scope,
    call_id: str,
    info: dict[str, Any] | None = None,
    *,
    conversation_id: Any = None,
) -> DisplayMessage:
    """pending | executing → interrupted, merging ``info``."""
    return _transition(
        scope,
        call_id,
        conversation_id,
        to="interrupted",
        only=("pending", "executing"),
        merge=info,
    )


def cancel_tool_call(
    scope: Scope, call_id: str, *, conversation_id: Any = None
) -> DisplayMessage:
    """pending | executing | interrupted → cancelled."""
    return _transition(scope, call_id, conversation_id, to="cancelled")


def record_hitl_decision(
    scope: Scope,
    call_id: str,
    decision: str | Decision | Mapping[str, Any],
    *,
    conversation_id: Any = None,
) -> DisplayMessage:
    """Note a person's decision on the call (any state) as ``metadata["hitl_decision"]``,
    and on its result row's content when there is one; returns the call row.

    ``decision`` is a decision (``Approve()``, ``{"type": "edit", ...}``: the form
    ``resume`` takes) or a decision type name, present or past tense."""
    stored = _decision_name(decision)
    call_id = _call_id(call_id)
    with transaction.atomic():
        row = _find(scope, call_id, conversation_id, "tool_call", None)
        row.metadata = {**_object(row.metadata), "hitl_decision": stored}
        row.save(update_fields=["metadata"])
        result = (
            _rows(scope, call_id, row.conversation_id, "tool_result")
            .select_for_update()
            .first()
        )
        if result is not None:
            result.content = {**_object(result.content), "hitl_decision": stored}
            result.save(update_fields=["content"])
    return row


def _decision_name(decision: Any) -> str:
    if isinstance(decision, Mapping | Approve | Edit | Reject):
        try:
            return HITL_DECISIONS[decision_from_dict(decision).type]
        except InvalidResume as exc:
            raise InvalidInput(str(exc)) from None
    stored = HITL_DECISIONS.get(decision) if isinstance(decision, str) else None
    if stored is None:
        raise InvalidInput(
            f"decision must be one of {', '.join(HITL_DECISIONS)}; got {decision!r}"
        )
    return stored


def resolve_interrupted_tool_result(
    scope: Scope, tool_call_id: str, content: str, *, conversation_id: Any = None
) -> DisplayMessage:
    """Give an interrupted tool result row its real ``content`` (a sub-agent resumed
    and finished): clears ``is_interrupt`` and marks it completed."""
    call_id = _call_id(tool_call_id)
    text = clean_text(
        content, what="content", max_length=sagents_settings.MAX_STATE_BYTES
    )
    with transaction.atomic():
        row = _find(scope, call_id, conversation_id, "tool_result", ("interrupted",))
        row.content = {**_object(row.content), "content": text, "is_interrupt": False}
        row.status = "completed"
        row.save(update_fields=["content", "status"])
    return row


def _transition(
    scope: Scope,
    call_id: str,
    conversation_id: Any,
    *,
    to: str,
    only: tuple[str, ...] = OPEN,
    merge: dict[str, Any] | None = None,
) -> DisplayMessage:
    refuse_read_only(scope, conversation_id)
    call_id = _call_id(call_id)
    extra = clean_mapping(merge, what="metadata", max_bytes=METADATA_MAX_BYTES)
    using = router.db_for_write(DisplayMessage)
    if sql.direct(scope, using):
        pk = None if conversation_id is None else conversation_pk(conversation_id)
        with sql.isolated(using):
            row = sql.update_newest_call(
                scope,
                call_id,
                conversation_pk=pk,
                statuses=only,
                to=to,
                merge=extra,
                using=using,
            )
        if row is None:
            raise _not_found(call_id, "tool_call", only)
        return row
    with transaction.atomic():
        row = _find(scope, call_id, conversation_id, "tool_call", only)
        row.status = to
        fields = ["status"]
        if extra:
            row.metadata = {**_object(row.metadata), **extra}
            fields.append("metadata")
        row.save(update_fields=fields)
    return row


def _object(value: Any) -> dict[str, Any]:
    """A JSON column's value as an object to merge into ({} if it is not one)."""
    return value if isinstance(value, dict) else {}


def _call_id(value: Any) -> str:
    call_id = clean_text(value, what="call_id", max_length=255)
    if not call_id:
        raise InvalidInput("call_id must not be empty")
    return call_id


def _rows(
    scope: Scope, call_id: str, conversation_id: Any, content_type: str
) -> QuerySet[DisplayMessage]:
    rows = DisplayMessage.objects.filter(
        tool_call_id=call_id,
        content_type=content_type,
        conversation__in=owned_ids(scope),
    )
    if conversation_id is not None:
        rows = rows.filter(conversation_id=conversation_pk(conversation_id))
    return rows.order_by("-id")


def _find(
    scope: Scope,
    call_id: str,
    conversation_id: Any,
    content_type: str,
    statuses: tuple[str, ...] | None,
) -> DisplayMessage:
    refuse_read_only(scope, conversation_id)  # every write finds its row here
    rows = _rows(scope, call_id, conversation_id, content_type)
    if statuses is not None:
        rows = rows.filter(status__in=statuses)
    row = rows.select_for_update().first()
    if row is None:
        raise _not_found(call_id, content_type, statuses)
    return row


def _not_found(
    call_id: str, content_type: str, statuses: tuple[str, ...] | None
) -> NotFound:
    what = "tool call" if content_type == "tool_call" else "tool result"
    if statuses is not None:
        states = ", ".join(statuses[:-1])
        states = f"{states} or {statuses[-1]}" if states else statuses[-1]
        what = f"{states} {what}"
    return NotFound(what, call_id)
