"""Agent: a model, tools and a middleware stack, built from code on every turn.

``await agent.aexecute(state)`` runs one turn and returns an ``AgentResult`` whose
status is ``completed``, ``interrupted`` (with ``interrupt_data``), ``cancelled`` or
``error``: outcomes of a turn are results. Misuse of the API by the caller (bad
decisions, a state that waits for decisions passed to ``execute``) raises.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from . import events, outbox, tracing
from .approvals import HITLInterrupt, interrupt_from_dict, interrupt_to_dict
from .callbacks import Callbacks
from .cancellation import CancelToken
from .display import DISPLAY_METADATA
from .exceptions import ConfigurationError, InvalidResume, SerializationError
from .expansion import drop_pending_expansions
from .journal import ToolJournal
from .llm import ModelRequest, as_model
from .messages import Message
from .middleware.base import (
    Interrupt,
    MiddlewareEntry,
    Resume,
    call_hook,
    fold_hooks,
    init_middleware,
    init_stack,
)
from .middleware.human_in_the_loop import maybe_append
from .modes import AgentExecution, AgentResult, Execution, Inbox
from .review import normalize_decisions, resume_hitl
from .state import State, coerce_messages
from .tool_access import ToolAccess, offered_tools
from .tools import Tool

logger = logging.getLogger(__name__)

DEFAULT_MAX_RUNS = 50
_NOT_RESUMING: Any = object()


def build_default_middleware(
    *,
    todo_opts: Mapping[str, Any] | None = None,
    filesystem_opts: Mapping[str, Any] | None = None,
    subagent_opts: Mapping[str, Any] | None = None,
    summarization_opts: Mapping[str, Any] | None = None,
    interrupt_on: Mapping[str, Any] | None = None,
) -> list[Any]:
    """The default stack, in order: TodoList, FileSystem, SubAgent, Summarization,
    PatchToolCalls, then HumanInTheLoop when ``interrupt_on`` names a tool.

    The middleware read the model and the agent id from the agent they are attached
    to (Sagents passes both here; they are not needed).
    """
    from .middleware.filesystem import FileSystem
    from .middleware.patch_tool_calls import PatchToolCalls
    from .middleware.subagent import SubAgent
    from .middleware.summarization import Summarization
    from .middleware.todo_list import TodoList

    stack: list[Any] = [
        (TodoList, dict(todo_opts or {})),
        (FileSystem, dict(filesystem_opts or {})),
        (SubAgent, dict(subagent_opts or {})),
        (Summarization, dict(summarization_opts or {})),
        PatchToolCalls,
    ]
    return maybe_append(stack, dict(interrupt_on) if interrupt_on else None)


class Agent:
    """An AI agent: model, tools, middleware and the loop that runs them."""

    def __init__(
        self,
        *,
        model: Any,
        base_system_prompt: str = "",
        tools: Iterable[Tool] = (),
        middleware: Iterable[Any] = (),
        name: str | None = None,
        agent_id: str | None = None,
        tool_context: Mapping[str, Any] | None = None,
        async_tool_timeout: float | None = None,
        fallback_models: Iterable[Any] = (),
        before_fallback: Callable[[ModelRequest], ModelRequest] | None = None,
        filesystem_scope: Any = None,
        replace_default_middleware: bool = False,
        interrupt_on: Mapping[str, Any] | None = None,
        todo_opts: Mapping[str, Any] | None = None,
        filesystem_opts: Mapping[str, Any] | None = None,
        subagent_opts: Mapping[str, Any] | None = None,
        summarization_opts: Mapping[str, Any] | None = None,
        mode: Any = None,
        max_runs: int = DEFAULT_MAX_RUNS,
        tool_access: ToolAccess | None = None,
    ) -> None:
        self.agent_id = agent_id or f"agent-{uuid.uuid4().hex[:12]}"
        self.model = as_model(model)
        self.fallback_models = [as_model(m) for m in fallback_models]
        self.models = [self.model, *self.fallback_models]
        self.before_fallback = before_fallback
        self.base_system_prompt = base_system_prompt or ""
        self.name = name
        self.tool_context = dict(tool_context or {})
        self.async_tool_timeout = async_tool_timeout
        self.filesystem_scope = filesystem_scope
        self.interrupt_on = dict(interrupt_on) if interrupt_on else None
        self.mode = mode or AgentExecution()
        self.max_runs = checked_max_runs(max_runs)

        specs = list(middleware)
        if replace_default_middleware:
            specs = maybe_append(specs, self.interrupt_on)
        else:
            specs = [
                *build_default_middleware(
                    todo_opts=todo_opts,
                    filesystem_opts=filesystem_opts,
                    subagent_opts=subagent_opts,
                    summarization_opts=summarization_opts,
                    interrupt_on=self.interrupt_on,
                ),
                *specs,
            ]
        self.middleware: list[MiddlewareEntry] = init_stack(specs)
        for entry in self.middleware:
            entry.middleware.attach(self)

        # The tools given to the agent; ``tools`` adds the middleware's.
        self.base_tools: list[Tool] = list(tools)
        for given in self.base_tools:
            if not isinstance(given, Tool):
                raise ConfigurationError(f"tools takes Tool objects, not {given!r}")
        all_tools = list(self.base_tools)
        for entry in self.middleware:
            all_tools.extend(entry.middleware.tools())
        names: set[str] = set()
        for tool in all_tools:
            if tool.name in names:
                raise ConfigurationError(f"Two tools are named {tool.name!r}")
            names.add(tool.name)
        self.tool_access = tool_access
        """Decides which gated tools the caller may use (``core.tool_access``)."""
        self.tools, self.withheld_tools = offered_tools(all_tools, tool_access)
        """The tools offered to the model; the names of the gated ones withheld."""
        self.tools_by_name: dict[str, Tool] = {t.name: t for t in self.tools}
        self.openai_tools = [t.to_openai() for t in self.tools]
        self.assembled_system_prompt = self._assemble_prompt()

        self._index_hooks()

    def add_middleware(self, spec: Any) -> MiddlewareEntry:
        """Add a middleware at the end of the stack of an agent already built (a
        runtime adding what the site's settings ask for, e.g. ``SpendBudget``): its
        hooks take part from the next call. One that brings tools or a system prompt
        must be given to the constructor instead."""
        entry = init_middleware(spec)
        if any(e.id == entry.id for e in self.middleware):
            raise ConfigurationError(f"The agent already has a middleware {entry.id!r}")
        if entry.middleware.tools() or entry.middleware.system_prompt():
            raise ConfigurationError(
                f"Middleware {entry.id!r} brings tools or a prompt: pass it to Agent()"
            )
        entry.middleware.attach(self)
        self.middleware.append(entry)
        self._index_hooks()
        return entry

    def _index_hooks(self) -> None:
        """Which middleware implement each hook (the loop skips the no-ops)."""
        hooks = self.middleware
        self.before_model_entries = [
            e for e in hooks if e.middleware.overrides("before_model")
        ]
        self.after_model_entries = [
            e for e in reversed(hooks) if e.middleware.overrides("after_model")
        ]
        self.review_entries = [
            e for e in hooks if e.middleware.overrides("review_tool_calls")
        ]
        self.turn_end_entries = [
            e for e in reversed(hooks) if e.middleware.overrides("on_turn_end")
        ]
        self.display_entries = [
            e for e in hooks if e.middleware.overrides("transform_display_message")
        ]

    def _assemble_prompt(self) -> str:
        parts = [self.base_system_prompt] if self.base_system_prompt else []
        for entry in self.middleware:
            prompt = entry.middleware.system_prompt()
            if isinstance(prompt, str):
                prompt = [prompt]
            parts.extend(p for p in prompt or () if p)
        return "\n\n".join(parts)

    async def display_message(self, message: Message) -> Message:
        """``message`` as the transcript shows it: each middleware's
        ``transform_display_message`` in stack order (the state keeps the original)."""
        if not self.display_entries:
            return message
        shown = await fold_hooks(
            self.display_entries, "transform_display_message", message
        )
        before = message.metadata
        added = {
            k: v
            for k, v in shown.metadata.items()
            if k != DISPLAY_METADATA and (k not in before or before[k] != v)
        }
        if not added:
            return shown
        # What the hooks added reaches the rows (a row copies few message keys).
        kept = shown.metadata.get(DISPLAY_METADATA) or {}
        return replace(
            shown, metadata={**shown.metadata, DISPLAY_METADATA: {**kept, **added}}
        )

    def middleware_callbacks(self) -> list[dict[str, Any]]:
        return [entry.middleware.callbacks() for entry in self.middleware]

    def get_middleware(self, middleware_id: str) -> MiddlewareEntry | None:
        return next((e for e in self.middleware if e.id == middleware_id), None)

    # Running ----------------------------------------------------------------------
    async def aexecute(
        self,
        state: State | Iterable[Any],
        *,
        callbacks: Iterable[Mapping[str, Callable[..., Any]]] = (),
        until_tool: str | Iterable[str] | None = None,
        max_runs: int | None = None,
        cancel: CancelToken | None = None,
        inbox: Inbox | None = None,
        journal: ToolJournal | None = None,
    ) -> AgentResult:
        """Run one turn from ``state`` (or a list of messages).

        ``cancel`` stops the turn when it fires (``token.cancel()``, from any thread):
        the result's status is then ``cancelled`` and its state one a provider
        accepts (see ``modes``). ``inbox`` takes messages for the middleware's
        ``handle_message`` while the turn runs (``inbox.post(middleware_id, msg)``
        from any thread); they are applied before the next model call."""
        state = self._prepare(to_state(state))
        if state.interrupt_data:
            raise InvalidResume(
                "The state is waiting for decisions on an interrupt; call resume() "
                "with them, or clear interrupt_data to abandon it"
            )
        state = drop_pending_expansions(state)  # a new turn: an old one's went unread
        execution = self._execution(
            state, callbacks, until_tool, max_runs, cancel, inbox, journal
        )
        return await self.run(execution)

    async def run(
        self, execution: Execution, *, decisions: Any = _NOT_RESUMING
    ) -> AgentResult:
        """Run the mode (after offering ``decisions`` to the middleware, when resuming)
        with ``events.emit`` routed to the execution's ``on_agent_event`` handlers;
        in a ``sagents.turn`` span unless the caller opened one (``core.tracing``)."""
        if tracing.in_turn():
            return await self._run(execution, decisions)
        attributes = {
            "sagents.agent_id": self.agent_id,
            "sagents.trigger": "execute" if decisions is _NOT_RESUMING else "resume",
        }
        with tracing.turn("sagents.turn", attributes) as span:
            result = await self._run(execution, decisions)
            tracing.set_attributes(span, {"sagents.status": result.status})
            if result.status == "error":
                tracing.mark_error(span, "turn_error")
            return result

    async def _run(self, execution: Execution, decisions: Any) -> AgentResult:
        def on_event(name: str, data: dict[str, Any]) -> Any:
            return execution.callbacks.fire("on_agent_event", execution, name, data)

        parent = outbox.current()
        if parent is not None:  # a sub-agent's tools queue for the parent's turn
            execution.outbox = parent
        with events.event_handlers(on_event), outbox.using(execution.outbox):
            result: AgentResult | None = None
            try:
                if decisions is not _NOT_RESUMING:
                    result = await self._offer_resume(execution, decisions)
                if result is None:
                    result = await self.mode.run(execution)
            finally:
                try:
                    await self._end_turn(execution, result)
                finally:
                    await events.drain()
            return result

    async def _end_turn(self, execution: Execution, result: AgentResult | None) -> None:
        """Run the ``on_turn_end`` hooks, whatever ended the turn (``result`` is None
        when it raised); the state they return becomes the result's."""
        state = execution.state if result is None else result.state
        state = await fold_hooks(self.turn_end_entries, "on_turn_end", state)
        execution.state = state
        if result is not None:
            result.state = state

    async def aresume(
        self,
        state: State,
        decisions: Any,
        *,
        callbacks: Iterable[Mapping[str, Callable[..., Any]]] = (),
        until_tool: str | Iterable[str] | None = None,
        max_runs: int | None = None,
        cancel: CancelToken | None = None,
        inbox: Inbox | None = None,
        journal: ToolJournal | None = None,
    ) -> AgentResult:
        """Continue an interrupted turn with the person's decisions.

        For a ``HITLInterrupt`` or a ``SubAgentInterrupt``: one decision per action
        request, in order, as ``Approve()`` / ``Edit(arguments=...)`` /
        ``Reject(message=...)`` or their JSON dicts (see ``core.approvals``). Raises
        ``InvalidResume`` when nothing is interrupted or the decisions do not fit;
        ``state`` is left as it was.
        """
        state = self._prepare(state)
        if not state.interrupt_data:
            raise InvalidResume("Nothing to resume: the state has no pending interrupt")
        execution = self._execution(
            state, callbacks, until_tool, max_runs, cancel, inbox, journal
        )
        return await self.run(execution, decisions=decisions)

    async def _offer_resume(
        self, execution: Execution, decisions: Any
    ) -> AgentResult | None:
        """Resume a ``HITLInterrupt`` (the loop's own, see ``review``); give any
        other interrupt to the first middleware that claims it."""
        state = execution.state
        try:
            interrupt = interrupt_from_dict(state.interrupt_data)
        except SerializationError as exc:
            raise InvalidResume(f"The pending interrupt cannot be read: {exc}") from exc
        if isinstance(interrupt, HITLInterrupt):
            return await resume_hitl(execution, interrupt, decisions)
        for entry in self.middleware:
            outcome = await call_hook(
                entry.middleware.handle_resume,
                self,
                state,
                decisions,
                callbacks=execution.callbacks,
                execution=execution,
            )
            if outcome is None:
                continue
            if isinstance(outcome, Interrupt):
                data = interrupt_to_dict(outcome.data)
                execution.state = replace(outcome.state, interrupt_data=data)
                return execution.result("interrupted", interrupt_data=data)
            if isinstance(outcome, State):
                outcome = Resume(state=outcome)
            decisions_by_call = normalize_decisions(outcome.tool_decisions)
            execution.state = outcome.state
            execution.tool_decisions = decisions_by_call
            return None
        keys = ", ".join(sorted(state.interrupt_data or {})) or "none"
        raise InvalidResume(f"No middleware handles this interrupt (its keys: {keys})")

    def execute(self, state: State | Iterable[Any], **options: Any) -> AgentResult:
        """``aexecute`` for code without an event loop (scripts, Celery tasks)."""
        return _run_sync(self.aexecute(state, **options))

    def resume(self, state: State, decisions: Any, **options: Any) -> AgentResult:
        """``aresume`` for code without an event loop."""
        return _run_sync(self.aresume(state, decisions, **options))

    def _prepare(self, state: State) -> State:
        if not isinstance(state, State):
            raise TypeError(f"Expected a State, got {type(state).__name__}")
        return (
            state
            if state.agent_id == self.agent_id
            else replace(state, agent_id=self.agent_id)
        )

    def _execution(
        self,
        state: State,
        callbacks: Iterable[Mapping[str, Callable[..., Any]]],
        until_tool: str | Iterable[str] | None,
        max_runs: int | None,
        cancel: CancelToken | None,
        inbox: Inbox | None = None,
        journal: ToolJournal | None = None,
    ) -> Execution:
        targets = None
        if until_tool:
            targets = frozenset(
                [until_tool] if isinstance(until_tool, str) else until_tool
            )
            missing = sorted(targets - set(self.tools_by_name))
            if missing:
                raise ConfigurationError(f"until_tool names unknown tools: {missing}")
        if cancel is not None and not isinstance(cancel, CancelToken):
            raise ConfigurationError(f"cancel takes a CancelToken, not {cancel!r}")
        return Execution(
            agent=self,
            state=state,
            callbacks=Callbacks([*self.middleware_callbacks(), *callbacks]),
            max_runs=self.max_runs if max_runs is None else checked_max_runs(max_runs),
            until_tool=targets,
            cancel=cancel if cancel is not None else CancelToken(),
            inbox=inbox if inbox is not None else Inbox(),
            journal=journal,
        )

    def __repr__(self) -> str:
        return (
            f"<Agent {self.agent_id} model={self.model.name!r} tools={len(self.tools)}>"
        )


def checked_max_runs(value: object) -> int:
    """``value`` when it is a positive integer; ConfigurationError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"max_runs must be a positive integer, not {value!r}")
    return value


def to_state(value: State | Iterable[Any]) -> State:
    """A State from a State or a list of messages: Message objects, OpenAI-format
    dicts (``{"role": "user", "content": "Hello"}``) or plain strings (user text)."""
    if isinstance(value, State):
        return value
    if isinstance(value, (str, bytes)):
        raise TypeError("Pass a State or a list of messages, not a string")
    return State(messages=coerce_messages(value))


_T = TypeVar("_T")


def _run_sync(coroutine: Coroutine[Any, Any, _T]) -> _T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        running = False
    else:
        running = True
    if running:
        coroutine.close()
        raise RuntimeError(
            "execute() was called in a running event loop; await aexecute()"
        )
    # Like asyncio.run, except that the worker threads are not joined on the way
    # out (loop.close() shuts its executor down without waiting): a cancelled turn
    # returns at once even while a thread it no longer waits for (litellm's first
    # import, an abandoned sync tool) is still finishing.
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coroutine)
    finally:
        try:
            _cancel_leftover_tasks(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


def _cancel_leftover_tasks(loop: asyncio.AbstractEventLoop) -> None:
    tasks = asyncio.all_tasks(loop)
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
