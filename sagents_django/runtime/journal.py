"""The database journal of a run's tool calls (``core.journal``'s protocol).

A finished call is recorded with its result, keyed by run and call id, in the same
transaction as its tool-call card's update (the turn writes both, ``record``), so
the journal and what people see never disagree. A worker that takes the run over
replays a recorded result instead of running the call again. A call of the step it
inherits (issued before the crash) with no result was running, or about to: an
idempotent tool runs again; any other is recorded ``lost`` and answered with an
error result (the admin lists it on the run). Nothing is written when a call starts:
the checkpoint of the reply that issued it already says it may have.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
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
    def __init__(
        self, lease: runs.Lease, inherited: Iterable[str] = (), *, fresh: bool = False
    ) -> None:
        self.lease = lease
        self.inherited = frozenset(inherited)
        """Calls issued by an earlier attempt that its checkpoint has no result for."""
        self.fresh = fresh
        """The run's first attempt, never checkpointed: nothing to recall."""
        self._finished: dict[str, ToolResult] = {}

    async def recall(self, call: ToolCall, tool: Any) -> ToolResult | None:
        if self.fresh:
            return None
        return await db(self._recall)(call, is_idempotent(tool))

    async def started(self, call: ToolCall, tool: Any) -> None:
        return None

    async def finished(self, call: ToolCall, result: ToolResult) -> None:
        self._finished[call.call_id] = result

    def record(self, call_id: str) -> None:
        """Write the result ``finished`` was told of (on a database thread, in the
        transaction that updates the call's card); a replayed call is not written
        again."""
        result = self._finished.get(call_id)
        if result is None:
            return
        write(self.lease, call_id, result, "failed" if result.is_error else "completed")

    def forget(self, call_id: str) -> None:
        """The record was committed."""
        self._finished.pop(call_id, None)

    # On a database thread -------------------------------------------------------
    def _recall(self, call: ToolCall, idempotent: bool) -> ToolResult | None:
        record = ToolCallRecord.objects.filter(
            run_id=self.lease.run_id, call_id=call.call_id[:255]
        ).first()
        if record is not None and record.result:
            try:
                return result_from_json(record.result)
            except Exception:
                logger.warning("Journal entry %s is unreadable", record.pk)
        if call.call_id not in self.inherited or idempotent:
            return None  # never started, or safe to run again
        result = ToolResult(
            tool_call_id=call.call_id,
            name=call.name,
            content=LOST_TEXT.format(name=call.name),
            is_error=True,
        )
        write(self.lease, call.call_id, result, "lost")
        return result


def write(lease: runs.Lease, call_id: str, result: ToolResult, status: str) -> None:
    """One statement: insert the record, or update the one a replay left."""
    ToolCallRecord.objects.bulk_create(
        [
            ToolCallRecord(
                run_id=lease.run_id,
                call_id=call_id[:255],
                name=result.name[:255],
                status=status,
                attempt=lease.attempt,
                result=result_to_json(result),
                finished_at=timezone.now(),
            )
        ],
        update_conflicts=True,
        unique_fields=["run", "call_id"],
        update_fields=["status", "attempt", "result", "finished_at"],
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
