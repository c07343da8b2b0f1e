"""The execution loop as a pipeline of steps (Sagents' Mode.Steps / AgentExecution).

A mode is a sequence of steps; each step takes the ``Execution`` and returns None to
go on or an ``AgentResult`` to end the turn. ``AgentExecution`` loops its steps until
one ends the turn. A developer recomposes the steps into a custom mode::

    class Careful(AgentExecution):
        steps = (log_step, *AgentExecution.steps)

    Agent(model=..., mode=Careful())

Standard pipeline: expand the last tools' results into messages, check for
cancellation, call the model (before_model hooks in order, the call, after_model hooks
in reverse), stop for human approval when a middleware's ``review_tool_calls`` says a
pending tool call needs it (see ``review``), execute tools (in parallel), propagate
state updates from tool results, stop when ``until_tool`` was called (those three steps
are ``core.tool_steps``, importable from here too), then loop or finish.

Cancellation (``Execution.cancel``, a ``CancelToken``) interrupts the hooks, the model
call and async tools where they wait; a sync tool runs in a thread that cannot be
interrupted, so its call finishes (its result is kept) and nothing after it starts.
Callbacks fired between the waits (a message or tool result to record) are never
interrupted, so what they persist stays whole; those fired mid-stream (deltas) may
be. A cancelled turn leaves a state a provider accepts: partial text is kept only
when there is some (stop reason ``cancelled``), and every tool call of the last reply
has a result (a "cancelled" error for those that did not finish). A custom step that
waits runs its wait inside ``async with ex.cancel.scope():`` to be interrupted too.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from .approvals import (
    Decision,
    PendingInterrupt,
    interrupt_from_dict,
    interrupt_to_dict,
)
from .cancellation import Cancelled, CancelToken
from .exceptions import LLMError, TurnStopped
from .expansion import expand_tool_results
from .journal import ToolJournal
from .llm import call_model
from .messages import Message, TokenUsage, ToolCall, ToolResult
from .middleware.base import Interrupt, Stop, call_hook
from .outbox import Outbox, QueuedFromTool
from .prefix import extends
from .review import check_pre_tool_hitl
from .state import State

# The tool steps live in tool_steps; their names stay importable from here, where
# custom modes have always taken the standard steps from.
from .tool_steps import CANCELLED_BEFORE_TEXT as CANCELLED_BEFORE_TEXT
from .tool_steps import CANCELLED_DURING_TEXT as CANCELLED_DURING_TEXT
from .tool_steps import REJECTED_REASON_TEXT as REJECTED_REASON_TEXT
from .tool_steps import REJECTED_TEXT as REJECTED_TEXT
from .tool_steps import apply_update as apply_update
from .tool_steps import cancelled_result as cancelled_result
from .tool_steps import check_until_tool as check_until_tool
from .tool_steps import execute_tools as execute_tools
from .tool_steps import propagate_state as propagate_state

if TYPE_CHECKING:
    from .agent import Agent
    from .callbacks import Callbacks

logger = logging.getLogger(__name__)

ResultStatus = Literal["completed", "interrupted", "error", "cancelled"]


@dataclass(kw_only=True, slots=True)
class AgentResult:
    """How a turn ended, with the state it left."""

    status: ResultStatus
    state: State
    interrupt_data: dict[str, Any] | None = None
    """For ``interrupted``: what a person must decide, as JSON (see ``approvals``)."""
    error: str | None = None
    """For ``error``: a message a person can read."""
    exception: BaseException | None = None
    tool_result: ToolResult | None = None
    """For ``until_tool``: the result of the target tool."""
    usage: TokenUsage = field(default_factory=TokenUsage)
    queued_messages: list[QueuedFromTool] = field(default_factory=list)
    """Messages the turn's tools queued for a turn after it (``core.outbox``)."""

    @property
    def ok(self) -> bool:
        return self.status == "completed"

    @property
    def last_message(self) -> Message | None:
        return self.state.messages[-1] if self.state.messages else None

    @property
    def interrupt(self) -> PendingInterrupt | None:
        """``interrupt_data`` typed: ``HITLInterrupt``, ``SubAgentInterrupt`` or
        ``CustomInterrupt`` (raises SerializationError when it is malformed)."""
        return interrupt_from_dict(self.interrupt_data) if self.interrupt_data else None


