"""The middleware base class and its entries.

A middleware is a class whose hooks the agent calls around every model call. Every hook
has a default that changes nothing, so a middleware overrides only what it needs. Hooks
may be plain or ``async def``; the agent awaits what is awaitable.

Lifecycle (see the reference, 001):

- ``__init__(**options)``: configuration, once when the agent is built.
- ``attach(agent)``: the agent the middleware was added to (model, tools, id).
- ``system_prompt()``, ``tools()``, ``callbacks()``: collected when the agent is built.
- ``before_model(state)``: before every model call, in stack order; may return
  ``Stop(state, reason=..., message=...)`` to end the turn without calling the model
  (a spend budget that is exhausted, a policy that refuses).
- ``after_model(state)``: after every model response, in reverse stack order; may
  return ``Interrupt(state, data)`` to pause for a person.
- ``review_tool_calls(state, calls, context)``: before the response's tool calls run,
  in stack order: the ``ActionRequest`` of each call that must wait for a person,
  or None. Each middleware is asked only about the calls no earlier one claimed;
  all the requests make one ``HITLInterrupt``. ``HumanInTheLoop`` implements it
  from ``interrupt_on``; a site's own policy (approve small amounts, trust staff)
  is a middleware that implements it too.
- ``review_decisions(state, requests, decisions, context)``: on ``Agent.aresume``,
  the person's decisions on the requests this middleware asked for (already
  checked against them); return them, changed or not, or raise ``InvalidResume`` to
  refuse them (nothing changes).
- ``handle_resume(agent, state, resume_data)``: offered any other pending interrupt
  on ``Agent.aresume``; return None when it is not this middleware's.
- ``handle_message(message, state)``: a message routed to this middleware by id.
- ``on_turn_end(state)``: once per ``execute``/``resume``, however it ended (a reply,
  an interrupt, an error, a cancel, an exception), in reverse stack order: settle what
  the middleware started in the background (collect it or cancel it; never wait on
  the outside world). The state it returns is the result's; a hook that raises is
  logged and skipped (the turn's outcome is already decided).
- ``on_server_start(state)``: a conversation session started or restarted.
- ``transform_display_message(message)``: the message as the transcript will show
  it (upstream v0.10, the outbound mirror of ``MessagePreprocessor``): annotate its
  ``metadata`` or rewrite its content before its display rows are saved and
  published. The state keeps the original (the model never sees the change); the
  middleware's hooks run in stack order, each on what the one before returned.
- ``restorable_interrupt(data)``: may this middleware resume ``data`` after a restart?
- ``debug_summary()``: a small view of the configuration for the inspector.

A hook that raises ends the turn with an error result (the state is kept), except
``on_turn_end``, ``on_server_start`` and ``transform_display_message``: those are
logged and skipped (a turn's outcome, a session start and a transcript row must not
fail for them).
"""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from ..exceptions import ConfigurationError

if TYPE_CHECKING:
    from ..agent import Agent
    from ..approvals import ActionRequest, Decision, PendingInterrupt, ReviewContext
    from ..messages import Message, ToolCall
    from ..state import State
    from ..tools import Tool

logger = logging.getLogger(__name__)

T = TypeVar("T")
MaybeAwaitable: TypeAlias = T | Awaitable[T]
"""What a hook returns: hooks may be plain or ``async def``."""


@dataclass(kw_only=True, slots=True)
class Interrupt:
    """Returned by a hook to pause the turn until a person decides."""

    state: State
    data: dict[str, Any] | PendingInterrupt
    """The interrupt's JSON data, or a typed interrupt (stored as its ``to_dict()``)."""


@dataclass(kw_only=True, slots=True)
class Stop:
    """Returned by ``before_model`` to end the turn before the model is called: the
    turn's result is an error whose exception is ``TurnStopped`` (its ``reason`` a
    stable code a runtime turns into a typed transcript row)."""

    state: State
    reason: str
    """A stable code, e.g. ``"budget_exhausted"``."""
    message: str
    """What a person reads."""
    data: dict[str, Any] = field(default_factory=dict)
    """JSON details for the transcript row and the event."""


@dataclass(kw_only=True, slots=True)
class Resume:
    """Returned by ``handle_resume``: the interrupt is handled, go on from ``state``.

    ``tool_decisions`` maps tool call ids to the decision that applies when the pending
    calls are executed: ``Approve()``, ``Edit(arguments=...)``, ``Reject()`` or their
    JSON dicts.
    """

    state: State
    tool_decisions: dict[str, Decision | dict[str, Any]] = field(default_factory=dict)


