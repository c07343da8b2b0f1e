"""Approvals as types: action requests, decisions and the interrupts that wait for them.

The runtime, the socket protocol, the approval forms and the admin read and write
these; each class has one JSON form (``to_dict`` / ``from_dict``), and everything a
person or a script sends is validated here, in ``check_decisions``, with errors that
name the bad field (``decisions[1].arguments must be an object, not 'x'``).

Decisions, one per action request and in its order, as a browser form or a script
posts them to ``resume``::

    {"type": "approve"}                                  # run the call as asked
    {"type": "edit", "arguments": {"path": "safe.md"}}   # run it with these arguments
    {"type": "reject"}                                   # do not run it
    {"type": "reject", "message": "Not that file."}      # ... and tell the model why

``Approve()``, ``Edit(arguments=...)`` and ``Reject(message=...)`` are the same in
Python; ``resume`` takes either form.

An interrupt waiting for decisions (``AgentResult.interrupt_data``; typed as
``AgentResult.interrupt`` and ``State.interrupt``)::

    {"type": "hitl",
     "action_requests": [
       {"tool_call_id": "call_1", "tool_name": "write_file",
        "arguments": {"path": "notes.md"},
        "allowed_decisions": ["approve", "edit", "reject"],
        "description": "Write notes.md",        # optional, for the person
        "middleware_id": "..."}],               # the middleware that asked (gets the
                                                # decisions); set by the loop
     "review_configs": {"write_file": {"allowed_decisions": [...]}},  # Sagents' shape,
     "hitl_tool_call_ids": ["call_1"]}                                # derived

    {"type": "subagent", "subagent": "researcher", "subagent_id": "...",
     "tool_call_id": "call_7",                  # the parent's task call that paused
     "action_requests": [{..., "subagent": "researcher"}],  # derived: what to decide
     "interrupt": {...}}                        # the sub-agent's own interrupt

A sub-agent's interrupt takes the same decisions as a ``hitl`` one: one per entry of
its ``action_requests``. Any other dict a middleware raised is a ``CustomInterrupt``.
States written before these types (no ``type`` key, allowed decisions only in
``review_configs``, sub-agent requests flattened beside ``subagent_type``) still load.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeAlias

from .exceptions import InvalidResume, SerializationError

if TYPE_CHECKING:
    from .agent import Agent
    from .messages import ToolCall

DecisionType = Literal["approve", "edit", "reject"]
DECISION_TYPES: tuple[DecisionType, ...] = ("approve", "edit", "reject")

MAX_EDIT_DEPTH = 32
"""Edited arguments nest at most this deep (they are stored in the history)."""
MAX_EDIT_BYTES = 1_000_000
"""Edited arguments are at most this long as JSON."""
MAX_REJECT_MESSAGE = 10_000
"""A rejection's message is at most this many characters."""


# Decisions ----------------------------------------------------------------------
@dataclass(kw_only=True, slots=True)
class Approve:
    """Run the call with the arguments the model sent."""

    type: ClassVar[Literal["approve"]] = "approve"

    def to_dict(self) -> dict[str, Any]:
        return {"type": "approve"}


@dataclass(kw_only=True, slots=True)
class Edit:
    """Run the call with ``arguments`` instead; the history shows what ran."""

    arguments: dict[str, Any]
    """The whole arguments object the tool runs with."""
    type: ClassVar[Literal["edit"]] = "edit"

    def to_dict(self) -> dict[str, Any]:
        return {"type": "edit", "arguments": self.arguments}


@dataclass(kw_only=True, slots=True)
class Reject:
    """Do not run the call; the model reads that it was rejected (and why)."""

    message: str | None = None
    """The person's reason, passed on to the model."""
    type: ClassVar[Literal["reject"]] = "reject"

    def to_dict(self) -> dict[str, Any]:
        if self.message is None:
            return {"type": "reject"}
        return {"type": "reject", "message": self.message}


Decision: TypeAlias = Approve | Edit | Reject
_KEYS: dict[str, frozenset[str]] = {
    "approve": frozenset({"type"}),
    "edit": frozenset({"type", "arguments"}),
    "reject": frozenset({"type", "message"}),
}


