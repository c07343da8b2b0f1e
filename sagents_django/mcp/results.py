"""A tool result from an MCP server, as the text the model reads.

The text is untrusted: it is returned as a plain string (the pages escape it like
any tool result), already bounded by the guard. Images, audio and binary resources
are not passed on; the model reads what they were and how large.
"""

from __future__ import annotations

import json
from typing import Any

from sagents_django.core.limits import MAX_TOOL_RESULT_CHARS

from .guard import OMITTED, TRUNCATED

TEXT_BUDGET = MAX_TOOL_RESULT_CHARS - 1000
"""Characters of a result's text kept (the guard cuts there), leaving room for the
notes saying what was cut within the result limit."""


def result_text(result: Any) -> str:
    """The text of a ``CallToolResult`` (its structured content when it has no
    content blocks)."""
    parts = [_block(block) for block in result.content]
    if not parts and result.structured_content is not None:
        parts.append(_json(result.structured_content))
    return "\n".join(part for part in parts if part)


def _block(block: Any) -> str:
    kind = getattr(block, "type", None)
    meta = getattr(block, "meta", None) or {}
    if kind == "text":
        return _text(block.text, meta)
    if kind in ("image", "audio"):
        size = meta.get(OMITTED, len(block.data))
        return f"[{kind} ({block.mime_type}), {size} characters of base64, not shown]"
    if kind == "resource_link":
        name = f" ({block.name})" if getattr(block, "name", None) else ""
        return f"[resource link: {block.uri}{name}]"
    if kind == "resource":
        resource = block.resource
        resource_meta = getattr(resource, "meta", None) or {}
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return f"[resource {resource.uri}]\n{_text(text, resource_meta)}"
        size = resource_meta.get(OMITTED, len(getattr(resource, "blob", "")))
        mime = getattr(resource, "mime_type", None) or "binary"
        return (
            f"[resource {resource.uri} ({mime}), {size} characters of base64, "
            "not shown]"
        )
    return f"[{kind or 'unknown'} content, not shown]"


def _text(text: str, meta: Any) -> str:
    was = meta.get(TRUNCATED) if isinstance(meta, dict) else None
    if not isinstance(was, int):
        return text
    return (
        f"{text}\n\n[Result truncated: it was {was} characters; the limit is "
        f"{MAX_TOOL_RESULT_CHARS}. Ask for less at a time.]"
    )


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return "[structured content that cannot be shown as text]"
