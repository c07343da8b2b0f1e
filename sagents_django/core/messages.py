"""Messages: the conversation as the model sees it.

One ``Message`` per turn of a role. Content is always a list of ``ContentPart`` (text,
thinking, image, file); a plain string given to a constructor becomes one text part. A
``tool`` message carries every result of one assistant message's tool calls, as Sagents
does (the OpenAI format spreads those over several messages; ``openai_format`` folds
and unfolds them).

Two JSON edges: ``to_dict``/``from_dict`` beside the classes (what is stored, lossless)
and ``to_openai`` (what litellm sends to a provider), which delegates to
``openai_format``; its ``messages_to_openai``, ``messages_from_openai`` and
``parse_tool_arguments`` are importable from here too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

# The streaming pieces live in ``deltas``; importable from here as before.
from .deltas import MessageDelta as MessageDelta
from .deltas import ToolCallDelta as ToolCallDelta
from .limits import MAX_MESSAGE_BYTES, value_bounds_problem

Role = Literal["system", "user", "assistant", "tool"]
PartType = Literal["text", "thinking", "image", "file"]
StopReason = Literal[
    "complete", "length", "cancelled", "content_filtered", "stream_error"
]

ROLES: frozenset[str] = frozenset(("system", "user", "assistant", "tool"))
EXPANDED_FROM = "expanded_from"
"""``Message.metadata`` key of a message a tool result expanded into (the call's id)."""
PART_TYPES: frozenset[str] = frozenset(("text", "thinking", "image", "file"))
STOP_REASONS: frozenset[str] = frozenset(
    ("complete", "length", "cancelled", "content_filtered", "stream_error")
)


@dataclass(kw_only=True, slots=True)
class ContentPart:
    """One piece of a message's content."""

    type: PartType
    """What the part holds: text, the model's thinking, an image or a file."""
    content: str
    """Text for text and thinking; base64 data or a URL (``options["url"]``) otherwise."""
    options: dict[str, Any] = field(default_factory=dict)
    """Extras: ``media`` (MIME type), ``filename``, ``detail``, ``signature`` (thinking)."""

    @classmethod
    def text(cls, text: str) -> ContentPart:
        return cls(type="text", content=text)

    @classmethod
    def thinking(cls, text: str, *, signature: str | None = None) -> ContentPart:
        return cls(
            type="thinking",
            content=text,
            options={"signature": signature} if signature else {},
        )

    @classmethod
    def image(
        cls, data: str, *, media: str = "image/png", detail: str | None = None
    ) -> ContentPart:
        options: dict[str, Any] = {"media": media}
        if detail:
            options["detail"] = detail
        return cls(type="image", content=data, options=options)

    @classmethod
    def image_url(cls, url: str, *, detail: str | None = None) -> ContentPart:
        options: dict[str, Any] = {"url": True}
        if detail:
            options["detail"] = detail
        return cls(type="image", content=url, options=options)

    @classmethod
    def file(cls, data: str, *, media: str, filename: str | None = None) -> ContentPart:
        options: dict[str, Any] = {"media": media}
        if filename:
            options["filename"] = filename
        return cls(type="file", content=data, options=options)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.type, "content": self.content}
        if self.options:
            data["options"] = self.options
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ContentPart:
        _check(
            data.get("type") in PART_TYPES,
            f"Unknown content part type {data.get('type')!r}",
        )
        _check(
            isinstance(data["content"], str), "Content part content must be a string"
        )
        options = data.get("options") or {}
        _check(isinstance(options, dict), "Content part options must be a dict")
        return cls(type=data["type"], content=data["content"], options=options)


@dataclass(kw_only=True, slots=True)
class ToolCall:
    """A model's request to call one tool."""

    call_id: str
    """The provider's id, echoed back by the matching ``ToolResult``."""
    name: str
    """The tool's name."""
    arguments: dict[str, Any] = field(default_factory=dict)
    """The parsed JSON arguments."""
    raw_arguments: str | None = None
    """The text the model sent when it was not a JSON object (then ``arguments`` is
    empty and executing the call yields an error result the model can act on), or
    a note saying why its arguments were refused (see ``refusal``)."""

    def __post_init__(self) -> None:
        # Arguments too deep or too large for a stored state are replaced, however
        # the call was made (a model, a person's edit, code), so that what a turn
        # holds can always be saved; the model reads why in the call's result.
        if self.raw_arguments is None and self.arguments:
            problem = value_bounds_problem(self.arguments)
            if problem is not None:
                self.arguments = {}
                self.raw_arguments = refused_arguments(problem)

    @property
    def refusal(self) -> str | None:
        """Why the arguments were refused (too deep, too large), if they were."""
        raw = self.raw_arguments
        if raw is not None and raw.startswith(_REFUSED) and raw.endswith("]"):
            return raw[len(_REFUSED) : -1]
        return None

    def arguments_json(self) -> str:
        if self.raw_arguments is not None:
            return self.raw_arguments
        return json.dumps(self.arguments, ensure_ascii=False)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "call_id": self.call_id,
            "name": self.name,
            "arguments": self.arguments,
        }
        if self.raw_arguments is not None:
            data["raw_arguments"] = self.raw_arguments
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        arguments = data.get("arguments") or {}
        raw = data.get("raw_arguments")
        _check(
            isinstance(data["call_id"], str) and isinstance(data["name"], str),
            "Tool call call_id and name must be strings",
        )
        _check(isinstance(arguments, dict), "Tool call arguments must be a dict")
        _check(
            raw is None or isinstance(raw, str),
            "Tool call raw_arguments must be a string",
        )
        return cls(
            call_id=data["call_id"],
            name=data["name"],
            arguments=arguments,
            raw_arguments=raw,
        )


