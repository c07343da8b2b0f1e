"""HumanInTheLoop: pause before chosen tools run, until a person decides.

``interrupt_on`` maps tool names to ``True`` (approve, edit or reject allowed),
``False`` (no pause) or ``{"allowed_decisions": [...], "description": "..."}``
(``description`` is optional and shown to the person; ``permission``, the name of a
permission whose holders may decide, and ``approvers``, how many distinct people
must approve, are optional too and routed by the host: see docs/approvals.md). HumanInTheLoop is an ordinary
middleware: it implements ``review_tool_calls`` and the loop does the rest (see
``core.review``). When the model calls such a tool the turn ends ``interrupted``
with a ``HITLInterrupt``; ``Agent.aresume(state, decisions)`` takes one decision per
action request, in order (the JSON forms are in ``core.approvals``). Calls of the
same response that need no approval run with the approved ones. Bad decisions raise
``InvalidResume`` and change nothing.

A site's own approval policy is a subclass (or any middleware) that implements
``review_tool_calls`` too, e.g. one that drops the requests of staff users::

    class StaffSkipApproval(HumanInTheLoop):
        def review_tool_calls(self, state, calls, context):
            if context.tool_context.get("is_staff"):
                return None
            return super().review_tool_calls(state, calls, context)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..approvals import DECISION_TYPES, ActionRequest, ReviewContext
from ..approvals.interrupts import MAX_APPROVERS
from ..exceptions import ConfigurationError
from .base import Middleware

if TYPE_CHECKING:
    from ..messages import ToolCall
    from ..state import State

CONFIG_KEYS = frozenset({"allowed_decisions", "description", "permission", "approvers"})


def normalize_interrupt_on(
    interrupt_on: dict[str, Any] | None,
) -> dict[str, dict[str, Any]]:
    """``{tool: {"allowed_decisions": [...], "description"?: str}}`` for every tool
    that pauses."""
    configs: dict[str, dict[str, Any]] = {}
    for name, value in (interrupt_on or {}).items():
        if value is False or value is None:
            continue
        if value is True:
            configs[name] = {"allowed_decisions": list(DECISION_TYPES)}
            continue
        if (
            not isinstance(value, dict)
            or "allowed_decisions" not in value
            or not set(value) <= CONFIG_KEYS
        ):
            raise ConfigurationError(
                f"interrupt_on[{name!r}] must be True, False or "
                f"{{'allowed_decisions': [...], 'description': '...'}}, not {value!r}"
            )
        given = value["allowed_decisions"]
        allowed = [str(d) for d in given] if isinstance(given, list | tuple) else []
        bad = [d for d in allowed if d not in DECISION_TYPES]
        if bad or not allowed:
            raise ConfigurationError(
                f"interrupt_on[{name!r}] allowed_decisions must be a non-empty subset of "
                f"{list(DECISION_TYPES)}, not {given!r}"
            )
        config: dict[str, Any] = {"allowed_decisions": allowed}
        description = value.get("description")
        if description is not None:
            if not isinstance(description, str):
                raise ConfigurationError(
                    f"interrupt_on[{name!r}] description must be a string, "
                    f"not {description!r}"
                )
            config["description"] = description
        permission = value.get("permission")
        if permission is not None:
            if not isinstance(permission, str) or "." not in permission:
                raise ConfigurationError(
                    f"interrupt_on[{name!r}] permission must be 'app_label.codename', "
                    f"not {permission!r}"
                )
            config["permission"] = permission
        approvers = value.get("approvers")
        if approvers is not None:
            if type(approvers) is not int or not 1 <= approvers <= MAX_APPROVERS:
                raise ConfigurationError(
                    f"interrupt_on[{name!r}] approvers must be an integer from 1 to "
                    f"{MAX_APPROVERS}, not {approvers!r}"
                )
            config["approvers"] = approvers
        configs[name] = config
    return configs


class HumanInTheLoop(Middleware):
    """Pauses before the tools named in ``interrupt_on`` run."""

    def __init__(self, *, interrupt_on: dict[str, Any] | None = None) -> None:
        super().__init__(interrupt_on=interrupt_on)
        self.review_configs = normalize_interrupt_on(interrupt_on)

    def review_tool_calls(
        self, state: State, calls: list[ToolCall], context: ReviewContext
    ) -> list[ActionRequest] | None:
        requests = []
        for call in calls:
            config = self.review_configs.get(call.name)
            if config is not None:
                requests.append(
                    ActionRequest.for_call(
                        call,
                        description=config.get("description"),
                        allowed_decisions=config["allowed_decisions"],
                        permission=config.get("permission"),
                        approvers=config.get("approvers"),
                    )
                )
        return requests or None

    def restorable_interrupt(self, interrupt_data: dict[str, Any]) -> bool:
        return is_hitl_interrupt(interrupt_data)

    def debug_summary(self) -> dict[str, Any]:
        return {"interrupt_on": self.review_configs}


def is_hitl_interrupt(data: dict[str, Any]) -> bool:
    """HITL interrupt data (``type`` "hitl", or none in states written before it)."""
    return "action_requests" in data and data.get("type", "hitl") == "hitl"


def maybe_append(
    middleware: list[Any], interrupt_on: dict[str, Any] | None
) -> list[Any]:
    """Append HumanInTheLoop when ``interrupt_on`` names at least one tool."""
    if interrupt_on:
        return [*middleware, (HumanInTheLoop, {"interrupt_on": interrupt_on})]
    return list(middleware)
