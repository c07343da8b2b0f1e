"""Messages a turn's tools queued (``ToolContext.queue_message``, ``core.outbox``),
kept on the run so that it answers them next, as it answers a person's message sent
during the turn (``admission``): the same ``QueuedMessage`` on the run's request, the
same follow-up run when it ends (``ending.start_queued``), the same limit of rounds
in a row.

They are written in the unit that records the step's tool results (with the calls'
journal entries), so a turn taken over after that step neither loses them nor, since
its calls do not run again, queues them twice.
"""

from __future__ import annotations

from typing import Any

from sagents_django import services
from sagents_django.core.outbox import QueuedFromTool
from sagents_django.models import DisplayMessage
from sagents_django.scope import Scope

from . import runs
from .lookup import require
from .publisher import Publisher, display_message_json
from .requests import QueuedMessage, RunRequest

NO_TEXT = "(a message queued by a tool)"
"""The transcript's text for a queued message with no text (an image alone)."""


def record_queued(
    scope: Scope, lease: runs.Lease, conversation_id: Any, items: list[QueuedFromTool]
) -> list[DisplayMessage]:
    """Queue ``items`` on the run ``lease`` holds (on a database thread, inside
    the caller's transaction); the display rows of those shown."""
    if not items:
        return []
    # The conversation, then the run: the order admission and the ending lock them.
    require(scope, conversation_id, lock=True)
    run = runs.held(lease).select_for_update().first()
    if run is None:
        raise runs.LeaseLost(f"Run {lease.run_id} was taken over")
    rows: list[DisplayMessage] = []
    queued: list[QueuedMessage] = []
    for item in items:
        extra = {"queued_by_tool": item.tool_name}
        text = item.message.text or NO_TEXT
        row = None
        if item.display:
            row = services.append_text_message(
                scope,
                conversation_id,
                "user",
                text,
                metadata={**extra, "queued": True},
            )
            rows.append(row)
        queued.append(
            QueuedMessage(
                text=text,
                metadata=extra,
                display_ids=(row.pk,) if row is not None else (),
                llm=item.message.to_dict(),
            )
        )
    run.metadata = RunRequest.of(run).with_queued(*queued).to_dict()
    run.save(update_fields=["metadata"])
    return rows


async def announce_queued(
    publisher: Publisher, run_id: str, rows: list[DisplayMessage]
) -> None:
    for row in rows:
        data = {"display_message": display_message_json(row)}
        await publisher.publish("display_message_saved", data)
        await publisher.publish(
            "message_queued",
            {**data, "run_id": run_id, "policy": "tool", "waits_for": "run"},
        )