_REFUSED = "[arguments refused: "


def refused_arguments(problem: str) -> str:
    """What stands for refused arguments in ``ToolCall.raw_arguments``: short, so
    it can be stored and sent back to the provider with the assistant message."""
    return f"{_REFUSED}{problem}]"


@dataclass(kw_only=True, slots=True)
class ToolResult:
    """The outcome of one tool call, as the model will read it."""

    tool_call_id: str
    name: str
    content: str | list[ContentPart] = ""
    display_text: str | None = None
    """A short human label for the UI ("Writing notes.md")."""
    is_error: bool = False
    is_interrupt: bool = False
    """The call is paused waiting for a person (e.g. a sub-agent's approval)."""
    interrupt_data: dict[str, Any] | None = None
    """JSON data describing the pause; restored only if a middleware claims it."""
    processed_content: Any = None
    """In-process only (never serialized): e.g. a State update returned by the tool."""
    expand_messages: list[Message] = field(default_factory=list)
    """Messages this result expands into before the next model call (``ToolOutput``);
    emptied once they join the history (see ``core.expansion``)."""

    @property
    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(p.content for p in self.content if p.type == "text")

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "tool_call_id": self.tool_call_id,
            "name": self.name,
            "content": self.content
            if isinstance(self.content, str)
            else [p.to_dict() for p in self.content],
        }
        if self.display_text is not None:
            data["display_text"] = self.display_text
        if self.is_error:
            data["is_error"] = True
        if self.is_interrupt:
            data["is_interrupt"] = True
        if self.interrupt_data is not None:
            data["interrupt_data"] = self.interrupt_data
        if self.expand_messages:
            data["expand_messages"] = [m.to_dict() for m in self.expand_messages]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolResult:
        content = data.get("content", "")
        if isinstance(content, list):
            content = [ContentPart.from_dict(p) for p in content]
        _check(
            isinstance(content, str | list),
            "Tool result content must be a string or a list",
        )
        _check(
            isinstance(data["tool_call_id"], str) and isinstance(data["name"], str),
            "Tool result tool_call_id and name must be strings",
        )
        _check(
            data.get("display_text") is None or isinstance(data["display_text"], str),
            "Tool result display_text must be a string",
        )
        _check(
            data.get("interrupt_data") is None
            or isinstance(data["interrupt_data"], dict),
            "Tool result interrupt_data must be a dict",
        )
        expand = data.get("expand_messages") or []
        _check(isinstance(expand, list), "Tool result expand_messages must be a list")
        return cls(
            tool_call_id=data["tool_call_id"],
            name=data["name"],
            content=content,
            display_text=data.get("display_text"),
            is_error=bool(data.get("is_error", False)),
            is_interrupt=bool(data.get("is_interrupt", False)),
            interrupt_data=data.get("interrupt_data"),
            expand_messages=[Message.from_dict(m) for m in expand],
        )


@dataclass(kw_only=True, slots=True)
class TokenUsage:
    """Tokens one model call consumed."""

    input: int = 0
    output: int = 0
    cached_input: int = 0
    reasoning: int = 0

    @property
    def total(self) -> int:
        return self.input + self.output

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            input=self.input + other.input,
            output=self.output + other.output,
            cached_input=self.cached_input + other.cached_input,
            reasoning=self.reasoning + other.reasoning,
        )

    def to_dict(self) -> dict[str, int]:
        return {
            "input": self.input,
            "output": self.output,
            "cached_input": self.cached_input,
            "reasoning": self.reasoning,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TokenUsage:
        return cls(**{k: int(data.get(k) or 0) for k in cls.__dataclass_fields__})

    @classmethod
    def from_openai(cls, usage: Any) -> TokenUsage:
        """Read an OpenAI-style usage object or dict (litellm's ``Usage`` included)."""

        def get(obj: Any, key: str) -> Any:
            return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)

        prompt_details = get(usage, "prompt_tokens_details")
        output_details = get(usage, "completion_tokens_details")
        return cls(
            input=int(get(usage, "prompt_tokens") or 0),
            output=int(get(usage, "completion_tokens") or 0),
            cached_input=int(
                (prompt_details and get(prompt_details, "cached_tokens")) or 0
            ),
            reasoning=int(
                (output_details and get(output_details, "reasoning_tokens")) or 0
            ),
        )


