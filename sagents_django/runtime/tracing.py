"""A turn of the runtime as the ``sagents.turn`` span (``core.tracing``): the run's
ids, trigger and attempt, and how it ended. Every span of the turn (model calls,
tool calls, sub-agents) carries the run id."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sagents_django.core import tracing

if TYPE_CHECKING:
    from .turn import Turn


async def traced(turn: Turn) -> str:
    """``turn.run()`` inside its span; the run's final status."""
    run = turn.agent_run
    attributes = {
        "sagents.conversation_id": turn.conversation_id,
        "sagents.agent_id": turn.agent_id,
        "sagents.trigger": run.trigger,
        "sagents.attempt": run.attempts,
    }
    with tracing.turn("sagents.turn", attributes, run_id=turn.run_id) as span:
        status = await turn.run()
        tracing.set_attributes(span, {"sagents.status": status})
        if status == "error":
            tracing.mark_error(span, "run_error")
        return status
