"""The approval step of the loop: which tool calls wait for a person, and resuming them.

The loop owns the mechanics and middleware own the policy. Before the calls of a
response run, every middleware that implements ``review_tool_calls`` is asked, in
stack order, about the calls no earlier one claimed; the requests they return make
one ``HITLInterrupt`` (in the order of the calls) and the turn pauses. On resume the
decisions are checked in one place (``HITLInterrupt.check_decisions``), each request's
decision goes to the ``review_decisions`` hook of the middleware that asked for it,
and ``execute_tools`` applies them. Calls of the response that nobody asked about run
as approved.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .approvals import (
    ActionRequest,
    Approve,
    Decision,
    HITLInterrupt,
    ReviewContext,
    decision_from_dict,
)
from .exceptions import InvalidResume
from .middleware.base import call_hook

if TYPE_CHECKING:
    from .messages import ToolCall
    from .middleware.base import MiddlewareEntry
    from .modes import AgentResult, Execution

logger = logging.getLogger(__name__)


def review_context(ex: Execution) -> ReviewContext:
    return ReviewContext(
        agent=ex.agent, tool_context=ex.agent.tool_context, execution=ex
    )


async def check_pre_tool_hitl(ex: Execution) -> AgentResult | None:
    """Pause when a middleware says a pending, undecided call must wait for a person."""
    entries = ex.agent.review_entries
    if not entries:
        return None
    # A call to a tool the caller was not offered is refused when it runs: nobody
    # is asked to approve it (the request would show what the tool is).
    calls = [
        c
        for c in ex.pending_tool_calls()
        if c.call_id not in ex.tool_decisions and c.name not in ex.agent.withheld_tools
    ]
    if not calls:
        return None
    context = review_context(ex)
    claimed: dict[str, ActionRequest] = {}
    for entry in entries:
        remaining = [c for c in calls if c.call_id not in claimed]
        if not remaining:
            break
        try:
            asked = await call_hook(
                entry.middleware.review_tool_calls, ex.state, remaining, context
            )
            for request in _own_requests(entry, asked, remaining):
                claimed[request.tool_call_id] = request
        except Exception as exc:
            logger.exception("Middleware %s failed in review_tool_calls", entry.id)
            return ex.fail(
                f"Middleware {entry.id} failed in review_tool_calls: {exc}", exc
            )
    if not claimed:
        return None
    interrupt = HITLInterrupt(
        action_requests=_with_schemas(
            [claimed[c.call_id] for c in calls if c.call_id in claimed],
            ex.agent.tools_by_name,
        )
    )
    data = interrupt.to_dict()
    ex.state = replace(ex.state, interrupt_data=data)
    return ex.result("interrupted", interrupt_data=data)


def _own_requests(
    entry: MiddlewareEntry, asked: Any, calls: Sequence[ToolCall]
) -> list[ActionRequest]:
    """The hook's requests, each for one of ``calls``, stamped with who asked."""
    if not asked:
        return []
    if not isinstance(asked, list | tuple):
        raise TypeError(f"it returned {type(asked).__name__}, not a list")
    ids = {c.call_id for c in calls}
    seen: set[str] = set()
    own = []
    for request in asked:
        if not isinstance(request, ActionRequest):
            raise TypeError(f"it returned {request!r}, not an ActionRequest")
        if request.tool_call_id not in ids or request.tool_call_id in seen:
            raise ValueError(
                f"it asked about call {request.tool_call_id!r}, which is not one of "
                f"the calls it was given (or was asked about twice)"
            )
        seen.add(request.tool_call_id)
        own.append(replace(request, middleware_id=entry.id))
    return own


def _with_schemas(
    requests: Sequence[ActionRequest], tools: Mapping[str, Any]
) -> list[ActionRequest]:
    """Each request with its tool's JSON schema, unless the middleware gave one."""
    out = []
    for request in requests:
        found = tools.get(request.tool_name)
        schema = getattr(found, "parameters", None)
        if request.parameters is None and isinstance(schema, dict):
            request = replace(request, parameters=schema)
        out.append(request)
    return out


async def resume_hitl(
    ex: Execution, interrupt: HITLInterrupt, decisions: Any
) -> AgentResult | None:
    """Apply a person's decisions to a pending ``HITLInterrupt``.

    Raises ``InvalidResume`` (nothing changed) when they do not fit; ends the turn
    as an error when a ``review_decisions`` hook fails.
    """
    pending = ex.pending_tool_calls()
    checked = interrupt.check_decisions(
        decisions, pending_call_ids=[c.call_id for c in pending]
    )
    requests = interrupt.action_requests
    routes: dict[str, list[int]] = {}
    for i, request in enumerate(requests):
        if request.middleware_id is not None:
            routes.setdefault(request.middleware_id, []).append(i)
    context = review_context(ex)
    for middleware_id, indexes in routes.items():
        entry = ex.agent.get_middleware(middleware_id)
        if entry is None:
            logger.warning(
                "The middleware %s that asked for a decision is no longer in the "
                "stack; applying the decision as given",
                middleware_id,
            )
            continue
        if not entry.middleware.overrides("review_decisions"):
            continue
        mine = [checked[i] for i in indexes]
        try:
            reviewed = await call_hook(
                entry.middleware.review_decisions,
                ex.state,
                [requests[i] for i in indexes],
                mine,
                context,
            )
            reviewed = _reviewed(reviewed, len(indexes))
        except InvalidResume:
            raise
        except Exception as exc:
            logger.exception("Middleware %s failed in review_decisions", middleware_id)
            return ex.fail(
                f"Middleware {middleware_id} failed in review_decisions: {exc}", exc
            )
        for i, decision in zip(indexes, reviewed, strict=True):
            checked[i] = decision
    by_call: dict[str, Decision] = {
        r.tool_call_id: d for r, d in zip(requests, checked, strict=True)
    }
    for call in pending:  # reviewed before the pause, and nobody asked about them
        by_call.setdefault(call.call_id, Approve())
    ex.state = replace(ex.state, interrupt_data=None)
    ex.tool_decisions = by_call
    return None


def _reviewed(value: Any, count: int) -> list[Decision]:
    if not isinstance(value, list | tuple) or len(value) != count:
        raise TypeError(f"it returned {value!r}, not a list of {count} decision(s)")
    try:
        return [
            decision_from_dict(d, where=f"decision {i}") for i, d in enumerate(value)
        ]
    except InvalidResume as exc:  # the middleware's mistake, not the caller's
        raise TypeError(str(exc)) from None


def normalize_decisions(
    decisions: dict[str, Decision | dict[str, Any]],
) -> dict[str, Decision]:
    """``Resume.tool_decisions`` from a ``handle_resume``, typed."""
    return {
        call_id: decision_from_dict(d, where=f"tool_decisions[{call_id!r}]")
        for call_id, d in decisions.items()
    }