def decision_from_dict(data: Any, *, where: str = "decision") -> Decision:
    """A decision from its JSON form (or a decision, re-checked); InvalidResume names
    the bad field, prefixed with ``where``."""
    if isinstance(data, Approve | Edit | Reject):
        data = data.to_dict()
    if not isinstance(data, Mapping):
        raise InvalidResume(
            f"{where} must be a dict like {{'type': 'approve'}}, not {_short(data)}"
        )
    kind = data.get("type")
    if kind not in _KEYS:
        choices = ", ".join(repr(t) for t in DECISION_TYPES)
        raise InvalidResume(
            f"{where}.type must be one of {choices}, not {_short(kind)}"
        )
    for key in data:
        if key not in _KEYS[kind]:
            takes = ", ".join(repr(k) for k in sorted(_KEYS[kind]))
            raise InvalidResume(
                f"{where} has an unknown key {_short(key)}; {kind!r} takes {takes}"
            )
    if kind == "approve":
        return Approve()
    if kind == "edit":
        if "arguments" not in data:
            raise InvalidResume(
                f"{where}.arguments is required for an edit (the tool's arguments)"
            )
        return Edit(
            arguments=_edited_arguments(data["arguments"], f"{where}.arguments")
        )
    message = data.get("message")
    if message is not None and not isinstance(message, str):
        raise InvalidResume(f"{where}.message must be a string, not {_short(message)}")
    if message is not None and len(message) > MAX_REJECT_MESSAGE:
        raise InvalidResume(
            f"{where}.message is {len(message)} characters long; "
            f"the limit is {MAX_REJECT_MESSAGE}"
        )
    return Reject(message=message)


def decisions_from_list(value: Any) -> list[Decision]:
    """Decisions from a list of decisions or their JSON dicts."""
    if not isinstance(value, list | tuple):
        raise InvalidResume(
            f"decisions must be a list with one decision per action request, "
            f"not {type(value).__name__}"
        )
    return [decision_from_dict(d, where=f"decisions[{i}]") for i, d in enumerate(value)]


def _edited_arguments(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidResume(f"{where} must be an object, not {_short(value)}")
    if _depth(value) > MAX_EDIT_DEPTH:
        raise InvalidResume(f"{where} nests deeper than {MAX_EDIT_DEPTH} levels")
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InvalidResume(f"{where} must be plain JSON: {exc}") from None
    if len(text) > MAX_EDIT_BYTES:
        raise InvalidResume(
            f"{where} is {len(text)} characters of JSON; the limit is {MAX_EDIT_BYTES}"
        )
    return value


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        children = item.values() if isinstance(item, dict) else item
        stack.extend(
            (child, depth + 1) for child in children if isinstance(child, dict | list)
        )
    return deepest


# Action requests ----------------------------------------------------------------
@dataclass(kw_only=True, slots=True)
class ActionRequest:
    """One tool call that waits for a person's decision."""

    tool_call_id: str
    tool_name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    """The arguments the model sent (what an approve runs with)."""
    description: str | None = None
    """What to show the person, when the middleware that asked has something to say."""
    allowed_decisions: tuple[DecisionType, ...] = DECISION_TYPES
    middleware_id: str | None = None
    """The middleware that asked; the loop sets it, and routes the decision to it."""
    subagent: str | None = None
    """The sub-agent that made the call, when the request comes from one."""

    @classmethod
    def for_call(
        cls,
        call: ToolCall,
        *,
        description: str | None = None,
        allowed_decisions: Iterable[DecisionType] = DECISION_TYPES,
    ) -> ActionRequest:
        return cls(
            tool_call_id=call.call_id,
            tool_name=call.name,
            arguments=dict(call.arguments),
            description=description,
            allowed_decisions=tuple(allowed_decisions),
        )

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "arguments": self.arguments,
            "allowed_decisions": list(self.allowed_decisions),
        }
        for key in ("description", "middleware_id", "subagent"):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        return data

    @classmethod
    def from_dict(
        cls,
        data: Any,
        *,
        where: str = "action_request",
        review_configs: Mapping[str, Any] | None = None,
    ) -> ActionRequest:
        """Read one request; old states keep allowed decisions in ``review_configs``."""
        _need(isinstance(data, dict), where, "must be an object", data)
        for key in ("tool_call_id", "tool_name"):
            value = data.get(key)
            _need(isinstance(value, str), f"{where}.{key}", "must be a string", value)
        arguments = data.get("arguments", {})
        _need(
            isinstance(arguments, dict),
            f"{where}.arguments",
            "must be an object",
            arguments,
        )
        allowed = data.get("allowed_decisions")
        if allowed is None:  # written before the types: per tool, beside the requests
            config = (review_configs or {}).get(data["tool_name"])
            allowed = (
                config.get("allowed_decisions") if isinstance(config, dict) else None
            )
        allowed = DECISION_TYPES if allowed is None else allowed
        _need(
            isinstance(allowed, list | tuple)
            and bool(allowed)
            and all(d in DECISION_TYPES for d in allowed),
            f"{where}.allowed_decisions",
            f"must be a non-empty list of {list(DECISION_TYPES)}",
            allowed,
        )
        for key in ("description", "middleware_id", "subagent"):
            value = data.get(key)
            _need(
                value is None or isinstance(value, str),
                f"{where}.{key}",
                "must be a string",
                value,
            )
        return cls(
            tool_call_id=data["tool_call_id"],
            tool_name=data["tool_name"],
            arguments=arguments,
            description=data.get("description"),
            allowed_decisions=tuple(allowed),
            middleware_id=data.get("middleware_id"),
            subagent=data.get("subagent"),
        )


