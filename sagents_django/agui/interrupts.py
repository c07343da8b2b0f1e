"""Our approvals as AG-UI interrupts, and AG-UI resume entries as our decisions.

A paused run ends its AG-UI run with ``RUN_FINISHED`` whose outcome is
``{"type": "interrupt", "interrupts": [...]}``: one interrupt per action request,
its ``id`` the tool call's id, its ``responseSchema`` the JSON Schema of the
decisions that request allows (``edit`` carries the tool's own parameter schema).
The next ``RunAgentInput`` answers with ``resume``: one entry per interrupt,
``payload`` a decision in our JSON form (``{"type": "approve"}``, ``{"type":
"edit", "arguments": {...}}``, ``{"type": "reject", "message"?: str}``) or AG-UI's
approval shorthand (``{"approved": bool, "editedArgs"?: {...}}``). The decisions
then go through ``agent_server.resume``, the path and checks every other client
uses; entries all ``cancelled`` dismiss the approval.
"""

from __future__ import annotations

from typing import Any, Final

from sagents_django.approvals.deciding import Vote
from sagents_django.approvals.records import arguments_hash
from sagents_django.core import interrupt_from_dict
from sagents_django.core.exceptions import SerializationError
from sagents_django.exceptions import Conflict, InvalidInput

REASON: Final = "tool_approval"

DISMISS: Final = "dismiss"
"""What ``decisions_for`` answers when every entry cancels: dismiss the approval."""


def agui_interrupts(interrupt_data: Any) -> list[dict[str, Any]]:
    """The AG-UI interrupts of a stored or published interrupt ([] when there is
    none, or one of a middleware's own kind with no action requests)."""
    requests = _requests(interrupt_data)
    return [_interrupt(request) for request in requests]


def _requests(interrupt_data: Any) -> list[Any]:
    if not interrupt_data:
        return []
    try:
        interrupt = interrupt_from_dict(interrupt_data)
    except SerializationError:
        return []
    return list(getattr(interrupt, "action_requests", []) or [])


def _interrupt(request: Any) -> dict[str, Any]:
    allowed = list(request.allowed_decisions)
    message = request.description or f"Approve {request.tool_name}?"
    meta: dict[str, Any] = {
        "toolName": request.tool_name,
        "arguments": request.arguments,
        "argumentsHash": arguments_hash(request.arguments),
        "allowedDecisions": allowed,
    }
    if request.subagent:
        meta["subagent"] = request.subagent
    return {
        "id": request.tool_call_id,
        "reason": REASON,
        "message": message,
        "toolCallId": request.tool_call_id,
        "responseSchema": response_schema(allowed, request.parameters),
        "metadata": {"sagents": meta},
    }


def response_schema(
    allowed: list[str], parameters: dict[str, Any] | None
) -> dict[str, Any]:
    """The JSON Schema of an answer: one of the allowed decisions."""
    choices: dict[str, dict[str, Any]] = {
        "approve": {"properties": {"type": {"const": "approve"}}},
        "edit": {
            "properties": {
                "type": {"const": "edit"},
                "arguments": parameters or {"type": "object"},
            },
            "required": ["type", "arguments"],
        },
        "reject": {
            "properties": {"type": {"const": "reject"}, "message": {"type": "string"}}
        },
    }
    one_of = []
    for name in allowed:
        schema = {"type": "object", "required": ["type"], **choices[name]}
        schema["additionalProperties"] = False
        one_of.append(schema)
    return {"oneOf": one_of}


def votes_for(entries: list[dict[str, Any]], interrupt_data: Any) -> Any:
    """Votes (one per action request, in the interrupt's order) for AG-UI resume
    entries, or ``DISMISS``, for ``approvals.deciding`` (the one function every
    door decides through: who may decide, how many approvers, stale arguments).
    ``InvalidInput`` when the entries do not answer exactly the pending interrupts.
    An entry's ``metadata.argumentsHash`` (the interrupt's, echoed) says which
    arguments the person saw; without it, the pending request's."""
    requests = _requests(interrupt_data)
    if not requests:
        raise Conflict("Nothing to resume: no approval is pending")
    by_id: dict[str, dict[str, Any]] = {}
    for entry in entries:
        iid = entry["interruptId"]
        if iid in by_id:
            raise InvalidInput(f"resume answers interrupt {iid!r} twice")
        by_id[iid] = entry
    wanted = [r.tool_call_id for r in requests]
    unknown = sorted(set(by_id) - set(wanted))
    if unknown:
        raise InvalidInput(f"resume answers no pending interrupt: {unknown!r}")
    missing = [w for w in wanted if w not in by_id]
    if missing:
        raise InvalidInput(f"resume leaves pending interrupts unanswered: {missing!r}")
    if all(by_id[w]["status"] == "cancelled" for w in wanted):
        return DISMISS
    return [
        Vote(
            tool_call_id=r.tool_call_id,
            arguments_hash=_seen_hash(by_id[r.tool_call_id], r.arguments),
            decision=_decision(by_id[r.tool_call_id]),
        )
        for r in requests
    ]


def _seen_hash(entry: dict[str, Any], arguments: Any) -> str:
    meta = entry.get("metadata")
    given = meta.get("argumentsHash") if isinstance(meta, dict) else None
    return given if isinstance(given, str) else arguments_hash(arguments)


def _decision(entry: dict[str, Any]) -> Any:
    if entry["status"] == "cancelled":
        return {"type": "reject", "message": "Cancelled"}
    payload = entry.get("payload")
    if isinstance(payload, dict) and "approved" in payload and "type" not in payload:
        if payload["approved"] is True:
            edited = payload.get("editedArgs")
            if edited is None:
                return {"type": "approve"}
            return {"type": "edit", "arguments": edited}
        if payload["approved"] is False:
            reason = payload.get("message")
            return {"type": "reject", **({"message": reason} if reason else {})}
    # Our decision JSON, checked by the resume path (a bad one is InvalidInput).
    return payload
