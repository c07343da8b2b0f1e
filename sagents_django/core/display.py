"""DisplayHelpers: what of a message a person sees, as JSON-ready items.

``extract_display_items(message)`` returns one dict per displayable piece, in display
order; the caller numbers them (sequence 0, 1, 2...) when persisting. Messages a tool
result expanded into (``Message.expanded_from``) are for the model only and give
none::

    {"type": "text" | "thinking" | "tool_call" | "tool_result",
     "message_type": "user" | "assistant" | "tool" | "system",
     "content": {...}}   # string keys, ready for a JSON column
"""

from __future__ import annotations

from typing import Any

from .messages import Message

DISPLAY_METADATA = "display_metadata"
"""The message metadata key holding what ``transform_display_message`` hooks added
or changed: copied onto the message's display rows (``Agent.display_message``)."""


def extract_display_items(message: Message) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if message.expanded_from is not None:
        return items
    role = message.role
    for part in message.content:
        if part.type in ("text", "thinking") and part.content:
            items.append(
                {
                    "type": part.type,
                    "message_type": role,
                    "content": {"text": part.content},
                }
            )
    for call in message.tool_calls:
        items.append(
            {
                "type": "tool_call",
                "message_type": role,
                "content": {
                    "call_id": call.call_id,
                    "name": call.name,
                    "arguments": call.arguments,
                },
            }
        )
    for result in message.tool_results:
        items.append(
            {
                "type": "tool_result",
                "message_type": role,
                "content": {
                    "tool_call_id": result.tool_call_id,
                    "name": result.name,
                    "content": result.text,
                    "is_error": result.is_error,
                },
            }
        )
    return items
