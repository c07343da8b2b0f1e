"""Streaming deltas: the pieces of an assistant message as a provider streams them.

The chain assembles them into a ``Message``; callbacks (``on_llm_new_delta``) and the
events a UI follows receive them as they come.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .messages import StopReason


@dataclass(kw_only=True, slots=True)
class ToolCallDelta:
    """A fragment of a streamed tool call; fragments with one ``index`` form a call."""

    index: int
    call_id: str | None = None
    name: str | None = None
    arguments: str = ""
    """A piece of the JSON arguments text."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "call_id": self.call_id,
            "name": self.name,
            "arguments": self.arguments,
        }


@dataclass(kw_only=True, slots=True)
class MessageDelta:
    """A piece of a streamed assistant message."""

    content: str = ""
    """A piece of text."""
    thinking: str = ""
    """A piece of the model's thinking."""
    tool_calls: list[ToolCallDelta] | None = None
    status: StopReason | None = None
    """Set on the last delta of a message."""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.content:
            data["content"] = self.content
        if self.thinking:
            data["thinking"] = self.thinking
        if self.tool_calls:
            data["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.status is not None:
            data["status"] = self.status
        return data
