"""PatchToolCalls: give every dangling tool call a result before the model is called.

A tool call is dangling when no later message holds its result: a person sent a new
message before the tools ran, a turn died between the model's answer and the tool
results, a state was restored half-way, or the response was cut off at the output
token limit. Providers refuse such a history, so ``before_model`` inserts a synthetic
result right after the assistant message that made the call, with Sagents' wording:
the call was cancelled, or (for a truncated response) it was not executed because
the output hit the token limit. The synthetic results go into the tool message that
follows the assistant message when there is one (a tool message here holds every
result of one assistant message), else into a new tool message.

Place it late in the stack, after middleware that adds or rewrites messages and
before any that expects complete call/result pairs (HumanInTheLoop).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..events import emit
from ..messages import Message, ToolCall, ToolResult
from ..prefix import extends
from .base import Middleware

if TYPE_CHECKING:
    from ..state import State

CANCELLED_TEXT = (
    "Tool call {name} with id {call_id} was cancelled - another message came in "
    "before it could be completed."
)
TRUNCATED_TEXT = (
    "Tool call {name} with id {call_id} was not executed - your response hit the "
    "output token limit before this tool call's arguments were complete, so none of "
    "the tool calls in that response ran. Retry with fewer tool calls per response, "
    "or split large content across several smaller calls."
)


class PatchToolCalls(Middleware):
    """Answers dangling tool calls with synthetic results before each model call."""

    _complete: list[Message] | None = None
    """The last history found with no dangling call: a history that starts with it
    is scanned from its last message on (``core.prefix``), not from the start."""

    def before_model(self, state: State) -> State:
        messages = state.messages
        complete = self._complete
        start = 0
        if complete and extends(complete, messages):
            start = len(complete) - 1  # its last calls were pending, not dangling
        if not has_dangling(messages, start):
            self._complete = list(messages)
            return state
        patched = patch_dangling_tool_calls(messages)
        if patched is messages:
            return state
        added = sum(len(m.tool_results) for m in patched) - sum(
            len(m.tool_results) for m in state.messages
        )
        emit(
            "debug",
            {
                "event": "middleware_action",
                "data": {
                    "middleware": getattr(self, "id", type(self).__name__),
                    "action": "dangling_tool_calls_patched",
                    "detail": f"{added} cancelled tool call(s)",
                },
            },
        )
        return state.set_messages(patched)


def patch_dangling_tool_calls(
    messages: list[Message], *, include_last: bool = False
) -> list[Message]:
    """``messages`` with a synthetic result for every dangling tool call.

    Returns the very same list object when nothing needed patching. The calls of a
    final assistant message are left alone unless ``include_last``: they are not
    dangling but pending, about to be executed (or awaiting a person's approval).
    ``before_model`` never sees such a history, since the loop runs pending calls
    before it calls the model again, so this only protects other callers.
    """
    # The last index holding each call's result: "a result in a later message" is
    # then one lookup per call.
    result_at: dict[str, int] = {}
    for index, message in enumerate(messages):
        if message.role == "tool":
            for result in message.tool_results:
                result_at[result.tool_call_id] = index

    out: list[Message] = []
    changed = False
    skip_next = False
    last = len(messages) - 1
    for index, message in enumerate(messages):
        if skip_next:
            skip_next = False
            continue
        out.append(message)
        if message.role != "assistant" or not message.tool_calls:
            continue
        if index == last and not include_last:
            continue
        missing = [
            c for c in message.tool_calls if result_at.get(c.call_id, -1) <= index
        ]
        if not missing:
            continue
        changed = True
        patches = [_synthetic_result(message, call) for call in missing]
        following = messages[index + 1] if index < last else None
        if following is not None and following.role == "tool":
            out.append(_with_results(following, message.tool_calls, patches))
            skip_next = True
        else:
            out.append(Message.tool(patches))
    return out if changed else messages


def has_dangling(messages: list[Message], start: int = 0) -> bool:
    """Whether an assistant message from ``start`` on (the last excepted: its calls
    are pending) has a call with no result after it. A call's result can only come
    after it, so the messages before ``start`` are not read."""
    answered: set[str] = set()
    last = len(messages) - 1
    for index in range(last - 1, start - 1, -1):
        message = messages[index + 1]
        if message.role == "tool":
            answered.update(r.tool_call_id for r in message.tool_results)
        current = messages[index]
        if current.role == "assistant" and any(
            c.call_id not in answered for c in current.tool_calls
        ):
            return True
    return False


def _synthetic_result(message: Message, call: ToolCall) -> ToolResult:
    # A truncated response ended the run before any of its calls ran, and their
    # arguments may be cut mid-JSON: the model is told the real cause so it retries
    # with smaller output. Every call of that response gets this result.
    if message.status == "length":
        text, is_error = TRUNCATED_TEXT, True
    else:
        text, is_error = CANCELLED_TEXT, False
    return ToolResult(
        tool_call_id=call.call_id,
        name=call.name,
        content=text.format(name=call.name, call_id=call.call_id),
        is_error=is_error,
    )


def _with_results(
    tool_message: Message, calls: list[ToolCall], patches: list[ToolResult]
) -> Message:
    """The tool message with ``patches`` added, results in the order of the calls."""
    order: dict[str, Any] = {c.call_id: i for i, c in enumerate(calls)}
    results = sorted(
        [*tool_message.tool_results, *patches],
        key=lambda r: order.get(r.tool_call_id, len(order)),
    )
    return replace(tool_message, tool_results=results)
