"""SubAgent: the ``task`` tool, which delegates work to a sub-agent.

The parent model calls ``task(instructions, subagent_type, system_prompt?)``; the
sub-agent runs with a fresh conversation and the parent reads only its final answer.
``general-purpose`` inherits the parent's tools and middleware (minus SubAgent itself
and ``block_middleware``); named sub-agents come from ``SubAgentConfig`` or
``CompiledSubAgent``. Both kinds built here get the parent's ``tool_access`` (see
``core.tool_access``).

When a sub-agent pauses for approval, the parent's turn ends ``interrupted`` with a
``SubAgentInterrupt``: the sub-agent's own interrupt inside, its action requests
tagged with the sub-agent's name. Unlike Sagents,
which demotes such pauses after a restart, the sub-agent's conversation travels in the
interrupt data and this middleware claims it through ``restorable_interrupt``: the
parent's ``resume`` rebuilds the sub-agent from code and routes the decisions to it,
for as many rounds as it needs.

A sub-agent's progress (its text, messages and tool calls) is published as
``subagent_event`` events carrying the sub-agent's name and the parent's task call id,
so a UI can show it inside the task card; ``show_progress=False`` hides it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .. import events
from ..approvals import SubAgentInterrupt, interrupt_from_dict
from ..exceptions import ConfigurationError, InvalidResume, SerializationError
from ..limits import MAX_SUBAGENT_NESTING
from ..messages import ToolResult
from ..subagents import (
    CompiledSubAgent,
    SubAgentConfig,
    SubAgentRun,
    subagent_nesting,
)
from ..tools import Tool, ToolContext
from .base import Interrupt, Middleware, Resume

if TYPE_CHECKING:
    from ..agent import Agent
    from ..state import State

GENERAL_PURPOSE = "general-purpose"

GENERAL_PURPOSE_DESCRIPTION = (
    "A general-purpose agent with the same tools as you, for researching complex "
    "questions, searching for files and content, and running multi-step tasks."
)

GENERAL_PURPOSE_PROMPT = (
    "You are a sub-agent. Complete the task you are given using your tools, then "
    "reply with a concise, complete final answer: it is the only thing the agent "
    "that delegated the task will read."
)

SYSTEM_PROMPT = """## `task` (sub-agents)

You can delegate work to sub-agents with the `task` tool. A sub-agent starts with a
fresh conversation, works on its own and returns one final answer.

