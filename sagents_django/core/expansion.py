"""Tool results that expand into conversation messages (Sagents v0.14.2).

A tool that returns ``ToolOutput(summary=..., messages=[...])`` (or a ``ToolResult``
with ``expand_messages``) gives the model a short tool result, and its material as
messages of the roles it chose: an image or a document as a user message, say,
which many providers refuse inside a tool result. The messages join the history
after all of the batch's tool results (a provider wants the results right after the
assistant's calls) as the first step of the next loop iteration, so the model reads
them on its very next call in the same turn; tools approved on resume expand the
same way. They stay in the state, marked ``metadata["expanded_from"]`` (the call's
id), fire no callback and produce no display rows.

Until then the messages wait on the result (and are stored with it), so a pause in
the same batch keeps them for the resume. A turn that ends right after its tools
(``until_tool``, a pause that is abandoned) never expands them: the next ``execute``
drops them, as Sagents does.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from .messages import EXPANDED_FROM, Message

if TYPE_CHECKING:
    from .modes import AgentResult, Execution
    from .state import State


async def expand_tool_results(ex: Execution) -> AgentResult | None:
    """The step: expand the pending results of the batch that ran last."""
    found = _last_batch(ex.state.messages)
    if found is None:
        return None
    index, message = found
    if any(r.is_interrupt for r in message.tool_results):
        return None  # a call of the batch still waits; the resume expands
    expanded = [
        replace(m, metadata={**m.metadata, EXPANDED_FROM: r.tool_call_id})
        for r in message.tool_results
        for m in r.expand_messages
    ]
    messages = ex.state.messages
    ex.state = ex.state.set_messages(
        [*messages[:index], _settled(message), *messages[index + 1 :], *expanded]
    )
    return None


def drop_pending_expansions(state: State) -> State:
    """``state`` without the expansions an earlier turn left unread."""
    found = _last_batch(state.messages)
    if found is None:
        return state
    index, message = found
    messages = state.messages
    return state.set_messages(
        [*messages[:index], _settled(message), *messages[index + 1 :]]
    )


def _last_batch(messages: list[Message]) -> tuple[int, Message] | None:
    """The last tool message (after the last assistant one) when it has pending
    expansions: expansions are cleared once done, so no earlier one can have any."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == "assistant":
            return None
        if message.role == "tool":
            if any(r.expand_messages for r in message.tool_results):
                return index, message
            return None
    return None


def _settled(message: Message) -> Message:
    return replace(
        message,
        tool_results=[
            replace(r, expand_messages=[]) if r.expand_messages else r
            for r in message.tool_results
        ],
    )
