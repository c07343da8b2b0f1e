"""The OpenAI chat format: what litellm sends to every provider, and reads back.

Why a module of its own: ``Message`` is the conversation as Sagents stores it, and
litellm speaks only OpenAI's chat format, so this is the one edge where the two meet.
The shapes differ in one place that matters. A Sagents ``tool`` message carries every
result of one assistant message's tool calls; OpenAI spreads them over several
``{"role": "tool"}`` messages. ``message_to_openai`` unfolds a tool message into those,
and ``messages_from_openai`` folds consecutive ones back, so that the round trip is
lossless: ``messages_from_openai(messages_to_openai(m)) == m``.

Thinking travels as ``reasoning_content`` (plus ``thinking_blocks`` when signed), images
and files as data URLs, and tool-call arguments as JSON text; arguments that are not a
JSON object are kept raw (``parse_tool_arguments``) so the model can be told and retry.

A reply that was cut off (stop reason ``cancelled`` or ``stream_error``) is sent with
a note after its text (``INTERRUPTED_NOTES``), so that the next call's model knows its
previous answer is unfinished and why; reading it back strips the note and restores
the stop reason. An assistant message with neither text nor tool calls is sent with
``""`` as content, never ``null``, which providers refuse.
"""

from __future__ import annotations

import json
from typing import Any

from .limits import (
    MAX_ARGUMENT_CHARS,
    MAX_ARGUMENT_DEPTH,
    json_text_too_deep,
    value_bounds_problem,
)
from .messages import (
    ROLES,
    ContentPart,
    Message,
    StopReason,
    ToolCall,
    ToolResult,
    refused_arguments,
)

#: What the model reads after the text of a reply that did not finish.
INTERRUPTED_NOTES: dict[StopReason, str] = {
    "cancelled": (
        "[This reply was interrupted: the user stopped it before it finished.]"
    ),
    "stream_error": (
        "[This reply was interrupted: the connection to the model broke before it "
        "finished.]"
    ),
}

__all__ = [
    "INTERRUPTED_NOTES",
    "message_to_openai",
    "messages_from_openai",
    "messages_to_openai",
    "parse_tool_arguments",
]


def message_to_openai(message: Message) -> list[dict[str, Any]]:
    """One message in OpenAI chat format (a tool message becomes several)."""
    if message.role == "tool":
        return [
            {
                "role": "tool",
                "tool_call_id": r.tool_call_id,
                "content": _tool_content_to_openai(r.content),
            }
            for r in message.tool_results
        ]
    if message.role not in ROLES:
        raise ValueError(f"Unknown message role {message.role!r}")
    out: dict[str, Any] = {"role": message.role}
    if message.role == "assistant":
        text = message.text
        note = INTERRUPTED_NOTES.get(message.status)
        if note is not None:
            out["content"] = f"{text}\n\n{note}" if text else note
        else:
            out["content"] = text or (None if message.tool_calls else "")
        thinking = [p for p in message.content if p.type == "thinking"]
        if thinking:
            out["reasoning_content"] = "".join(p.content for p in thinking)
            if any(p.options.get("signature") for p in thinking):
                out["thinking_blocks"] = [
                    {
                        "type": "thinking",
                        "thinking": p.content,
                        "signature": p.options.get("signature"),
                    }
                    for p in thinking
                ]
        if message.tool_calls:
            out["tool_calls"] = [
                {
                    "id": c.call_id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments_json()},
                }
                for c in message.tool_calls
            ]
    else:
        out["content"] = _content_to_openai(message.content)
    if message.name is not None:
        out["name"] = message.name
    return [out]


def messages_to_openai(messages: list[Message]) -> list[dict[str, Any]]:
    """A conversation in OpenAI chat format, as litellm takes it."""
    out: list[dict[str, Any]] = []
    for message in messages:
        out.extend(message_to_openai(message))
    return out


def messages_from_openai(items: list[dict[str, Any]]) -> list[Message]:
    """Read OpenAI chat-format messages; consecutive tool messages fold into one."""
    messages: list[Message] = []
    call_names: dict[str, str] = {}
    for item in items:
        role = item.get("role")
        if role == "tool":
            call_id = item["tool_call_id"]
            result = ToolResult(
                tool_call_id=call_id,
                name=item.get("name") or call_names.get(call_id, ""),
                content=_tool_content_from_openai(item.get("content")),
            )
            if messages and messages[-1].role == "tool":
                messages[-1].tool_results.append(result)
            else:
                messages.append(Message.tool([result]))
            continue
        if role not in ROLES:
            raise ValueError(f"Unknown message role {role!r}")
        if role == "assistant":
            message = _assistant_from_openai(item)
            call_names.update({c.call_id: c.name for c in message.tool_calls})
        else:
            message = Message(
                role=role, content=_content_from_openai(item.get("content"))
            )
        message.name = item.get("name")
        messages.append(message)
    return messages