Use it when a task is complex and self-contained, needs many steps or a lot of reading,
or when several independent tasks can run in parallel (call `task` several times in one
response). Give complete instructions: the sub-agent sees nothing of this conversation.
Do not use it for trivial tasks you can do in a step or two."""


class SubAgent(Middleware):
    """Provides the ``task`` tool that runs sub-agents."""

    def __init__(
        self,
        *,
        subagents: Iterable[SubAgentConfig | CompiledSubAgent] = (),
        model: Any = None,
        middleware: Iterable[Any] = (),
        block_middleware: Iterable[type[Middleware] | str] = (),
        general_purpose: bool = True,
        show_progress: bool = True,
        task_description: str | None = None,
    ) -> None:
        super().__init__(
            subagents=list(subagents),
            model=model,
            middleware=list(middleware),
            block_middleware=list(block_middleware),
            general_purpose=general_purpose,
            show_progress=show_progress,
            task_description=task_description,
        )
        self.specs: dict[str, SubAgentConfig | CompiledSubAgent] = {}
        for spec in subagents:
            if not isinstance(spec, SubAgentConfig | CompiledSubAgent):
                raise ConfigurationError(
                    f"subagents takes SubAgentConfig or CompiledSubAgent, not {spec!r}"
                )
            if spec.name in self.specs or (
                spec.name == GENERAL_PURPOSE and general_purpose
            ):
                raise ConfigurationError(f"Two sub-agents are named {spec.name!r}")
            self.specs[spec.name] = spec
        self.model = model
        self.extra_middleware = list(middleware)
        self.blocked = tuple(block_middleware)
        self.general_purpose = general_purpose
        self.show_progress = show_progress
        self.task_description = task_description
        self.parent: Agent | None = None

    def attach(self, agent: Agent) -> None:
        self.parent = agent

    # Descriptions -----------------------------------------------------------------
    def types(self) -> dict[str, str]:
        found = (
            {GENERAL_PURPOSE: GENERAL_PURPOSE_DESCRIPTION}
            if self.general_purpose
            else {}
        )
        found.update({name: spec.description for name, spec in self.specs.items()})
        return found

    def system_prompt(self) -> str:
        return SYSTEM_PROMPT

    def tools(self) -> list[Tool]:
        types = self.types()
        listing = "\n".join(f"- {name}: {text}" for name, text in types.items())
        description = self.task_description or (
            "Launch a sub-agent to carry out a task on its own and return its final "
            f"answer.\n\nAvailable sub-agent types:\n{listing}"
        )
        return [
            Tool(
                name="task",
                description=description,
                function=self._task,
                display_text="Delegating to a sub-agent",
                parameters={
                    "type": "object",
                    "properties": {
                        "instructions": {
                            "type": "string",
                            "description": "Everything the sub-agent needs to know.",
                        },
                        "subagent_type": {"type": "string", "enum": list(types)},
                        "system_prompt": {
                            "type": "string",
                            "description": "Optional system prompt for general-purpose.",
                        },
                    },
                    "required": ["instructions", "subagent_type"],
                },
            )
        ]

    def debug_summary(self) -> dict[str, Any]:
        return {
            "subagents": list(self.types()),
            "blocked": [str(b) for b in self.blocked],
        }

    # Running ----------------------------------------------------------------------
    async def _task(self, args: dict[str, Any], context: ToolContext) -> ToolResult:
        return await self.start_subagent(
            context,
            instructions=args["instructions"],
            subagent_type=args["subagent_type"],
            system_prompt=args.get("system_prompt"),
        )

    async def start_subagent(
        self,
        context: ToolContext,
        *,
        instructions: str,
        subagent_type: str,
        system_prompt: str | None = None,
    ) -> ToolResult:
        """Run a sub-agent for a tool call and return the parent's tool result.

        Its result is an answer, an error, or an interrupt the parent surfaces.
        """
        call = context.tool_call
        call_id = call.call_id if call else "task"
        name = call.name if call else "task"
        if subagent_type not in self.types():
            return ToolResult(
                tool_call_id=call_id,
                name=name,
                is_error=True,
                content=f"Unknown subagent_type {subagent_type!r}; available: "
                f"{', '.join(self.types())}.",
            )
        if subagent_nesting() >= MAX_SUBAGENT_NESTING:
            # Deeper, a paused conversation could no longer be stored.
            return ToolResult(
                tool_call_id=call_id,
                name=name,
                is_error=True,
                content=f"Sub-agents can be nested at most {MAX_SUBAGENT_NESTING} "
                "levels deep, and this one is at that depth: do the task yourself.",
            )
        run = self._new_run(
            subagent_type,
            call_id,
            instructions=instructions,
            system_prompt=system_prompt,
        )
        with self._progress(subagent_type, call_id) as callbacks:
            await run.aexecute(callbacks, cancel=_cancel_token(context.execution))
        return self._outcome(run, call_id, name)

    async def handle_resume(
        self, agent: Agent, state: State, resume_data: Any, **options: Any
    ) -> Resume | Interrupt | None:
        interrupt = state.interrupt
        if not isinstance(interrupt, SubAgentInterrupt):
            return None
        call_id = interrupt.tool_call_id
        paused = _interrupted_result(state, call_id)
        run_data = (paused.interrupt_data or {}).get("_run") if paused else None
        if paused is None or not isinstance(run_data, dict):
            raise InvalidResume(
                f"The paused sub-agent call {call_id!r} is no longer in the conversation"
            )
        subagent_type = str(run_data.get("subagent_type"))
        if subagent_type not in self.types():
            raise InvalidResume(f"Sub-agent type {subagent_type!r} is not configured")
        agent_for_run = self._build_agent(subagent_type, str(run_data["id"]))
        run = SubAgentRun.load(
            run_data, agent_for_run, **self._run_options(subagent_type)
        )
        with self._progress(subagent_type, call_id) as callbacks:
            # InvalidResume leaves all as it was
            await run.aresume(
                resume_data, callbacks, cancel=_cancel_token(options.get("execution"))
            )
        result = self._outcome(run, call_id, paused.name)
        state = replace(state.replace_tool_result(call_id, result), interrupt_data=None)
        if not result.is_interrupt:
            events.emit(
                "tool_execution_update",
                {
                    "status": "completed",
                    "call_id": call_id,
                    "name": paused.name,
                    "result": result.text,
                },
            )
        pending = result if result.is_interrupt else _next_interrupted(state)
        if pending is not None:
            data = _public(pending.interrupt_data or {})
            data["tool_call_id"] = pending.tool_call_id
            return Interrupt(state=state, data=data)
        return Resume(state=state)

    def restorable_interrupt(self, interrupt_data: dict[str, Any]) -> bool:
        run = interrupt_data.get("_run")
        return (
            interrupt_data.get("type") == "subagent"
            and isinstance(run, dict)
            and run.get("subagent_type") in self.types()
        )

    # Building ---------------------------------------------------------------------
    def _new_run(
        self,
        subagent_type: str,
        call_id: str,
        *,
        instructions: str,
        system_prompt: str | None,
    ) -> SubAgentRun:
        run_id = _agent_id(self._parent().agent_id, call_id)
        spec = self.specs.get(subagent_type)
        agent = self._build_agent(subagent_type, run_id, system_prompt=system_prompt)
        initial = spec.initial_messages if isinstance(spec, CompiledSubAgent) else []
        return SubAgentRun.start(
            id=run_id,
            subagent_type=subagent_type,
            agent=agent,
            instructions=instructions,
            initial_messages=initial,
            **self._run_options(subagent_type),
        )

    def _run_options(self, subagent_type: str) -> dict[str, Any]:
        spec = self.specs.get(subagent_type)
        options: dict[str, Any] = {"parent_agent_id": self._parent().agent_id}
        if spec is not None:
            options["until_tool"] = spec.until_tool
            if isinstance(spec, CompiledSubAgent):
                options["extract"] = spec.extract_result
        return options

    def _build_agent(
        self, subagent_type: str, agent_id: str, *, system_prompt: str | None = None
    ) -> Agent:
        from ..agent import Agent

        parent = self._parent()
        spec = self.specs.get(subagent_type)
        if isinstance(spec, CompiledSubAgent):
            return spec.agent
        common: dict[str, Any] = {
            "agent_id": agent_id,
            "fallback_models": parent.fallback_models,
            "tool_context": parent.tool_context,
            "async_tool_timeout": parent.async_tool_timeout,
            "filesystem_scope": parent.filesystem_scope or ("agent", parent.agent_id),
            "replace_default_middleware": True,
            "tool_access": parent.tool_access,  # the same tools, offered and run
        }
        if spec is None:  # general-purpose: the parent's tools, middleware, budget
            inherited = [
                entry.to_raw_spec()
                for entry in parent.middleware
                if not isinstance(entry.middleware, SubAgent)
                and not self._is_blocked(entry.cls)
            ]
            return Agent(
                model=self.model or parent.model,
                base_system_prompt=system_prompt or GENERAL_PURPOSE_PROMPT,
                tools=parent.base_tools,
                middleware=[*inherited, *self.extra_middleware],
                max_runs=parent.max_runs,
                **common,
            )
        if spec.max_runs is not None:
            common["max_runs"] = spec.max_runs
        return Agent(
            model=spec.model or self.model or parent.model,
            base_system_prompt=spec.system_prompt,
            tools=spec.tools,
            middleware=[*self.extra_middleware, *spec.middleware],
            interrupt_on=spec.interrupt_on,
            **common,
        )

    def _is_blocked(self, cls: type) -> bool:
        for blocked in self.blocked:
            if blocked is cls or blocked == f"{cls.__module__}.{cls.__qualname__}":
                return True
        return False

    def _parent(self) -> Agent:
        if self.parent is None:
            raise ConfigurationError("SubAgent middleware is not attached to an agent")
        return self.parent

    def _outcome(self, run: SubAgentRun, call_id: str, name: str) -> ToolResult:
        label = f"Sub-agent {run.subagent_type}"
        if run.status == "completed":
            return ToolResult(
                tool_call_id=call_id,
                name=name,
                content=run.extract_result(),
                display_text=label,
            )
        if run.status == "interrupted":
            try:
                inner = interrupt_from_dict(run.interrupt_data or {})
            except SerializationError as exc:
                return ToolResult(
                    tool_call_id=call_id,
                    name=name,
                    is_error=True,
                    display_text=label,
                    content=f"Sub-agent {run.subagent_type!r} paused with an "
                    f"unreadable interrupt: {exc}",
                )
            interrupt = SubAgentInterrupt(
                subagent=run.subagent_type,
                subagent_id=run.id,
                tool_call_id=call_id,
                interrupt=inner,
            )
            asking = ", ".join(r.tool_name for r in interrupt.action_requests)
            # The sub-agent's conversation stays with the tool result (the loop keeps
            # "_" keys out of the state's interrupt_data).
            data = {**interrupt.to_dict(), "_run": run.dump()}
            return ToolResult(
                tool_call_id=call_id,
                name=name,
                is_interrupt=True,
                interrupt_data=data,
                display_text=label,
                content=f"Sub-agent {run.subagent_type!r} is waiting for approval"
                + (f" to call {asking}." if asking else "."),
            )
        return ToolResult(
            tool_call_id=call_id,
            name=name,
            is_error=True,
            display_text=label,
            content=f"Sub-agent {run.subagent_type!r} failed: {run.error}",
        )

    @contextlib.contextmanager
    def _progress(
        self, subagent_type: str, call_id: str
    ) -> Iterator[list[dict[str, Any]]]:
        """Route the sub-agent's events to the parent's handlers, tagged with the
        sub-agent and the task call (or drop them); yields its callbacks."""
        spec = self.specs.get(subagent_type)
        if not (self.show_progress and (spec is None or spec.show_progress)):
            with events.isolated_events():
                yield []
            return
        tag = {"subagent": subagent_type, "task_call_id": call_id}
        parent_handlers = events.current_handlers()

        def forward(name: str, data: dict[str, Any]) -> None:
            payload = {**tag, "event": name, "data": data}
            events.dispatch(parent_handlers, "subagent_event", payload)

        with events.isolated_events(forward):
            yield [_progress_callbacks()]


def _progress_callbacks() -> dict[str, Any]:
    emit = events.emit

    def started(ex: Any, call: Any, tool: Any) -> None:
        emit(
            "tool_execution_update",
            {
                "status": "executing",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": call.arguments,
                "display_text": getattr(tool, "display_text", None),
            },
        )

    def finished(ex: Any, call: Any, result: ToolResult) -> None:
        status = "failed" if result.is_error else "completed"
        key = "error" if result.is_error else "result"
        emit(
            "tool_execution_update",
            {
                "status": status,
                "call_id": call.call_id,
                "name": call.name,
                key: result.text,
            },
        )

    return {
        "on_llm_new_delta": lambda ex, deltas: emit(
            "llm_deltas", {"deltas": [d.to_dict() for d in deltas]}
        ),
        "on_llm_new_message": lambda ex, message: emit(
            "llm_message", {"message": message.to_dict()}
        ),
        "on_tool_execution_started": started,
        "on_tool_execution_completed": finished,
        "on_tool_execution_failed": finished,
    }


def _cancel_token(execution: Any) -> Any:
    """The parent's CancelToken: the sub-agent stops when the parent is cancelled."""
    return getattr(execution, "cancel", None)


def _agent_id(parent_id: str | None, call_id: str) -> str:
    # Channel-layer group names allow only [A-Za-z0-9._-]: keep ids inside that set.
    return re.sub(r"[^A-Za-z0-9._-]", "_", f"{parent_id}.sub.{call_id}")[:90]


def _public(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if not k.startswith("_")}


def _interrupted_result(state: State, call_id: Any) -> ToolResult | None:
    for message in reversed(state.messages):
        if message.role == "tool":
            for result in message.tool_results:
                if result.tool_call_id == call_id and result.is_interrupt:
                    return result
    return None


def _next_interrupted(state: State) -> ToolResult | None:
    last = state.messages[-1] if state.messages else None
    if last is not None and last.role == "tool":
        return next((r for r in last.tool_results if r.is_interrupt), None)
    return None