@dataclass(kw_only=True, eq=False)
class Execution:
    """One ``execute``/``resume`` call in progress; what every step works on."""

    agent: Agent
    state: State
    callbacks: Callbacks
    max_runs: int
    until_tool: frozenset[str] | None = None
    cancel: CancelToken = field(default_factory=CancelToken)
    """Stops the turn when it fires; passed down to sub-agents."""
    tool_decisions: dict[str, Decision] = field(default_factory=dict)
    """Decisions from a HITL resume, by tool call id."""
    run_count: int = 0
    """Model calls made so far."""
    usage: TokenUsage = field(default_factory=TokenUsage)
    last_tool_results: list[ToolResult] = field(default_factory=list)
    inbox: Inbox = field(default_factory=lambda: Inbox())
    """Messages for middleware (``notify_middleware``), applied at the next step."""
    journal: ToolJournal | None = None
    """Where tool calls are recorded, so a taken-over turn never repeats one."""
    outbox: Outbox = field(default_factory=Outbox)
    """Messages tools queue for a turn after this one (shared with sub-agents)."""
    _openai: tuple[list[Message], list[dict[str, Any]]] = field(
        default_factory=lambda: ([], [])
    )
    """The history last converted for the model, and its OpenAI form."""

    @property
    def agent_id(self) -> str | None:
        return self.agent.agent_id

    def cancelled(self) -> bool:
        return self.cancel.cancelled

    def result(self, status: ResultStatus, **kwargs: Any) -> AgentResult:
        return AgentResult(
            status=status,
            state=self.state,
            usage=self.usage,
            queued_messages=self.outbox.since(0),
            **kwargs,
        )

    def fail(self, message: str, exception: BaseException | None = None) -> AgentResult:
        return self.result("error", error=message, exception=exception)

    def pending_tool_calls(self) -> list[ToolCall]:
        """Calls of the last message when it is an assistant message (no results yet)."""
        messages = self.state.messages
        if messages and messages[-1].role == "assistant":
            return messages[-1].tool_calls
        return []

    def openai_messages(self) -> list[dict[str, Any]]:
        """The system prompt and history in OpenAI format, converted once per
        message: the messages added since the last call, when the history still
        starts with the one converted then (``core.prefix``)."""
        messages = self.state.messages
        seen, converted = self._openai
        if extends(seen, messages):
            tail = messages[len(seen) :]
        else:  # rewritten (a summary, a patched call): converted again
            tail, converted = messages, []
        if tail:
            converted = [*converted, *(d for m in tail for d in m.to_openai())]
            self._openai = (list(messages), converted)
        prompt = self.agent.assembled_system_prompt
        if prompt:
            return [{"role": "system", "content": prompt}, *converted]
        return list(converted)


Step = Callable[[Execution], Awaitable[AgentResult | None]]


class Inbox:
    """Messages for a running turn's middleware, posted from any thread.

    ``post`` never blocks; the ``step_boundary`` step hands each message to its
    middleware's ``handle_message`` before the next model call, in posting order.
    """

    __slots__ = ("_items", "_lock")

    def __init__(self) -> None:
        self._items: list[tuple[str, Any]] = []
        self._lock = threading.Lock()

    def post(self, middleware_id: str, message: Any) -> None:
        with self._lock:
            self._items.append((middleware_id, message))

    def take(self) -> list[tuple[str, Any]]:
        with self._lock:
            items, self._items = self._items, []
        return items


# Steps ------------------------------------------------------------------------------
async def step_boundary(ex: Execution) -> AgentResult | None:
    """Between steps: announce the step that ended (``on_step_end``, where the
    runtime checkpoints state) and deliver the inbox's messages to their middleware.
    """
    if ex.run_count:
        await ex.callbacks.fire("on_step_end", ex)
    for middleware_id, message in ex.inbox.take():
        await deliver_message(ex, middleware_id, message)
    return None


async def deliver_message(ex: Execution, middleware_id: str, message: Any) -> None:
    """Apply one ``handle_message``; an unknown id or a failing hook is logged and
    skipped (a notification never ends a turn)."""
    entry = ex.agent.get_middleware(middleware_id)
    if entry is None:
        logger.warning("No middleware %r to take a message", middleware_id)
        return
    try:
        outcome = await call_hook(entry.middleware.handle_message, message, ex.state)
    except Exception:
        logger.exception("Middleware %s failed in handle_message", middleware_id)
        return
    if isinstance(outcome, State):
        ex.state = outcome


async def check_cancelled(ex: Execution) -> AgentResult | None:
    return await finish_cancelled(ex) if ex.cancel.cancelled else None


async def finish_cancelled(ex: Execution) -> AgentResult:
    """End the turn as cancelled, answering the calls that did not run."""
    calls = ex.pending_tool_calls()
    if calls:
        message = Message.tool(
            [cancelled_result(call, started=False) for call in calls]
        )
        ex.state = ex.state.add_message(message)
        await ex.callbacks.fire("on_tool_response_created", ex, message)
    return ex.result("cancelled")