# Interrupts ---------------------------------------------------------------------
@dataclass(kw_only=True, slots=True)
class HITLInterrupt:
    """Tool calls of the last response wait for a person: one decision per request."""

    action_requests: list[ActionRequest]
    type: ClassVar[Literal["hitl"]] = "hitl"

    @property
    def tool_call_ids(self) -> list[str]:
        return [r.tool_call_id for r in self.action_requests]

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "hitl",
            "action_requests": [r.to_dict() for r in self.action_requests],
            "review_configs": {
                r.tool_name: {"allowed_decisions": list(r.allowed_decisions)}
                for r in self.action_requests
            },
            "hitl_tool_call_ids": self.tool_call_ids,
        }

    @classmethod
    def from_dict(cls, data: Any, *, where: str = "interrupt_data") -> HITLInterrupt:
        _need(isinstance(data, dict), where, "must be an object", data)
        requests = data.get("action_requests")
        _need(
            isinstance(requests, list),
            f"{where}.action_requests",
            "must be a list",
            requests,
        )
        configs = data.get("review_configs")
        configs = configs if isinstance(configs, dict) else {}
        return cls(
            action_requests=[
                ActionRequest.from_dict(
                    r, where=f"{where}.action_requests[{i}]", review_configs=configs
                )
                for i, r in enumerate(requests)
            ]
        )

    def check_decisions(
        self, decisions: Any, *, pending_call_ids: Iterable[str]
    ) -> list[Decision]:
        """The decisions, typed, when they fit these requests; else InvalidResume.

        One per request, in order, each of a type the request allows, for calls that
        are still pending (the last assistant message's).
        """
        checked = decisions_from_list(decisions)
        requests = self.action_requests
        if len(checked) != len(requests):
            raise InvalidResume(
                f"Expected {len(requests)} decision(s), one per action request, "
                f"got {len(checked)}"
            )
        pending = set(pending_call_ids)
        for i, (request, decision) in enumerate(zip(requests, checked, strict=True)):
            if request.tool_call_id not in pending:
                raise InvalidResume(
                    f"action_requests[{i}] ({request.tool_name!r}) no longer matches "
                    f"a pending tool call"
                )
            if decision.type not in request.allowed_decisions:
                raise InvalidResume(
                    f"decisions[{i}].type {decision.type!r} is not allowed for "
                    f"{request.tool_name!r}; allowed: {list(request.allowed_decisions)}"
                )
        return checked


