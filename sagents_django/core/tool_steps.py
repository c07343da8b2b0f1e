"""The steps that run a reply's tool calls: ``execute_tools`` (in parallel, with a
person's decisions applied), ``propagate_state`` (the state updates tools returned)
and ``check_until_tool``; part of ``AgentExecution``'s pipeline (``core.modes``, which
re-exports them for custom modes).

Each call, in order: a rejection answers it without running it; after a cancel nothing
starts; a call an earlier attempt of the run already made is answered from the journal
(a taken-over turn never runs a tool twice); the tool-access rules are checked at every
call (a revoke counts); then it runs, inside the cancel scope when it is async (a sync
tool runs in a thread that cannot be stopped: its call finishes and its result is
kept).
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .approvals import Edit, Reject
from .cancellation import Cancelled
from .messages import Message, ToolCall, ToolResult
from .state import State, merge_states
from .todo import Todo
from .tool_access import refusal
from .tools import ToolContext, error_result, execute_tool_call

if TYPE_CHECKING:
    from .modes import AgentResult, Execution

REJECTED_TEXT = "The user rejected this call to {name!r}; it was not run."
REJECTED_REASON_TEXT = " Their reason: {message}"
CANCELLED_BEFORE_TEXT = "The call to {name!r} was cancelled before it ran."
CANCELLED_DURING_TEXT = (
    "The call to {name!r} was cancelled before it finished; it may have done part "
    "of its work."
)


def cancelled_result(call: ToolCall, *, started: bool) -> ToolResult:
    text = CANCELLED_DURING_TEXT if started else CANCELLED_BEFORE_TEXT
    return error_result(call, text.format(name=call.name))


async def execute_tools(ex: Execution) -> AgentResult | None:
    """Run the pending calls in parallel (decisions applied), append their results."""
    calls = ex.pending_tool_calls()
    ex.last_tool_results = []
    if not calls:
        return None
    if ex.tool_decisions:
        calls = _apply_edits(ex, calls)
    results = await asyncio.gather(*(_run_call(ex, call) for call in calls))
    ex.tool_decisions = {}
    ex.last_tool_results = list(results)
    tool_message = Message.tool(results)
    ex.state = ex.state.add_message(tool_message)
    await ex.callbacks.fire("on_tool_response_created", ex, tool_message)
    await ex.callbacks.fire("on_message_processed", ex, tool_message)
    paused = next((r for r in results if r.is_interrupt), None)
    if paused is not None:
        # The other calls of the batch ran: keep their state updates.
        failed = await propagate_state(ex)
        if failed is not None:
            return failed
        # Keys starting with "_" (e.g. a sub-agent's serialized conversation) stay with
        # the tool result; the state's interrupt_data only refers to it.
        data = {
            k: v
            for k, v in (paused.interrupt_data or {}).items()
            if not k.startswith("_")
        }
        data["tool_call_id"] = paused.tool_call_id
        ex.state = replace(ex.state, interrupt_data=data)
        return ex.result("interrupted", interrupt_data=data)
    return None


async def propagate_state(ex: Execution) -> AgentResult | None:
    """Merge the state updates that tools returned, in call order."""
    for result in ex.last_tool_results:
        update = result.processed_content
        if isinstance(update, State):
            merged = merge_states(ex.state, update)
            ex.state = replace(merged, interrupt_data=ex.state.interrupt_data)
        elif isinstance(update, dict):
            try:
                ex.state = apply_update(ex.state, update)
            except (ValueError, TypeError) as exc:
                return ex.fail(
                    f"Tool {result.name!r} returned a bad state update: {exc}", exc
                )
    return None


async def check_until_tool(ex: Execution) -> AgentResult | None:
    if not ex.until_tool:
        return None
    for result in ex.last_tool_results:
        if result.name in ex.until_tool and not result.is_error:
            return ex.result("completed", tool_result=result)
    return None


def _apply_edits(ex: Execution, calls: list[ToolCall]) -> list[ToolCall]:
    """Edited calls run with the person's arguments; history shows what ran."""
    edited = []
    for call in calls:
        decision = ex.tool_decisions.get(call.call_id)
        if isinstance(decision, Edit):
            call = ToolCall(
                call_id=call.call_id, name=call.name, arguments=decision.arguments
            )
        edited.append(call)
    if edited != calls:
        last = ex.state.messages[-1]
        ex.state = ex.state.set_messages(
            [*ex.state.messages[:-1], replace(last, tool_calls=edited)]
        )
    return edited


async def _run_call(ex: Execution, call: ToolCall) -> ToolResult:
    decision = ex.tool_decisions.get(call.call_id)
    tool = ex.agent.tools_by_name.get(call.name)
    if isinstance(decision, Reject):
        # An error, as LangChain marks rejections: the call did not happen, and an
        # until_tool target that was rejected must not count as called.
        text = REJECTED_TEXT.format(name=call.name)
        if decision.message:
            text += REJECTED_REASON_TEXT.format(message=decision.message)
        result = ToolResult(
            tool_call_id=call.call_id, name=call.name, content=text, is_error=True
        )
        await ex.callbacks.fire("on_tool_execution_failed", ex, call, result)
        return result
    if ex.cancel.cancelled:  # nothing starts after a cancel
        return cancelled_result(call, started=False)
    journal = ex.journal
    if journal is not None:
        recalled = await journal.recall(call, tool)
        if recalled is not None:  # an earlier attempt of this run ran it
            key = "failed" if recalled.is_error else "completed"
            await ex.callbacks.fire(f"on_tool_execution_{key}", ex, call, recalled)
            return recalled
    refused = await refusal(ex.agent, call)  # checked at every call: a revoke counts
    if refused is not None:
        await ex.callbacks.fire("on_tool_execution_failed", ex, call, refused)
        return refused
    if journal is not None:
        await journal.started(call, tool)
    await ex.callbacks.fire("on_tool_execution_started", ex, call, tool)
    context = ToolContext(
        state=ex.state,
        agent_id=ex.agent_id,
        tool_context=ex.agent.tool_context,
        tool_call=call,
        execution=ex,
    )
    run = execute_tool_call(
        call, ex.agent.tools_by_name, context, timeout=ex.agent.async_tool_timeout
    )
    try:
        if tool is not None and not inspect.iscoroutinefunction(tool.function):
            result = await run  # a thread cannot be stopped: the call finishes
        else:
            async with ex.cancel.scope():
                result = await run
    except Cancelled:
        run.close()  # never started when the token had fired before the scope
        result = cancelled_result(call, started=True)
    except Exception as exc:  # execute_tool_call already catches; this is a last guard
        result = error_result(call, f"Tool {call.name!r} failed: {exc}")
    if journal is not None:
        await journal.finished(call, result)
    key = (
        "on_tool_execution_failed" if result.is_error else "on_tool_execution_completed"
    )
    await ex.callbacks.fire(key, ex, call, result)
    return result


def apply_update(state: State, update: dict[str, Any]) -> State:
    """Apply a dict update from a tool: todos replace, metadata deep-merges,
    messages append. Unknown keys are an error the tool author must fix."""
    unknown = set(update) - {"todos", "metadata", "messages"}
    if unknown:
        raise ValueError(f"Unknown state update keys: {', '.join(sorted(unknown))}")
    if "todos" in update:
        todos = [
            t if isinstance(t, Todo) else Todo.from_dict(t) for t in update["todos"]
        ]
        state = state.set_todos(todos)
    if "metadata" in update:
        state = merge_states(state, State(metadata=update["metadata"]))
    if "messages" in update:
        state = state.add_messages(list(update["messages"]))
    return state