async def call_llm(ex: Execution) -> AgentResult | None:
    """Run before_model hooks, call the model, run after_model hooks."""
    if ex.pending_tool_calls():
        return None  # resuming: the last response's tools still have to run
    if ex.run_count >= ex.max_runs:
        return ex.fail(
            f"The agent exceeded max_runs ({ex.max_runs} model calls in one turn)"
        )
    agent = ex.agent
    if agent.before_model_entries:
        try:
            async with ex.cancel.scope():
                for entry in agent.before_model_entries:
                    outcome = await _apply(ex, entry, "before_model")
                    if isinstance(outcome, AgentResult):
                        return outcome
        except Cancelled:
            return await finish_cancelled(ex)
    await ex.callbacks.fire("on_after_middleware", ex.state)
    ex.run_count += 1
    try:
        call = await call_model(
            agent.models,
            ex.openai_messages(),
            agent.openai_tools,
            execution=ex,
            callbacks=ex.callbacks,
            before_fallback=agent.before_fallback,
            cancel=ex.cancel,
        )
    except LLMError as error:
        # A reply cut off before any text leaves nothing a provider would accept
        # back (an assistant message with neither text nor tool calls): dropped.
        partial = error.partial
        if partial is not None and not partial.text:
            partial = None
        if partial is not None:
            ex.state = ex.state.add_message(partial)
            await ex.callbacks.fire("on_error_message_created", ex, partial)
        await ex.callbacks.fire("on_message_processing_error", ex, partial, str(error))
        return ex.fail(str(error), error)
    message = call.message
    if call.usage is not None:
        ex.usage = ex.usage + call.usage
    if message.status == "cancelled":
        if message.text:
            ex.state = ex.state.add_message(message)
            await ex.callbacks.fire("on_llm_new_message", ex, message)
        return await finish_cancelled(ex)
    ex.state = ex.state.add_message(message)
    await ex.callbacks.fire("on_llm_new_message", ex, message)
    if ex.cancel.cancelled:
        return await finish_cancelled(ex)
    await ex.callbacks.fire("on_message_processed", ex, message)
    if not agent.after_model_entries:
        return None
    try:
        async with ex.cancel.scope():
            for entry in agent.after_model_entries:
                outcome = await _apply(ex, entry, "after_model")
                if isinstance(outcome, AgentResult):
                    return outcome
    except Cancelled:
        return await finish_cancelled(ex)
    return None


async def continue_or_done(ex: Execution) -> AgentResult | None:
    """Loop while tools ran; finish when the model answered without calling any."""
    last = ex.state.messages[-1] if ex.state.messages else None
    if last is None or last.role != "assistant" or last.tool_calls:
        return None
    if last.status in ("stream_error",):
        return ex.fail("The model's reply was cut off")
    if ex.until_tool:
        names = ", ".join(sorted(ex.until_tool))
        return ex.fail(f"The model stopped without calling the required tool ({names})")
    return ex.result("completed")


class AgentExecution:
    """The standard mode: loop the steps until one ends the turn."""

    steps: Sequence[Step] = (
        expand_tool_results,
        step_boundary,
        check_cancelled,
        call_llm,
        check_pre_tool_hitl,
        check_cancelled,
        execute_tools,
        propagate_state,
        check_until_tool,
        continue_or_done,
    )

    async def run(self, ex: Execution) -> AgentResult:
        steps = tuple(self.steps)
        while True:
            for step in steps:
                outcome = await step(ex)
                if outcome is not None:
                    return outcome


# Helpers ----------------------------------------------------------------------------
async def _apply(ex: Execution, entry: Any, hook: str) -> AgentResult | None:
    try:
        outcome = await call_hook(getattr(entry.middleware, hook), ex.state)
    except Exception as exc:
        logger.exception("Middleware %s failed in %s", entry.id, hook)
        return ex.fail(f"Middleware {entry.id} failed in {hook}: {exc}", exc)
    if isinstance(outcome, Stop):
        ex.state = outcome.state
        stopped = TurnStopped(outcome.message, reason=outcome.reason, data=outcome.data)
        return ex.fail(outcome.message, stopped)
    if isinstance(outcome, Interrupt):
        data = interrupt_to_dict(outcome.data)
        ex.state = replace(outcome.state, interrupt_data=data)
        return ex.result("interrupted", interrupt_data=data)
    if not isinstance(outcome, State):
        return ex.fail(
            f"Middleware {entry.id} {hook} returned {type(outcome).__name__}, not State"
        )
    ex.state = outcome
    return None