class Middleware:
    """Base class of every middleware; each hook's default does nothing."""

    id: str
    """Set by ``MiddlewareEntry``: the class path, or the ``id=`` option."""

    def __init__(self, **options: Any) -> None:
        self.options = options

    def attach(self, agent: Agent) -> None:
        """Called once with the agent this middleware belongs to."""

    def system_prompt(self) -> str | list[str] | None:
        return None

    def tools(self) -> list[Tool]:
        return []

    def callbacks(self) -> dict[str, Callable[..., Any]]:
        return {}

    def before_model(self, state: State) -> MaybeAwaitable[State | Interrupt | Stop]:
        return state

    def after_model(self, state: State) -> MaybeAwaitable[State | Interrupt]:
        return state

    def review_tool_calls(
        self, state: State, calls: list[ToolCall], context: ReviewContext
    ) -> list[ActionRequest] | None:
        """The calls among ``calls`` that must wait for a person, or None.

        Build each request with ``ActionRequest.for_call(call, description=...,
        allowed_decisions=...)``; ``context.tool_context`` holds the caller's data.
        """
        return None

    def review_decisions(
        self,
        state: State,
        requests: list[ActionRequest],
        decisions: list[Decision],
        context: ReviewContext,
    ) -> list[Decision]:
        """The decisions to apply to ``requests`` (the ones this middleware asked for)."""
        return decisions

    def handle_resume(
        self, agent: Agent, state: State, resume_data: Any, **options: Any
    ) -> MaybeAwaitable[Resume | Interrupt | State | None]:
        return None

    def handle_message(self, message: Any, state: State) -> MaybeAwaitable[State]:
        return state

    def on_turn_end(self, state: State) -> MaybeAwaitable[State]:
        return state

    def on_server_start(self, state: State) -> MaybeAwaitable[State]:
        return state

    def transform_display_message(self, message: Message) -> MaybeAwaitable[Message]:
        return message

    def restorable_interrupt(self, interrupt_data: dict[str, Any]) -> bool:
        return False

    def debug_summary(self) -> dict[str, Any] | str | None:
        return None

    @classmethod
    def overrides(cls, hook: str) -> bool:
        """Whether this class replaces the base's ``hook`` (lets the loop skip no-ops)."""
        return getattr(cls, hook) is not getattr(Middleware, hook)


MiddlewareSpec: TypeAlias = "type[Middleware] | tuple[type[Middleware], dict[str, Any]] | Middleware | MiddlewareEntry"


@dataclass(kw_only=True, slots=True, eq=False)
class MiddlewareEntry:
    """A middleware instance in an agent's stack, with its routing id."""

    id: str
    middleware: Middleware
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def cls(self) -> type[Middleware]:
        return type(self.middleware)

    def to_raw_spec(self) -> type[Middleware] | tuple[type[Middleware], dict[str, Any]]:
        """The spec this entry was built from (used to re-create it in a sub-agent)."""
        options = dict(self.options)
        if self.id != class_path(self.cls):
            options["id"] = self.id
        return (self.cls, options) if options else self.cls


async def call_hook(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a hook, sync or async, and return its (awaited) result."""
    result = function(*args, **kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result


async def fold_hooks(entries: Iterable[MiddlewareEntry], hook: str, value: T) -> T:
    """Call the hook ``hook`` of each entry's middleware in order, each on the value
    the one before returned (a hook that returns something of another type keeps
    it); a hook that raises is logged and skipped. The value at the end."""
    kind = type(value)
    for entry in entries:
        try:
            outcome = await call_hook(getattr(entry.middleware, hook), value)
        except Exception:
            logger.exception("Middleware %s failed in %s", entry.id, hook)
            continue
        if isinstance(outcome, kind):
            value = outcome
    return value


def class_path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def init_middleware(spec: Any) -> MiddlewareEntry:
    """Build an entry from a class, ``(class, options)``, an instance or an entry."""
    if isinstance(spec, MiddlewareEntry):
        return spec
    if isinstance(spec, Middleware):
        mw_id = getattr(spec, "id", None) or class_path(type(spec))
        spec.id = mw_id
        # A subclass's own __init__ may not call super().__init__: no options then.
        own_options = dict(getattr(spec, "options", None) or {})
        return MiddlewareEntry(id=mw_id, middleware=spec, options=own_options)
    if isinstance(spec, str):
        spec = _import_class(spec)
    options: dict[str, Any] = {}
    if isinstance(spec, tuple) and len(spec) == 2:
        spec, options = spec
        if isinstance(spec, str):
            spec = _import_class(spec)
        if not isinstance(options, dict):
            raise ConfigurationError(
                f"Middleware options must be a dict, not {type(options).__name__}"
            )
    if not (inspect.isclass(spec) and issubclass(spec, Middleware)):
        raise ConfigurationError(
            f"Middleware spec must be a Middleware subclass, (class, options), an "
            f"instance or a dotted path; got {spec!r}"
        )
    options = dict(options)
    mw_id = str(options.pop("id", None) or class_path(spec))
    try:
        instance = spec(**options)
    except TypeError as exc:
        raise ConfigurationError(
            f"Bad options for middleware {mw_id!r}: {exc}"
        ) from exc
    instance.id = mw_id
    return MiddlewareEntry(id=mw_id, middleware=instance, options=options)


def init_stack(specs: Sequence[Any]) -> list[MiddlewareEntry]:
    entries = [init_middleware(spec) for spec in specs]
    seen: set[str] = set()
    for entry in entries:
        if entry.id in seen:
            raise ConfigurationError(
                f"Two middleware share the id {entry.id!r}; give one an id= option"
            )
        seen.add(entry.id)
    return entries


def is_restorable(
    entries: Sequence[MiddlewareEntry], interrupt_data: dict[str, Any]
) -> bool:
    """Whether any middleware claims ``interrupt_data``; a raising hook counts as no."""
    for entry in entries:
        try:
            answer = entry.middleware.restorable_interrupt(interrupt_data)
            if inspect.isawaitable(answer):
                # Called at load time, outside any event loop: an async hook cannot be
                # awaited here, and an un-awaited coroutine is truthy. Count it as no.
                if inspect.iscoroutine(answer):
                    answer.close()
                logger.warning("restorable_interrupt of %s must not be async", entry.id)
                continue
            if answer:
                return True
        except Exception:
            logger.warning("restorable_interrupt of %s raised", entry.id, exc_info=True)
    return False


def _import_class(path: str) -> Any:
    module, _, name = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigurationError(f"Cannot import middleware {path!r}: {exc}") from exc
