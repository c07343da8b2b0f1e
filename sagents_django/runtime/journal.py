"""The database journal of a run's tool calls (``core.journal``'s protocol).

Each call is recorded as it starts and as it finishes, keyed by run and call id. A
worker that takes the run over after a crash replays a finished call's result; a
call still marked started was running when the worker died: an idempotent tool runs
again, any other is marked ``lost`` and answered with an error result (the admin
lists it on the run).
"""

from __future__ import annotations

import logging
from typing import Any

from django.utils import timezone

from sagents_django.core import Message, State, ToolCall, ToolResult
from sagents_django.core.journal import LOST_TEXT, is_idempotent
from sagents_django.core.serialization import deserialize_state, serialize_state
from sagents_django.core.todo import Todo
from sagents_django.models import ToolCallRecord

from . import runs
from .database import db

logger = logging.getLogger(__name__)


class DatabaseJournal:
    def __init__(self, lease: runs.Lease) -> None:
        self.lease = lease

    async def recall(self, call: ToolCall, tool: Any) -> ToolResult | None:
        return await db(self._recall)(call, is_idempotent(tool))

    async def started(self, call: ToolCall, tool: Any) -> None:
        await db(self._started)(call, is_idempotent(tool))

    async def finished(self, call: ToolCall, result: ToolResult) -> None:
        await db(self._finished)(call, result)

    # On a database thread -------------------------------------------------------
    def _recall(self, call: ToolCall, idempotent: bool) -> ToolResult | None:
        record = ToolCallRecord.objects.filter(
            run_id=self.lease.run_id, call_id=call.call_id
        ).first()
        if record is None:
            return None
        if record.status in ("completed", "failed", "lost") and record.result:
            try:
                return result_from_json(record.result)
            except Exception:
                logger.warning("Journal entry %s is unreadable", record.pk)
                return None
        if idempotent:
            return None  # it may have run part way: running it again is safe
        result = ToolResult(
            tool_call_id=call.call_id,
            name=call.name,
            content=LOST_TEXT.format(name=call.name),
            is_error=True,
        )
        record.status = "lost"
        record.result = result_to_json(result)
        record.finished_at = timezone.now()
        record.save(update_fields=["status", "result", "finished_at"])
        return result

    def _started(self, call: ToolCall, idempotent: bool) -> None:
        record, created = ToolCallRecord.objects.get_or_create(
            run_id=self.lease.run_id,
            call_id=call.call_id[:255],
            defaults={
                "name": call.name[:255],
                "status": "started",
                "idempotent": idempotent,
                "attempt": self.lease.attempt,
            },
        )
        if not created:  # an idempotent call run again after a takeover
            record.status, record.attempt = "started", self.lease.attempt
            record.save(update_fields=["status", "attempt"])

    def _finished(self, call: ToolCall, result: ToolResult) -> None:
        ToolCallRecord.objects.filter(
            run_id=self.lease.run_id, call_id=call.call_id[:255]
        ).update(
            status="failed" if result.is_error else "completed",
            result=result_to_json(result),
            finished_at=timezone.now(),
        )


def result_to_json(result: ToolResult) -> dict[str, Any]:
    """The result as the model reads it, plus the state update a tool returned
    (``processed_content``: a dict or a State), so a replay changes the state as
    the call did."""
    data = result.to_dict()
    update = result.processed_content
    if isinstance(update, State):
        data["processed_state"] = serialize_state(update)
    elif isinstance(update, dict):
        data["processed_update"] = _jsonable(update)
    return data


def result_from_json(data: dict[str, Any]) -> ToolResult:
    result = ToolResult.from_dict(data)
    if isinstance(data.get("processed_state"), dict):
        result.processed_content = deserialize_state(None, data["processed_state"])
    elif isinstance(data.get("processed_update"), dict):
        update = dict(data["processed_update"])
        if isinstance(update.get("messages"), list):
            update["messages"] = [Message.from_dict(m) for m in update["messages"]]
        result.processed_content = update
    return result


def _jsonable(value: Any) -> Any:
    if isinstance(value, Todo):
        return value.to_dict()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    to_dict = getattr(value, "to_dict", None)
    return to_dict() if callable(to_dict) else value