def parse_tool_arguments(
    raw: str | dict[str, Any] | None,
) -> tuple[dict[str, Any], str | None]:
    """Arguments as a dict, plus the raw text when it was not a JSON object.

    Arguments longer than ``MAX_ARGUMENT_CHARS`` or nested deeper than
    ``MAX_ARGUMENT_DEPTH`` are refused before parsing (the nesting is measured
    without recursion): the raw text is then a short note saying why
    (``ToolCall.refusal``), and executing the call tells the model.
    """
    if isinstance(raw, dict):
        problem = value_bounds_problem(raw)
        return (raw, None) if problem is None else ({}, refused_arguments(problem))
    if raw is None or raw.strip() == "":
        return {}, None
    if len(raw) > MAX_ARGUMENT_CHARS:
        return {}, refused_arguments(
            f"they are {len(raw)} characters long; the limit is {MAX_ARGUMENT_CHARS}"
        )
    if json_text_too_deep(raw, MAX_ARGUMENT_DEPTH):
        return {}, refused_arguments(
            f"they nest deeper than {MAX_ARGUMENT_DEPTH} levels"
        )
    try:
        value = json.loads(raw)
    except ValueError:
        return {}, raw
    except RecursionError:  # pragma: no cover - the depth check comes first
        return {}, refused_arguments("they nest too deep")
    if isinstance(value, dict):
        return value, None
    return {}, raw


def _assistant_from_openai(item: dict[str, Any]) -> Message:
    parts: list[ContentPart] = []
    blocks = item.get("thinking_blocks")
    if blocks:
        parts.extend(
            ContentPart.thinking(b.get("thinking", ""), signature=b.get("signature"))
            for b in blocks
        )
    elif item.get("reasoning_content"):
        parts.append(ContentPart.thinking(item["reasoning_content"]))
    content = item.get("content")
    status: StopReason = "complete"
    if isinstance(content, str):
        for reason, note in INTERRUPTED_NOTES.items():
            if content == note or content.endswith(f"\n\n{note}"):
                content = content[: -len(note)].removesuffix("\n\n")
                status = reason
                break
    parts.extend(_content_from_openai(content))
    calls = []
    for call in item.get("tool_calls") or ():
        function = call.get("function") or {}
        arguments, raw = parse_tool_arguments(function.get("arguments"))
        calls.append(
            ToolCall(
                call_id=call["id"],
                name=function.get("name", ""),
                arguments=arguments,
                raw_arguments=raw,
            )
        )
    return Message(role="assistant", content=parts, tool_calls=calls, status=status)


def _content_to_openai(parts: list[ContentPart]) -> str | list[dict[str, Any]]:
    if len(parts) == 1 and parts[0].type == "text":
        return parts[0].content
    if not parts:
        return ""
    out: list[dict[str, Any]] = []
    for part in parts:
        if part.type == "text":
            out.append({"type": "text", "text": part.content})
        elif part.type == "image":
            url = (
                part.content
                if part.options.get("url")
                else f"data:{part.options.get('media', 'image/png')};base64,{part.content}"
            )
            image: dict[str, Any] = {"url": url}
            if part.options.get("detail"):
                image["detail"] = part.options["detail"]
            out.append({"type": "image_url", "image_url": image})
        elif part.type == "file":
            file: dict[str, Any] = {
                "file_data": f"data:{part.options.get('media')};base64,{part.content}"
            }
            if part.options.get("filename"):
                file["filename"] = part.options["filename"]
            out.append({"type": "file", "file": file})
        elif part.type != "thinking":
            raise ValueError(f"Unknown content part type {part.type!r}")
        # Thinking in a user/system message has no OpenAI form; it is dropped.
    return out


def _content_from_openai(content: Any) -> list[ContentPart]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [ContentPart.text(content)]
    parts: list[ContentPart] = []
    for item in content:
        kind = item.get("type")
        if kind == "text":
            parts.append(ContentPart.text(item.get("text", "")))
        elif kind == "image_url":
            image = item.get("image_url") or {}
            if not isinstance(image, dict):  # the bare-string form
                image = {"url": image}
            url = image.get("url", "")
            split = _split_data_url(url)
            part = (
                ContentPart.image(split[1], media=split[0], detail=image.get("detail"))
                if split is not None
                else ContentPart.image_url(url, detail=image.get("detail"))
            )
            parts.append(part)
        elif kind == "file":
            file = item.get("file") or {}
            media, data = _split_data_url(file.get("file_data", "")) or ("", "")
            parts.append(
                ContentPart.file(data, media=media, filename=file.get("filename"))
            )
        elif kind in ("thinking", "reasoning"):
            parts.append(ContentPart.thinking(item.get(kind) or item.get("text", "")))
        else:
            raise ValueError(f"Unknown content part type {kind!r}")
    return parts


def _tool_content_to_openai(
    content: str | list[ContentPart],
) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    return _content_to_openai(content)


def _tool_content_from_openai(content: Any) -> str | list[ContentPart]:
    if content is None or isinstance(content, str):
        return content or ""
    return _content_from_openai(content)


def _split_data_url(url: str) -> tuple[str, str] | None:
    """``(media, base64 data)`` of a data URL; None for any other URL."""
    if not url.startswith("data:") or ";base64," not in url:
        return None
    head, data = url[5:].split(";base64,", 1)
    return head, data
