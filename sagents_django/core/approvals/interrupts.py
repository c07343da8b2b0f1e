"""Action requests and the interrupts that carry them (JSON forms: see ``approvals``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeAlias

from ..exceptions import InvalidResume, SerializationError
from .decisions import (
    DECISION_TYPES,
    Decision,
    DecisionType,
    decisions_from_list,
    short,
)

if TYPE_CHECKING:
    from ..agent import Agent
    from ..messages import ToolCall


MAX_APPROVERS = 10
"""A request needs at most this many distinct approvers."""


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
    parameters: dict[str, Any] | None = None
    """The tool's JSON schema, stamped by the loop when it asks: a form can show the
    arguments as fields and check an edit before it is sent (None: unknown)."""
    permission: str | None = None
    """Who may decide, as a permission name the host checks ("app.codename"); None:
    the host's default routing."""
    approvers: int | None = None
    """How many distinct people must approve (None: the host's default, one)."""

    @classmethod
    def for_call(
        cls,
        call: ToolCall,
        *,
        description: str | None = None,
        allowed_decisions: Iterable[DecisionType] = DECISION_TYPES,
        permission: str | None = None,
        approvers: int | None = None,
    ) -> ActionRequest:
        return cls(
            tool_call_id=call.call_id,
            tool_name=call.name,
            arguments=dict(call.arguments),
            description=description,
            allowed_decisions=tuple(allowed_decisions),
            permission=permission,
            approvers=approvers,
        )

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "arguments": self.arguments,
            "allowed_decisions": list(self.allowed_decisions),
        }
        for key in (
            "description",
            "middleware_id",
            "subagent",
            "parameters",
            "permission",
            "approvers",
        ):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        order = property_order(self.parameters)
        if order:
            data["parameter_order"] = order
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
        for key in ("description", "middleware_id", "subagent", "permission"):
            value = data.get(key)
            _need(
                value is None or isinstance(value, str),
                f"{where}.{key}",
                "must be a string",
                value,
            )
        parameters = data.get("parameters")
        _need(
            parameters is None or isinstance(parameters, dict),
            f"{where}.parameters",
            "must be an object (a JSON schema)",
            parameters,
        )
        order = data.get("parameter_order")
        _need(
            order is None
            or (isinstance(order, list) and all(isinstance(n, str) for n in order)),
            f"{where}.parameter_order",
            "must be a list of property names",
            order,
        )
        approvers = data.get("approvers")
        _need(
            approvers is None
            or (type(approvers) is int and 1 <= approvers <= MAX_APPROVERS),
            f"{where}.approvers",
            f"must be an integer from 1 to {MAX_APPROVERS}",
            approvers,
        )
        return cls(
            tool_call_id=data["tool_call_id"],
            tool_name=data["tool_name"],
            arguments=arguments,
            description=data.get("description"),
            allowed_decisions=tuple(allowed),
            middleware_id=data.get("middleware_id"),
            subagent=data.get("subagent"),
            parameters=in_order(parameters, order),
            permission=data.get("permission"),
            approvers=approvers,
        )


def property_order(schema: Any) -> list[str]:
    """The names of an object schema's properties, in the tool's order."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return [str(name) for name in properties] if isinstance(properties, dict) else []


def in_order(schema: dict[str, Any] | None, order: list[str] | None) -> Any:
    """``schema`` with its properties in ``order``. Why: a JSON object's key order
    is not kept by every store (PostgreSQL's ``jsonb`` sorts keys), and a form
    draws the arguments in the tool's order, so the order is stored beside the
    schema (``parameter_order``). Names the order misses keep their place after."""
    if not order or not isinstance(schema, dict):
        return schema
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return schema
    ordered = {name: properties[name] for name in order if name in properties}
    ordered.update((name, p) for name, p in properties.items() if name not in ordered)
    return {**schema, "properties": ordered}


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
    if kind == "hitl" or (kind is None and "action_requests" in data):
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
        raise SerializationError(f"{where} {problem}, not {short(value)}")
