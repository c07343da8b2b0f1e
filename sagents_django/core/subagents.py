"""Sub-agents: configurations and the run of one delegated task.

Sagents keeps a sub-agent in a process that holds its chain between pause and resume.
Here a sub-agent runs inside its parent's turn, and what it holds between pause and
resume is data: its ``State``. When a sub-agent pauses for approval, its conversation is
serialized into the parent's interrupt, so the approval survives a restart of every
process; the agent itself is rebuilt from code (its config) on resume.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from . import tracing
from .messages import Message
from .serialization import deserialize_server_state, serialize_server_state
from .state import State

if TYPE_CHECKING:
    from .agent import Agent
    from .cancellation import CancelToken
    from .modes import AgentResult
    from .tools import Tool

SubAgentStatus = Literal["idle", "running", "interrupted", "completed", "error"]

# How many sub-agents deep the running code is: each level's paused conversation is
# stored inside its parent's, so the depth of a stored state grows with it (see
# ``limits.MAX_SUBAGENT_NESTING``). A context variable follows the turn's tasks.
_nesting: ContextVar[int] = ContextVar("sagents_subagent_nesting", default=0)


def subagent_nesting() -> int:
    """How many sub-agents deep the running code is (0: in the agent itself)."""
    return _nesting.get()


@contextlib.contextmanager
def _one_level_down() -> Iterator[None]:
    token = _nesting.set(_nesting.get() + 1)
    try:
        yield
    finally:
        _nesting.reset(token)


@dataclass(kw_only=True)
class SubAgentConfig:
    """A sub-agent built on demand from configuration."""

    name: str
    """The ``subagent_type`` the model passes to the task tool."""
    description: str
    """Tells the parent model when to delegate to this sub-agent."""
    system_prompt: str = ""
    tools: list[Tool] = field(default_factory=list)
    middleware: list[Any] = field(default_factory=list)
    """Its own middleware (the parent's ``block_middleware`` does not apply)."""
    model: Any = None
    """A model string or ChatModel; None uses the parent's model."""
    interrupt_on: dict[str, Any] | None = None
    until_tool: str | list[str] | None = None
    """The turn ends when one of these tools was called; its result is the answer."""
    max_runs: int | None = None
    """Its budget of model calls per run (None: the Agent default)."""
    show_progress: bool = True
    """Publish its text and tool calls as ``subagent_event`` events."""


@dataclass(kw_only=True)
class CompiledSubAgent:
    """A sub-agent around a pre-built Agent."""

    name: str
    description: str
    agent: Agent
    extract_result: Callable[[State], str] | None = None
    initial_messages: list[Message] = field(default_factory=list)
    until_tool: str | list[str] | None = None
    show_progress: bool = True


@dataclass(kw_only=True, eq=False)
class SubAgentRun:
    """One delegated task: the sub-agent, its conversation and how it ended."""

    id: str
    subagent_type: str
    agent: Agent
    state: State
    parent_agent_id: str | None = None
    until_tool: str | list[str] | None = None
    extract: Callable[[State], str] | None = None
    status: SubAgentStatus = "idle"
    interrupt_data: dict[str, Any] | None = None
    error: str | None = None
    result: AgentResult | None = None

    @classmethod
    def start(
        cls,
        *,
        id: str,
        subagent_type: str,
        agent: Agent,
        instructions: str,
        initial_messages: Iterable[Message] = (),
        **options: Any,
    ) -> SubAgentRun:
        state = State(messages=[*initial_messages, Message.user(instructions)])
        return cls(
            id=id, subagent_type=subagent_type, agent=agent, state=state, **options
        )

    async def aexecute(
        self,
        callbacks: Iterable[Mapping[str, Any]] = (),
        *,
        cancel: CancelToken | None = None,
    ) -> SubAgentRun:
        """Run the task; ``cancel`` is the parent's token (one Stop stops all)."""
        self.status = "running"
        with _one_level_down(), self._span(resuming=False) as span:
            result = await self.agent.aexecute(
                self.state,
                callbacks=callbacks,
                until_tool=self.until_tool,
                cancel=cancel,
            )
            tracing.set_attributes(span, {"sagents.status": result.status})
            if result.status == "error":
                tracing.mark_error(span, "subagent_error")
        return self._settle(result)

    async def aresume(
        self,
        decisions: Any,
        callbacks: Iterable[Mapping[str, Any]] = (),
        *,
        cancel: CancelToken | None = None,
    ) -> SubAgentRun:
        """Continue after a pause; ``InvalidResume`` leaves this run untouched."""
        with _one_level_down(), self._span(resuming=True) as span:
            result = await self.agent.aresume(
                self.state,
                decisions,
                callbacks=callbacks,
                until_tool=self.until_tool,
                cancel=cancel,
            )
            tracing.set_attributes(span, {"sagents.status": result.status})
            if result.status == "error":
                tracing.mark_error(span, "subagent_error")
        return self._settle(result)

    def _span(self, *, resuming: bool) -> AbstractContextManager[Any]:
        """The task's ``sagents.subagent`` span (inside the parent's tool call's)."""
        return tracing.turn(
            "sagents.subagent",
            {
                "sagents.subagent.type": self.subagent_type,
                "sagents.subagent.id": self.id,
                "sagents.agent_id": self.agent.agent_id,
                "sagents.trigger": "resume" if resuming else "execute",
            },
        )

    def _settle(self, result: AgentResult) -> SubAgentRun:
        self.result = result
        self.state = result.state
        self.interrupt_data = result.interrupt_data
        self.error = result.error
        settled: dict[str, SubAgentStatus] = {
            "completed": "completed",
            "interrupted": "interrupted",
        }
        self.status = settled.get(result.status, "error")
        if result.status == "cancelled":
            self.error = "The sub-agent was cancelled"
        return self

    def extract_result(self) -> str:
        """The final answer the parent reads (never the sub-agent's inner work)."""
        if self.extract is not None:
            return self.extract(self.state)
        if self.result is not None and self.result.tool_result is not None:
            return self.result.tool_result.text
        for message in reversed(self.state.messages):
            if message.role == "assistant" and message.text:
                return message.text
        return ""

    # Serialization: the pause travels inside the parent's interrupt data ---------
    def dump(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "subagent_type": self.subagent_type,
            "state": serialize_server_state(self.state),
        }

    @classmethod
    def load(cls, data: Mapping[str, Any], agent: Agent, **options: Any) -> SubAgentRun:
        state = deserialize_server_state(
            agent.agent_id, data["state"], middleware=agent.middleware
        )
        return cls(
            id=str(data["id"]),
            subagent_type=str(data["subagent_type"]),
            agent=agent,
            state=state,
            status="interrupted",
            interrupt_data=state.interrupt_data,
            **options,
        )
