"""The recorder: the core's callbacks of one turn, each turned once into what it
means here.

A callback becomes, in this order: its display rows and the checkpoint of the state
that holds them (one transaction, so a takeover never asks the model again for a
reply it has, and never shows it twice), a tool call's journal entry with its card
(one transaction: a finished call never runs again), and the frames published to
the conversation through the turn's publisher (the conversation's only publisher
while the turn holds it). Once this worker no longer holds the run (taken over,
handed over) every callback is a no-op: what it would record belongs to the next
worker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from sagents_django import services
from sagents_django.budgets.turns import TurnLedger
from sagents_django.core import Message, State, TokenUsage
from sagents_django.core.approvals import interrupt_from_dict
from sagents_django.core.outbox import QueuedFromTool
from sagents_django.core.persistence import PersistenceContext, ToolInfo
from sagents_django.persistence import display_callbacks, display_rows, record_failure
from sagents_django.scope import Scope
from sagents_django.services.sql import unit

from . import runs
from .checkpoints import Checkpoints
from .database import db, reconnect
from .events_out import asignal
from .journal import DatabaseJournal
from .publisher import Publisher, display_message_json
from .tenure import Tenure
from .tool_queue import announce_queued, record_queued

logger = logging.getLogger(__name__)

EXECUTING_AFTER = 0.25
"""Seconds a tool runs before its card is written ``executing`` (the event says so
at once): most calls finish sooner, and their card goes straight to its end, one
write fewer per step."""


@dataclass(kw_only=True, eq=False)
class Recorder:
    scope: Scope
    conversation_id: str
    display: Any
    """The site's display persistence (``SAGENTS["DISPLAY_PERSISTENCE"]``)."""
    publisher: Publisher
    tenure: Tenure
    context: Callable[..., PersistenceContext]
    checkpoints: Checkpoints
    journal: DatabaseJournal | None = None
    resolving: set[str] = field(default_factory=set)
    """Interrupted tool calls whose results a resume may complete."""
    step_calls: int = 0
    """Tool calls the step's reply asked for."""
    finished: int = 0
    """Of those, how many have finished."""
    deferred: list[tuple[Any, ToolInfo]] = field(default_factory=list)
    """Finished calls whose journal entry and card are written with the tool
    results' record, the step's next and last unit."""
    marking: dict[str, asyncio.TimerHandle] = field(default_factory=dict)
    """Calls whose card shows ``executing`` if they still run after
    ``EXECUTING_AFTER``."""
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    queued: int = 0
    """Messages of the turn's outbox already queued on the run (``tool_queue``)."""
    ledger: TurnLedger | None = None
    """The usage ledger row of each reply, written in the reply's transaction."""

    @property
    def run_id(self) -> str:
        return self.tenure.run_id

    def note_resumable(self, state: State) -> None:
        """Remember which interrupted tool results a resume may complete."""
        try:
            interrupt = interrupt_from_dict(state.interrupt_data or {})
        except Exception:
            return
        call_id = getattr(interrupt, "tool_call_id", None) or (
            state.interrupt_data or {}
        ).get("tool_call_id")
        if isinstance(call_id, str):
            self.resolving.add(call_id)

    def record_decisions(self, state: State, decisions: Any) -> list[Any]:
        """The person's decision on each action request, on its tool-call card."""
        data = state.interrupt_data or {}
        requests = data.get("action_requests") or []
        rows: list[Any] = []
        if not isinstance(decisions, list):
            return rows
        for request, decision in zip(requests, decisions, strict=False):
            call_id = request.get("tool_call_id") if isinstance(request, dict) else None
            if not call_id:
                continue
            try:
                row = services.record_hitl_decision(
                    self.scope,
                    call_id,
                    decision,
                    conversation_id=self.conversation_id,
                )
            except Exception:
                logger.warning("Could not record a decision on %s", call_id)
                continue
            rows.append(row)
        return rows

    def callbacks(self) -> dict[str, Any]:
        """The core's callbacks, each consumed once: the rows, checkpoints,
        journal entries and frames they become."""
        publisher = self.publisher

        async def announce(event: str, rows: list[Any]) -> None:
            for row in rows:
                await publisher.publish(
                    event, {"display_message": display_message_json(row)}
                )

        saving = display_callbacks(
            self.display, self.scope, self.context(), announce=announce, run_sync=db
        )
        on_event_save = saving.pop("on_agent_event")

        async def on_deltas(_ex: Any, deltas: list[Any]) -> None:
            publisher.add_deltas([d.to_dict() for d in deltas])

        async def on_message(ex: Any, message: Message) -> None:
            # The reply and its display rows are one checkpoint: a takeover goes on
            # from it (its tool calls, by their ids, through the journal), never
            # asks the model again, and never shows the reply twice.
            if message.tool_calls and message.status == "complete":
                self.tenure.tools_started()
                self.step_calls, self.finished = len(message.tool_calls), 0
            if self.ledger is not None:
                self.ledger.reply()
            await self._record(ex, message)
            await publisher.publish("llm_message", {"message": message.to_dict()})

        async def on_tool_response(ex: Any, message: Message) -> None:
            await self._record(
                ex,
                message,
                settled=self._take_deferred(),
                queued=ex.outbox.since(self.queued),
            )

        async def on_usage(_ex: Any, usage: TokenUsage) -> None:
            if self.ledger is not None:
                self.ledger.noted(usage)
            await publisher.publish("llm_token_usage", {"usage": usage.to_dict()})

        async def mark_executing(ex: Any, call: Any, tool: Any) -> None:
            self.marking.pop(call.call_id, None)
            if not self.tenure.ended:
                await saving["on_tool_execution_started"](ex, call, tool)

        async def on_tool_started(ex: Any, call: Any, tool: Any) -> None:
            self.marking[call.call_id] = asyncio.get_running_loop().call_later(
                EXECUTING_AFTER, lambda: self._spawn(mark_executing(ex, call, tool))
            )
            update = {"status": "executing", "call_id": call.call_id}
            update.update(name=call.name, arguments=call.arguments)
            display_text = getattr(tool, "display_text", None)
            if display_text:
                update["display_text"] = display_text
            await publisher.publish("tool_execution_update", update)

        async def on_tool_completed(ex: Any, call: Any, result: Any) -> None:
            self._ran(call.call_id)
            if result.is_interrupt:
                await saving["on_tool_execution_completed"](ex, call, result)
            else:
                info: ToolInfo = {"call_id": call.call_id, "name": call.name}
                info["result"] = result.text
                await self._settle_call("completed", info)
            status = "interrupted" if result.is_interrupt else "completed"
            update = {"status": status, "call_id": call.call_id, "name": call.name}
            update["result"] = result.text
            await publisher.publish("tool_execution_update", update)

        async def on_tool_failed(ex: Any, call: Any, result: Any) -> None:
            self._ran(call.call_id)
            info: ToolInfo = {"call_id": call.call_id, "name": call.name}
            info["error"] = result.text
            await self._settle_call("failed", info)
            update = {"status": "failed", "call_id": call.call_id, "name": call.name}
            update["error"] = result.text
            await publisher.publish("tool_execution_update", update)

        async def on_event(ex: Any, name: str, data: dict[str, Any]) -> None:
            await on_event_save(ex, name, data)
            await self._resolve(name, data)
            await publisher.publish(name, data)
            if name == "conversation_title_generated" and "metadata_key" not in data:
                title = data.get("title")
                await asignal(
                    "title_generated",
                    conversation_id=self.conversation_id,
                    title=title,
                )

        async def on_step_end(ex: Any) -> None:
            await self.flush()
            await self._checkpoint(ex.state)
            self.tenure.step_ended()
            await publisher.publish(
                "agent_state_update", snapshot(ex.state), debug=True
            )

        handlers = {
            **saving,
            "on_tool_response_created": on_tool_response,
            "on_llm_new_delta": on_deltas,
            "on_llm_new_message": on_message,
            "on_llm_token_usage": on_usage,
            "on_tool_execution_started": on_tool_started,
            "on_tool_execution_completed": on_tool_completed,
            "on_tool_execution_failed": on_tool_failed,
            "on_agent_event": on_event,
            "on_step_end": on_step_end,
        }
        return {key: self._guard(handler) for key, handler in handlers.items()}

    def _guard(self, handler: Any) -> Any:
        """A callback that does nothing once this worker stopped holding the turn
        (taken over, or handed over): what it would record belongs to the next."""

        async def guarded(*args: Any) -> None:
            if not self.tenure.ended:
                await handler(*args)

        return guarded

    def _spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _ran(self, call_id: str) -> None:
        """A call finished: its card need not show ``executing`` any more."""
        self.finished += 1
        timer = self.marking.pop(call_id, None)
        if timer is not None:
            timer.cancel()

    async def _settle_call(self, status: Any, info: ToolInfo) -> None:
        """A finished call's journal entry and card: with the tool results' record
        when this was the step's last call (it comes next: one transaction fewer),
        else at once (other calls still run; this one must not run again)."""
        if self.step_calls and self.finished >= self.step_calls:
            self.deferred.append((status, info))
        else:
            await self._finish_call(status, info)

    def _take_deferred(self) -> list[tuple[Any, ToolInfo]]:
        deferred, self.deferred = self.deferred, []
        return deferred

    async def flush(self) -> None:
        """Write what waits for a tool results' record that did not come (the step
        was cancelled or paused), and let the executing marks end."""
        for status, info in self._take_deferred():
            await self._finish_call(status, info)
        for timer in self.marking.values():
            timer.cancel()
        self.marking.clear()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)

    async def _finish_call(self, status: Any, info: ToolInfo) -> None:
        """A finished call's journal entry and its card's update, in one
        transaction; then the card is published."""
        row = await db(self._finish_call_rows)(status, info)
        if row is not None:
            await self.publisher.publish(
                "display_message_updated",
                {"display_message": display_message_json(row)},
            )

    def _finish_call_rows(self, status: Any, info: ToolInfo) -> Any:
        for last in (False, True):
            try:
                with unit() if not last else transaction.atomic():
                    [row] = self._settle_rows([(status, info)]) or [None]
                break
            except Exception:
                if last:
                    raise
                logger.warning("Journaling a call failed; trying once more")
                reconnect()
        if self.journal is not None:
            self.journal.forget(info["call_id"])
        return row

    async def _record(
        self,
        ex: Any,
        message: Message,
        *,
        settled: list[tuple[Any, ToolInfo]] | None = None,
        queued: list[QueuedFromTool] | None = None,
    ) -> None:
        """Save ``message``'s display rows and checkpoint the state that holds it,
        with the journal entries and cards of the ``settled`` calls and the
        messages their tools ``queued``, in one transaction; then publish the
        cards and the rows."""
        settled, queued = settled or [], queued or []
        message = await ex.agent.display_message(message)
        try:
            cards, rows, shown = await db(self._record_rows)(
                message, ex.state, settled, queued
            )
        except runs.LeaseLost:
            self.tenure.lose()
            return
        self.queued += len(queued)
        if self.journal is not None:
            for _status, info in settled:
                self.journal.forget(info["call_id"])
        for card in cards:
            await self.publisher.publish(
                "display_message_updated",
                {"display_message": display_message_json(card)},
            )
        for row in rows:
            await self.publisher.publish(
                "display_message_saved", {"display_message": display_message_json(row)}
            )
        await announce_queued(self.publisher, self.run_id, shown)

    async def queue_rest(self, queued: list[QueuedFromTool]) -> None:
        """Queue what the turn's tools queued after its last recorded step (a
        step cut short by a cancel or a pause)."""
        rest = queued[self.queued :]
        if not rest:
            return
        try:
            shown = await db(self._queue_unit)(rest)
        except runs.LeaseLost:
            self.tenure.lose()
            return
        self.queued += len(rest)
        await announce_queued(self.publisher, self.run_id, shown)

    def _queue_unit(self, queued: list[QueuedFromTool]) -> list[Any]:
        with transaction.atomic():
            return self._queue(queued)

    def _queue(self, queued: list[QueuedFromTool]) -> list[Any]:
        return record_queued(
            self.scope, self.tenure.lease, self.conversation_id, queued
        )

    def _settle_rows(self, settled: list[tuple[Any, ToolInfo]]) -> list[Any]:
        cards = []
        for status, info in settled:
            if self.journal is not None:
                self.journal.record(info["call_id"])
            card = self.display.update_tool_status(
                self.scope, status, info, self.context()
            )
            if card is not None:
                cards.append(card)
        return cards

    def _record_rows(
        self,
        message: Message,
        state: State,
        settled: list[tuple[Any, ToolInfo]],
        queued: list[QueuedFromTool],
    ) -> tuple[list[Any], list[Any], list[Any]]:
        """On a database thread. The persistence records and swallows a failed
        write, so a failure is seen by its missing rows or checkpoint: the whole
        unit is tried once more on a checked connection (one the server closed
        mid-turn is replaced), then kept as far as it goes."""
        try:
            with unit():
                cards = self._settle_rows(settled)
                rows = list(
                    self.display.save_message(self.scope, message, self.context())
                )
                if not rows and display_rows(message):
                    raise RuntimeError("The message's display rows were not saved")
                self.checkpoints.write(state)
                shown = self._queue(queued)
                self._write_ledger()
            return cards, rows, shown
        except runs.LeaseLost:
            raise
        except Exception:
            logger.warning(
                "Recording a message failed; trying once more", exc_info=True
            )
            reconnect()
        with transaction.atomic():
            cards = self._settle_rows(settled)
            rows = list(self.display.save_message(self.scope, message, self.context()))
            self._write_checkpoint(state)
            shown = self._queue(queued)
            self._write_ledger()
        return cards, rows, shown

    def _write_ledger(self) -> None:
        if self.ledger is not None:
            self.ledger.write()

    async def _checkpoint(self, state: State) -> None:
        assert self.checkpoints is not None
        if not self.checkpoints.changed(state):
            return  # the tool results' record already holds this state
        try:
            await db(self._write_checkpoint)(state)
        except runs.LeaseLost:
            self.tenure.lose()

    def _write_checkpoint(self, state: State) -> None:
        """A step checkpoint (on a database thread). Failing to write one is
        recorded and the turn goes on (its end saves the whole state); losing the
        lease stops it."""
        assert self.checkpoints is not None
        try:
            with unit():
                self.checkpoints.write(state)
        except runs.LeaseLost:
            raise
        except Exception as exc:
            logger.exception("Run %s could not checkpoint a step", self.run_id)
            record_failure(
                self.scope, self.context("on_step"), exc, kind="state", operation="step"
            )

    async def _resolve(self, name: str, data: dict[str, Any]) -> None:
        """An interrupted call (a sub-agent's) that completes on resume: its result
        row gets the real result (``resolve_tool_result``) and its card ends
        completed."""
        if name != "tool_execution_update" or data.get("status") != "completed":
            return
        call_id = data.get("call_id")
        if call_id not in self.resolving:
            return
        self.resolving.discard(call_id)
        result = str(data.get("result", ""))
        info: ToolInfo = {"call_id": call_id, "result": result}
        await self._finish_call("completed", info)
        row = await db(self.display.resolve_tool_result)(
            self.scope, call_id, result, self.context()
        )
        if row is not None:
            await self.publisher.publish(
                "display_message_updated",
                {"display_message": display_message_json(row)},
            )

    async def mark_cancelled_cards(self, state: State) -> None:
        """Tool-call cards of the cut-off step end as cancelled."""
        calls = [
            result.tool_call_id
            for message in state.messages[-2:]
            for result in message.tool_results
            if result.is_error and "cancelled" in result.text
        ]
        for call_id in calls:
            info: ToolInfo = {"call_id": call_id}
            row = await db(self.display.update_tool_status)(
                self.scope, "cancelled", info, self.context()
            )
            if row is not None:
                await self.publisher.publish(
                    "display_message_updated",
                    {"display_message": display_message_json(row)},
                )


def snapshot(state: State) -> dict[str, Any]:
    """What an inspector sees of the state at a step end (not the whole history:
    it would not fit a channel-layer message)."""
    return {
        "message_count": len(state.messages),
        "todos": [t.to_dict() for t in state.todos],
        "metadata_keys": sorted(state.metadata),
        "interrupted": bool(state.interrupt_data),
    }
