"""Server-sent events: AG-UI events as ``data:`` lines, our ``seq`` as ``id:``.

An event of ours can become several AG-UI events; only the last of them carries
the ``id`` (a browser's ``EventSource`` keeps the last ``id`` it saw, and sends it
back as ``Last-Event-ID``): an id means "everything up to this event of ours".
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Final

MEDIA_TYPE: Final = "text/event-stream"
KEEPALIVE: Final = b": keep-alive\n\n"


def frame(seq: int | None, events: list[dict[str, Any]]) -> bytes:
    """The SSE text of one batch (a keep-alive comment when it is empty)."""
    if not events:
        return KEEPALIVE if seq is None else f"id: {seq}\n\n".encode()
    parts = []
    last = len(events) - 1
    for i, event in enumerate(events):
        data = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
        if i == last and seq is not None:
            parts.append(f"id: {seq}\ndata: {data}\n\n")
        else:
            parts.append(f"data: {data}\n\n")
    return "".join(parts).encode()


async def encode(
    batches: AsyncIterator[tuple[int | None, list[dict[str, Any]]]],
) -> AsyncIterator[bytes]:
    async for seq, events in batches:
        yield frame(seq, events)
