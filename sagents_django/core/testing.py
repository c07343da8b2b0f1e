"""Test helpers for users' own tests: a scripted model and a strict format check.

``ScriptedModel`` streams scripted assistant messages through the real chain (deltas,
assembly, callbacks) without HTTP, so a test or a benchmark measures everything but
the network::

    model = ScriptedModel([
        Message.assistant(tool_calls=[ToolCall(call_id="1", name="add", arguments={"a": 1})]),
        "The sum is 3.",
    ])
    agent = Agent(model=model, tools=[add])

``validate_openai_messages(state)`` raises when a conversation is not one OpenAI's
chat completions API accepts (a tool call without its result, an assistant message
with neither content nor tool calls...): assert it after the turns your tests run.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any

from .exceptions import LLMError
from .llm import ModelRequest
from .messages import Message, MessageDelta, StopReason, TokenUsage, ToolCallDelta
from .openai_format import messages_to_openai
from .state import State

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


# The OpenAI chat format, checked strictly ------------------------------------------
_KEYS: dict[str, frozenset[str]] = {
    "system": frozenset(("role", "content", "name")),
    "developer": frozenset(("role", "content", "name")),
    "user": frozenset(("role", "content", "name")),
    # reasoning_content / thinking_blocks: how litellm carries thinking back.
    "assistant": frozenset(
        (
            "role",
            "content",
            "name",
            "tool_calls",
            "refusal",
            "reasoning_content",
            "thinking_blocks",
        )
    ),
    "tool": frozenset(("role", "content", "tool_call_id")),
}
_PARTS: dict[str, frozenset[str]] = {
    "system": frozenset(("text",)),
    "developer": frozenset(("text",)),
    "user": frozenset(("text", "image_url", "input_audio", "file")),
    "assistant": frozenset(("text", "refusal")),
    "tool": frozenset(("text",)),
}
_PARTICIPANT = re.compile(r"^[^\s<|\\/>]+$")
_FUNCTION = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def validate_openai_messages(
    messages: State | Sequence[Message] | Sequence[dict[str, Any]],
) -> None:
    """Raise ``ValueError`` listing every way ``messages`` breaks OpenAI's format.

    Takes a ``State``, ``Message`` objects (converted as the agent sends them) or
    OpenAI-format dicts. Checked: roles and their keys, content shapes, names, tool
    calls (ids unique, ``type: function``, a function name and string arguments), an
    assistant message with ``null`` content must have tool calls, and every tool call
    is answered by exactly one tool message, in the messages right after its call.
    """
    if isinstance(messages, State):
        messages = messages.messages
    given = list(messages)
    converted = [m for m in given if isinstance(m, Message)]
    items: list[Any] = (
        messages_to_openai(converted)
        if given and len(converted) == len(given)
        else given
    )
    problems: list[str] = []
    if not items:
        problems.append("there are no messages")
    seen_ids: set[str] = set()
    waiting: dict[str, int] = {}  # call id -> index of the assistant that made it
    for index, item in enumerate(items):
        where = f"messages[{index}]"
        if not isinstance(item, dict):
            problems.append(f"{where} is not an object: {item!r}")
            continue
        role = item.get("role")
        if role not in _KEYS:
            problems.append(f"{where} has an unknown role {role!r}")
            continue
        where = f"{where} ({role})"
        unknown = sorted(set(item) - _KEYS[role])
        if unknown:
            problems.append(f"{where} has unknown keys {unknown}")
        name = item.get("name")
        if name is not None and not (
            isinstance(name, str) and _PARTICIPANT.match(name)
        ):
            problems.append(f"{where} has a bad name {name!r}")
        if role == "tool":
            call_id = item.get("tool_call_id")
            if call_id in waiting:
                del waiting[call_id]
            else:
                problems.append(
                    f"{where} answers {call_id!r}, which is not a call of the "
                    "assistant message right before"
                )
        elif waiting:
            problems.extend(_unanswered(waiting))
            waiting = {}
        _check_content(item, role, where, problems)
        if role == "assistant":
            for call_id in _check_calls(item, where, seen_ids, problems):
                waiting[call_id] = index
    problems.extend(_unanswered(waiting))
    if problems:
        raise ValueError("Not a valid OpenAI conversation:\n- " + "\n- ".join(problems))


def _unanswered(waiting: dict[str, int]) -> list[str]:
    return [
        f"messages[{index}] (assistant): tool call {call_id!r} has no tool message "
        "right after it"
        for call_id, index in waiting.items()
    ]


def _check_content(
    item: dict[str, Any], role: str, where: str, problems: list[str]
) -> None:
    if "content" not in item:
        problems.append(f"{where} has no content key")
        return
    content = item["content"]
    if content is None:
        if role != "assistant" or not item.get("tool_calls"):
            problems.append(f"{where} has null content and no tool_calls")
        return
    if isinstance(content, str):
        return
    if not isinstance(content, list) or not content:
        problems.append(f"{where} content must be a string or a non-empty list")
        return
    for position, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in _PARTS[role]:
            problems.append(f"{where} content[{position}] has a bad type {kind!r}")
        elif kind in ("text", "refusal") and not isinstance(part.get(kind), str):
            problems.append(f"{where} content[{position}] has no {kind} string")
        elif kind == "image_url" and not isinstance(
            (part.get("image_url") or {}).get("url"), str
        ):
            problems.append(f"{where} content[{position}] has no image url")


def _check_calls(
    item: dict[str, Any], where: str, seen_ids: set[str], problems: list[str]
) -> list[str]:
    calls = item.get("tool_calls")
    if calls is None:
        return []
    if not isinstance(calls, list) or not calls:
        problems.append(f"{where} tool_calls must be a non-empty list")
        return []
    ids = []
    for position, call in enumerate(calls):
        at = f"{where} tool_calls[{position}]"
        if not isinstance(call, dict):
            problems.append(f"{at} is not an object")
            continue
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            problems.append(f"{at} has no id")
            continue
        if call_id in seen_ids:
            problems.append(f"{at} reuses the id {call_id!r}")
        seen_ids.add(call_id)
        ids.append(call_id)
        if call.get("type") != "function":
            problems.append(f"{at} has type {call.get('type')!r}, not 'function'")
        function = call.get("function")
        if not isinstance(function, dict):
            problems.append(f"{at} has no function")
            continue
        name = function.get("name")
        if not isinstance(name, str) or not _FUNCTION.match(name):
            problems.append(f"{at} has a bad function name {name!r}")
        if not isinstance(function.get("arguments"), str):
            problems.append(f"{at} arguments must be a JSON string")
    return ids
