"""Test doubles for users' own tests: an in-process model that replies from a script.

``ScriptedModel`` streams scripted assistant messages through the real chain (deltas,
assembly, callbacks) without HTTP, so a test or a benchmark measures everything but
the network::

    model = ScriptedModel([
        Message.assistant(tool_calls=[ToolCall(call_id="1", name="add", arguments={"a": 1})]),
        "The sum is 3.",
    ])
    agent = Agent(model=model, tools=[add])
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from .exceptions import LLMError
from .llm import ModelRequest
from .messages import Message, MessageDelta, StopReason, TokenUsage, ToolCallDelta

Reply = Message | str | LLMError | Callable[[ModelRequest], "Message | str"]


class ScriptedModel:
    """A model that answers each request with the next scripted reply."""

    max_retries = 0
    retry_delay = 0.0
    stream_idle_timeout = None

    def __init__(
        self,
        replies: Iterable[Reply],
        *,
        name: str = "scripted",
        chunk_size: int | None = None,
        repeat_last: bool = False,
        usage: TokenUsage | None = None,
    ) -> None:
        self.name = name
        self.replies = list(replies)
        self.chunk_size = chunk_size
        """Split text into pieces of this many characters (None: one piece)."""
        self.repeat_last = repeat_last
        self.usage = usage
        self.requests: list[ModelRequest] = []

    def request(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> ModelRequest:
        return ModelRequest(model_name=self.name, messages=messages, tools=tools)

    def _next(self, request: ModelRequest) -> Message | LLMError:
        if not self.replies:
            return LLMError(f"ScriptedModel {self.name!r} has no replies left")
        reply = (
            self.replies[0]
            if self.repeat_last and len(self.replies) == 1
            else self.replies.pop(0)
        )
        if callable(reply) and not isinstance(reply, Message):
            reply = reply(request)
        if isinstance(reply, str):
            reply = Message.assistant(reply)
        return reply

    async def stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        self.requests.append(request)
        reply = self._next(request)
        if isinstance(reply, LLMError):
            raise reply
        for delta in message_deltas(reply, chunk_size=self.chunk_size):
            yield delta
        if self.usage is not None:
            yield self.usage


def message_deltas(
    message: Message, *, chunk_size: int | None = None
) -> list[MessageDelta]:
    """The deltas a provider would stream for ``message``."""
    deltas: list[MessageDelta] = []
    if message.thinking:
        deltas.append(MessageDelta(thinking=message.thinking))
    text = message.text
    step = chunk_size or max(len(text), 1)
    deltas.extend(
        MessageDelta(content=text[i : i + step]) for i in range(0, len(text), step)
    )
    for index, call in enumerate(message.tool_calls):
        arguments = (
            call.raw_arguments
            if call.raw_arguments is not None
            else json.dumps(call.arguments)
        )
        deltas.append(
            MessageDelta(
                tool_calls=[
                    ToolCallDelta(
                        index=index,
                        call_id=call.call_id,
                        name=call.name,
                        arguments=arguments,
                    )
                ]
            )
        )
    status: StopReason = (
        message.status if message.status != "stream_error" else "complete"
    )
    deltas.append(MessageDelta(status=status))
    return deltas