@dataclass(kw_only=True, slots=True)
class Message:
    """One message of a conversation."""

    role: Role
    content: list[ContentPart] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    """Assistant messages only: the tools the model asked for."""
    tool_results: list[ToolResult] = field(default_factory=list)
    """Tool messages only: one result per call of the preceding assistant message."""
    status: StopReason = "complete"
    """Why the message ended (the stop reason). Partial text of a broken or cancelled
    stream is kept, marked ``stream_error`` or ``cancelled``."""
    name: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    """Free JSON data; the chain stores the call's token usage under ``"usage"``."""
    _wire: list[dict[str, Any]] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    """``to_openai``'s answer, kept: a history of a thousand messages is converted
    once, not at every model call. A message is treated as immutable (``replace``
    makes a new one, without it)."""
    _tokens: tuple[str, int] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    """The last token count of this message and the method that counted it
    (``tokens.TokenCache``)."""

    def __post_init__(self) -> None:
        if isinstance(self.content, str):
            self.content = [ContentPart.text(self.content)] if self.content else []

    # Constructors -----------------------------------------------------------------
    @classmethod
    def system(cls, text: str) -> Message:
        return cls(role="system", content=_parts(text))

    @classmethod
    def user(
        cls, content: str | list[ContentPart], *, name: str | None = None
    ) -> Message:
        return cls(role="user", content=_parts(content), name=name)

    @classmethod
    def assistant(
        cls,
        content: str | list[ContentPart] = "",
        *,
        tool_calls: list[ToolCall] | None = None,
        status: StopReason = "complete",
    ) -> Message:
        return cls(
            role="assistant",
            content=_parts(content),
            tool_calls=tool_calls or [],
            status=status,
        )

    @classmethod
    def tool(cls, results: list[ToolResult]) -> Message:
        return cls(role="tool", tool_results=list(results))

    # Reading ----------------------------------------------------------------------
    @property
    def text(self) -> str:
        """The concatenated text parts (thinking excluded)."""
        return "".join(p.content for p in self.content if p.type == "text")

    @property
    def thinking(self) -> str:
        return "".join(p.content for p in self.content if p.type == "thinking")

    @property
    def stop_reason(self) -> StopReason:
        return self.status

    @property
    def expanded_from(self) -> str | None:
        """The tool call whose result this message was expanded from, if any."""
        value = self.metadata.get(EXPANDED_FROM)
        return value if isinstance(value, str) else None

    # Stored JSON ------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"role": self.role}
        if self.content:
            data["content"] = [p.to_dict() for p in self.content]
        if self.tool_calls:
            data["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.tool_results:
            data["tool_results"] = [r.to_dict() for r in self.tool_results]
        if self.status != "complete":
            data["status"] = self.status
        if self.name is not None:
            data["name"] = self.name
        if self.metadata:
            data["metadata"] = self.metadata
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        _check(data.get("role") in ROLES, f"Unknown message role {data.get('role')!r}")
        _check(data.get("status", "complete") in STOP_REASONS, "Unknown message status")
        _check(
            data.get("name") is None or isinstance(data["name"], str),
            "Bad message name",
        )
        _check(
            isinstance(data.get("metadata") or {}, dict),
            "Message metadata must be a dict",
        )
        for key in ("content", "tool_calls", "tool_results"):
            _check(
                isinstance(data.get(key) or [], list), f"Message {key} must be a list"
            )
        return cls(
            role=data["role"],
            content=[ContentPart.from_dict(p) for p in data.get("content") or ()],
            tool_calls=[ToolCall.from_dict(c) for c in data.get("tool_calls") or ()],
            tool_results=[
                ToolResult.from_dict(r) for r in data.get("tool_results") or ()
            ],
            status=data.get("status", "complete"),
            name=data.get("name"),
            metadata=data.get("metadata") or {},
        )

    # OpenAI format ----------------------------------------------------------------
    def to_openai(self) -> list[dict[str, Any]]:
        """This message in OpenAI chat format (a tool message becomes several)."""
        wire = self._wire
        if wire is None:
            # Imported here: openai_format imports this module's classes.
            from .openai_format import message_to_openai

            wire = self._wire = message_to_openai(self)
        return wire


def _parts(content: str | list[ContentPart]) -> list[ContentPart]:
    """A constructor's content as parts: a string is one text part (none if empty)."""
    if isinstance(content, str):
        return [ContentPart.text(content)] if content else []
    return content


def message_size_problem(
    message: Message, *, limit: int = MAX_MESSAGE_BYTES
) -> str | None:
    """Why ``message`` is too large to add to a conversation, else None: its stored
    JSON is over ``limit`` UTF-8 bytes (``limits.MAX_MESSAGE_BYTES``). For checks
    before a turn, so an oversized message is refused before any model call."""
    chars = sum(len(p.content) for p in message.content)
    if chars > limit:  # over on its characters alone: no need to encode it
        return (
            f"The message is at least {chars} bytes as stored JSON; the limit is "
            f"{limit}."
        )
    text = json.dumps(message.to_dict(), ensure_ascii=False, default=str)
    size = len(text.encode("utf-8", "surrogatepass"))
    if size <= limit:
        return None
    return f"The message is {size} bytes as stored JSON; the limit is {limit}."


def _check(condition: bool, problem: str) -> None:
    if not condition:
        raise ValueError(problem)