@dataclass(kw_only=True, slots=True)
class SubAgentInterrupt:
    """A sub-agent paused inside the parent's task call; its interrupt is inside."""

    subagent: str
    """The sub-agent's type (its name in the task tool)."""
    subagent_id: str
    """The paused sub-agent's agent id."""
    tool_call_id: str
    """The parent's tool call that is paused (its result waits)."""
    interrupt: PendingInterrupt
    """What the sub-agent waits for (a ``HITLInterrupt``, or a deeper sub-agent's)."""
    type: ClassVar[Literal["subagent"]] = "subagent"

    @property
    def action_requests(self) -> list[ActionRequest]:
        """The requests a person decides on, tagged with the sub-agent that asks."""
        inner = self.interrupt
        if isinstance(inner, CustomInterrupt):
            return []
        return [
            r if r.subagent else replace(r, subagent=self.subagent)
            for r in inner.action_requests
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "subagent",
            "subagent": self.subagent,
            "subagent_id": self.subagent_id,
            "tool_call_id": self.tool_call_id,
            "action_requests": [r.to_dict() for r in self.action_requests],
            "interrupt": self.interrupt.to_dict(),
        }

    @classmethod
    def from_dict(
        cls, data: Any, *, where: str = "interrupt_data"
    ) -> SubAgentInterrupt:
        _need(isinstance(data, dict), where, "must be an object", data)
        name = data.get("subagent", data.get("subagent_type"))
        _need(isinstance(name, str), f"{where}.subagent", "must be a string", name)
        for key in ("subagent_id", "tool_call_id"):
            value = data.get(key)
            _need(isinstance(value, str), f"{where}.{key}", "must be a string", value)
        if "interrupt" in data:
            inner = interrupt_from_dict(data["interrupt"], where=f"{where}.interrupt")
        else:  # written before the types: the sub-agent's HITL keys, flattened here
            inner = HITLInterrupt.from_dict(data, where=where)
        return cls(
            subagent=name,
            subagent_id=data["subagent_id"],
            tool_call_id=data["tool_call_id"],
            interrupt=inner,
        )


@dataclass(kw_only=True, slots=True)
class CustomInterrupt:
    """An interrupt a middleware raised with its own data (its ``handle_resume``
    reads it); ``data`` is the dict as raised."""

    data: dict[str, Any]

    @property
    def type(self) -> Any:
        return self.data.get("type")

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)


PendingInterrupt: TypeAlias = "HITLInterrupt | SubAgentInterrupt | CustomInterrupt"


def interrupt_from_dict(
    data: Any, *, where: str = "interrupt_data"
) -> PendingInterrupt:
    """The typed form of interrupt data; SerializationError names a malformed field.

    Private keys (``_run``: a sub-agent's conversation, kept with the tool result)
    are not part of the type and are ignored.
    """
    _need(isinstance(data, dict), where, "must be an object", data)
    kind = data.get("type")
    if kind == "subagent":
        return SubAgentInterrupt.from_dict(data, where=where)
    if "action_requests" in data and kind in (None, "hitl"):
        return HITLInterrupt.from_dict(data, where=where)
    return CustomInterrupt(
        data={k: v for k, v in data.items() if not k.startswith("_")}
    )


def interrupt_to_dict(
    interrupt: PendingInterrupt | Mapping[str, Any],
) -> dict[str, Any]:
    """The JSON form of a typed interrupt (a dict is copied as it is)."""
    if isinstance(interrupt, Mapping):
        return dict(interrupt)
    return interrupt.to_dict()


# The hooks' context -------------------------------------------------------------
@dataclass(kw_only=True, slots=True, eq=False)
class ReviewContext:
    """The third argument of ``review_tool_calls`` and ``review_decisions``."""

    agent: Agent
    tool_context: dict[str, Any] = field(default_factory=dict)
    """The caller's data given to the agent (a user id, ``is_staff``...)."""
    execution: Any = None
    """The running ``Execution``."""

    @property
    def agent_id(self) -> str | None:
        return self.agent.agent_id


def _need(ok: bool, where: str, problem: str, value: Any = None) -> None:
    if not ok:
        raise SerializationError(f"{where} {problem}, not {_short(value)}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."
