"""HumanInTheLoop: pause before chosen tools run, until a person decides.

``interrupt_on`` maps tool names to ``True`` (approve, edit or reject allowed),
``False`` (no pause) or ``{"allowed_decisions": [...]}``. When the model calls such a
tool the turn ends ``interrupted`` with::

    {"action_requests": [{"tool_call_id", "tool_name", "arguments"}, ...],
     "review_configs": {tool_name: {"allowed_decisions": [...]}},
     "hitl_tool_call_ids": [...]}

``Agent.resume(state, decisions)`` takes one decision per action request, in order:
``{"type": "approve"}``, ``{"type": "edit", "arguments": {...}}`` or
``{"type": "reject"}``. Calls of the same response that need no approval run with the
approved ones. Bad decisions raise ``InvalidResume`` and change nothing.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..exceptions import ConfigurationError, InvalidResume
from .base import Middleware, Resume

if TYPE_CHECKING:
    from ..agent import Agent
    from ..messages import ToolCall
    from ..state import State

DECISION_TYPES: tuple[str, ...] = ("approve", "edit", "reject")


def normalize_interrupt_on(
    interrupt_on: dict[str, Any] | None,
) -> dict[str, dict[str, list[str]]]:
    """``{tool: {"allowed_decisions": [...]}}`` for every tool that pauses."""
    configs: dict[str, dict[str, list[str]]] = {}
    for name, value in (interrupt_on or {}).items():
        if value is False or value is None:
            continue
        if value is True:
            configs[name] = {"allowed_decisions": list(DECISION_TYPES)}
            continue
        if not isinstance(value, dict) or "allowed_decisions" not in value:
            raise ConfigurationError(
                f"interrupt_on[{name!r}] must be True, False or "
                f"{{'allowed_decisions': [...]}}, not {value!r}"
            )
        allowed = [str(d) for d in value["allowed_decisions"]]
        bad = [d for d in allowed if d not in DECISION_TYPES]
        if bad or not allowed:
            raise ConfigurationError(
                f"interrupt_on[{name!r}] allowed_decisions must be a non-empty subset of "
                f"{list(DECISION_TYPES)}, not {value['allowed_decisions']!r}"
            )
        configs[name] = {"allowed_decisions": allowed}
    return configs


class HumanInTheLoop(Middleware):
    """Pauses before the tools named in ``interrupt_on`` run."""

    def __init__(self, *, interrupt_on: dict[str, Any] | None = None) -> None:
        super().__init__(interrupt_on=interrupt_on)
        self.review_configs = normalize_interrupt_on(interrupt_on)

    def check_for_interrupt(
        self, state: State, calls: list[ToolCall]
    ) -> dict[str, Any] | None:
        """Interrupt data for the calls that need a decision, or None."""
        pausing = [c for c in calls if c.name in self.review_configs]
        if not pausing:
            return None
        return {
            "action_requests": [
                {
                    "tool_call_id": c.call_id,
                    "tool_name": c.name,
                    "arguments": c.arguments,
                }
                for c in pausing
            ],
            "review_configs": {c.name: self.review_configs[c.name] for c in pausing},
            "hitl_tool_call_ids": [c.call_id for c in pausing],
        }

    def handle_resume(
        self, agent: Agent, state: State, resume_data: Any, **options: Any
    ) -> Resume | None:
        data = state.interrupt_data or {}
        if not is_hitl_interrupt(data):
            return None  # e.g. a sub-agent's interrupt: its middleware resumes it
        decisions = self.process_decisions(state, resume_data)
        by_call = {
            request["tool_call_id"]: decision
            for request, decision in zip(
                data["action_requests"], decisions, strict=True
            )
        }
        # Calls of the same response that needed no approval run as approved.
        for call in _pending_calls(state):
            by_call.setdefault(call.call_id, {"type": "approve"})
        return Resume(state=replace(state, interrupt_data=None), tool_decisions=by_call)

    def process_decisions(self, state: State, decisions: Any) -> list[dict[str, Any]]:
        """Validate decisions against the pending interrupt; raise InvalidResume."""
        data = state.interrupt_data or {}
        requests = data.get("action_requests") or []
        if not isinstance(decisions, list):
            raise InvalidResume(
                f"Decisions must be a list with one decision per action request, "
                f"not {type(decisions).__name__}"
            )
        if len(decisions) != len(requests):
            raise InvalidResume(
                f"Expected {len(requests)} decision(s), one per action request, "
                f"got {len(decisions)}"
            )
        pending = {c.call_id for c in _pending_calls(state)}
        configs = data.get("review_configs") or {}
        checked = []
        for i, (request, decision) in enumerate(zip(requests, decisions, strict=True)):
            name = request.get("tool_name")
            if request.get("tool_call_id") not in pending:
                raise InvalidResume(
                    f"Action request {i} ({name!r}) no longer matches a pending tool call"
                )
            if not isinstance(decision, dict):
                raise InvalidResume(f"Decision {i} must be a dict, not {decision!r}")
            kind = decision.get("type")
            if kind not in DECISION_TYPES:
                raise InvalidResume(
                    f"Decision {i} has type {kind!r}; expected one of {list(DECISION_TYPES)}"
                )
            allowed = (configs.get(name) or {}).get("allowed_decisions", DECISION_TYPES)
            if kind not in allowed:
                raise InvalidResume(
                    f"Decision {i} {kind!r} is not allowed for {name!r}; "
                    f"allowed: {list(allowed)}"
                )
            if kind == "edit" and not isinstance(decision.get("arguments"), dict):
                raise InvalidResume(
                    f"Decision {i} is an edit of {name!r} without an 'arguments' dict"
                )
            checked.append(dict(decision))
        return checked

    def restorable_interrupt(self, interrupt_data: dict[str, Any]) -> bool:
        return is_hitl_interrupt(interrupt_data)

    def debug_summary(self) -> dict[str, Any]:
        return {"interrupt_on": self.review_configs}


def is_hitl_interrupt(data: dict[str, Any]) -> bool:
    """HITL's own interrupt data (others, like a sub-agent's, carry a ``type``)."""
    return "action_requests" in data and data.get("type", "hitl") == "hitl"


def _pending_calls(state: State) -> list[ToolCall]:
    if state.messages and state.messages[-1].role == "assistant":
        return state.messages[-1].tool_calls
    return []


def maybe_append(
    middleware: list[Any], interrupt_on: dict[str, Any] | None
) -> list[Any]:
    """Append HumanInTheLoop when ``interrupt_on`` names at least one tool."""
    if interrupt_on:
        return [*middleware, (HumanInTheLoop, {"interrupt_on": interrupt_on})]
    return list(middleware)
