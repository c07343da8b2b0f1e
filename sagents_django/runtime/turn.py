"""One turn of a conversation: the one path every executor runs.

``run_turn(run_id)`` claims a queued run (a duplicate or late delivery finds it
claimed or finished and returns), rebuilds the agent with the site's factory under
the run's stored scope, loads the state, and runs the agent with callbacks that

- save every message and tool-call transition as display rows and publish each row
  (``display_message_saved`` / ``display_message_updated``) once it is written;
- publish the stream (batched ``llm_deltas``), ``llm_message``, ``llm_token_usage``,
  ``tool_execution_update`` and whatever the middleware announce (todos, titles,
  sub-agent events tagged with their sub-agent);
- checkpoint the state at every step end, before the next model call.

The state is saved at every lifecycle point (the user's message before the model is
called, each step, completion, interrupt, cancel, error); a turn whose state cannot
be saved ends as an error saying so. The run ends with its status, token usage and
cost, a typed transcript row for a cancel or an error, ``status_changed`` and
``run_finished`` events, and the Django signals, sent after commit. Messages queued
while it ran start the next run at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from django.db import transaction
from django.utils.module_loading import import_string

from sagents_django import services
from sagents_django.conf import sagents_settings
from sagents_django.core import (
    Agent,
    AgentResult,
    CancelToken,
    Inbox,
    InvalidResume,
    Message,
    State,
    TokenUsage,
)
from sagents_django.core.approvals import interrupt_from_dict
from sagents_django.core.exceptions import LLMError
from sagents_django.core.middleware.base import call_hook
from sagents_django.core.middleware.patch_tool_calls import patch_dangling_tool_calls
from sagents_django.core.persistence import (
    Lifecycle,
    PersistenceContext,
    ToolInfo,
)
from sagents_django.core.serialization import (
    deserialize_server_state,
    serialize_server_state,
)
from sagents_django.models import AgentRun
from sagents_django.persistence import (
    DjangoAgentPersistence,
    DjangoDisplayMessagePersistence,
    display_callbacks,
    display_rows,
    record_failure,
)
from sagents_django.scope import Scope, scope_class

from . import checkpoints, control, draining, events_out, runs
from .agents import build_agent, cost_of
from .checkpoints import Checkpoints
from .database import db, reconnect
from .ending import Ending, end_run
from .journal import DatabaseJournal
from .publisher import Publisher, display_message_json
from .requests import RunRequest
from .tracing import traced

logger = logging.getLogger(__name__)

LIFECYCLES: dict[str, Lifecycle] = {
    "completed": "on_completion",
    "interrupted": "on_interrupt",
    "error": "on_error",
    "cancelled": "on_completion",
}

NOT_SAVED = (
    "This turn could not be saved, so the agent will not remember it; the "
    "conversation goes on from its last saved state."
)


class QueueLimit(Exception):
    """Queued messages started too many turns in a row."""


def worker_name() -> str:
    """Who holds a run: host, process and a per-process token."""
    return f"{socket.gethostname()}:{os.getpid()}:{_TOKEN}"


_TOKEN = uuid.uuid4().hex[:8]


async def signal(name: str, **kwargs: Any) -> None:
    """Send a lifecycle signal (after commit) from the turn's loop."""
    await db(events_out.signal_after_commit)(name, **kwargs)


async def run_turn(run_id: str) -> str | None:
    """Run the run ``run_id`` (queued, or taken over from a worker that died); its
    final status, or None when this delivery found it held by a living worker or
    finished (nothing is done then)."""
    if draining.is_draining():
        # A deploy stops this worker: another one takes the run.
        if sagents_settings.EXECUTOR == "celery":
            from .executors import CeleryExecutor

            await CeleryExecutor().asubmit(run_id)
        return None
    run = await db(runs.claim_run)(
        run_id,
        owner=worker_name(),
        lease_seconds=sagents_settings.LEASE_SECONDS,
        max_attempts=sagents_settings.MAX_ATTEMPTS,
    )
    if run is None:
        logger.info("Run %s is held by another worker or finished", run_id)
        return None
    turn = await db(Turn.open)(run)
    return await traced(turn)


@dataclass(kw_only=True, eq=False)
class Turn:
    agent_run: AgentRun
    scope: Scope
    request: RunRequest = field(default_factory=RunRequest)
    conversation_id: str
    agent_id: str
    filesystem_scope: Any = None
    agent: Agent | None = None
    setup_error: Exception | None = None
    state: State = field(default_factory=State)
    revision: int = 0
    agent_persistence: DjangoAgentPersistence = field(
        default_factory=DjangoAgentPersistence
    )
    display: DjangoDisplayMessagePersistence = field(
        default_factory=DjangoDisplayMessagePersistence
    )
    publisher: Publisher | None = None
    cancel: CancelToken = field(default_factory=CancelToken)
    inbox: Inbox = field(default_factory=Inbox)
    delivered: bool = False
    """Whether the run's own messages reached the state (else a follow-up run of
    messages queued on it takes them along)."""
    resolving: set[str] = field(default_factory=set)
    """Interrupted tool calls whose results a resume may complete."""
    lease: runs.Lease | None = None
    checkpoints: Checkpoints | None = None
    journal: DatabaseJournal | None = None
    continuing: bool = False
    """A takeover: the state is the last checkpoint of an earlier attempt, whose
    messages already reached it."""
    ended_saved: bool = False
    """A takeover of a run whose whole state was saved (only its ending was lost)."""
    lost: bool = False
    """Another worker took the run over (this one paused past its lease): stop
    without writing anything more."""
    handing_off: bool = False
    """The worker drains: stop at the next safe point and give the run back."""
    handed_off: bool = False
    in_tools: bool = False
    """Between a reply with tool calls and the end of its step (a handoff waits)."""

    @property
    def run_id(self) -> str:
        return str(self.agent_run.pk)

    # Opening (in a thread: database and factory) -------------------------------
    @classmethod
    def open(cls, run: AgentRun) -> Turn:
        request = RunRequest.of(run)
        scope = scope_class().from_dict(request.scope or {"user_id": None})
        conversation = services.get_conversation(scope, run.conversation_id)
        turn = cls(
            agent_run=run,
            scope=scope,
            conversation_id=str(run.conversation_id),
            agent_id=conversation.agent_id if conversation is not None else "",
            request=request,
            filesystem_scope=_filesystem_scope(request.filesystem_scope),
            lease=runs.lease_of(run),
        )
        try:
            if conversation is None:
                raise PermissionError(
                    "The run's user can no longer see this conversation"
                )
            turn.agent_persistence = import_string(sagents_settings.AGENT_PERSISTENCE)()
            turn.display = import_string(sagents_settings.DISPLAY_PERSISTENCE)()
            turn.agent = build_agent(turn.agent_id, scope, turn.filesystem_scope)
            turn.load()
            turn.resume_checkpoints()
        except Exception as exc:
            logger.exception("Could not open run %s", run.pk)
            turn.setup_error = exc
        return turn

    def context(
        self, lifecycle: Lifecycle | None = None, **extra: Any
    ) -> PersistenceContext:
        return PersistenceContext(
            agent_id=self.agent_id,
            conversation_id=self.conversation_id,
            lifecycle=lifecycle,
            revision=self.revision,
            run_id=self.run_id,
            **extra,
        )

    def load(self) -> None:
        assert self.agent is not None
        stored = self.agent_persistence.load_stored(self.scope, self.context())
        if stored.data is None:
            self.state = State(agent_id=self.agent_id)
        else:
            self.state = deserialize_server_state(
                self.agent_id, stored.data, middleware=self.agent.middleware
            )
        self.revision = stored.revision

    def resume_checkpoints(self) -> None:
        """Where this attempt starts: the state as loaded, or (a takeover) the
        last checkpoint of the attempt before."""
        run = self.agent_run
        self.lease = runs.lease_of(run)
        base = run.checkpoint_revision
        if base is not None:  # an earlier attempt got as far as changing the state
            if self.revision == base:
                self.checkpoints = checkpoints.resume_from(self.lease, base, self.state)
                self.state = self.checkpoints.state
                self.continuing = True
                return
            self.ended_saved = self.revision > base
        self.checkpoints = Checkpoints(
            lease=self.lease, base_revision=self.revision, state=self.state
        )

    # Running (on the runtime loop) ---------------------------------------------
    async def end_abandoned(self, error: str) -> str:
        """End a run whose workers kept dying as an error (the sweeper's last word),
        keeping the steps they checkpointed."""
        window = sagents_settings.DELTA_WINDOW_MS / 1000
        self.publisher = Publisher(self.conversation_id, window=window)
        try:
            if self.continuing and self.agent is not None:
                messages = patch_dangling_tool_calls(
                    self.state.messages, include_last=True
                )
                await self._save(self.state.set_messages(messages), "on_error")
            return await self._end_error(error, error_type="worker_lost")
        finally:
            with contextlib.suppress(Exception):
                await self.publisher.aclose()

    async def run(self) -> str:
        window = sagents_settings.DELTA_WINDOW_MS / 1000
        self.publisher = Publisher(self.conversation_id, window=window)
        handle = control.TurnHandle(
            self.conversation_id, self.run_id, self.cancel, self.inbox
        )
        status = "error"
        loop = asyncio.get_running_loop()
        stop_listening = draining.on_drain(
            lambda: loop.call_soon_threadsafe(self._hand_off)
        )
        try:
            async with control.listening(handle):
                heart = asyncio.ensure_future(self._heartbeat())
                try:
                    status = await self._run()
                except Exception as exc:
                    # Outside the turn's own handling (its database failed at its
                    # start or its end): the run must still end, or its
                    # conversation stays held.
                    logger.exception("Run %s failed outside its turn", self.run_id)
                    status = await self._end_anyway(f"{type(exc).__name__}: {exc}")
                finally:
                    heart.cancel()
                    with contextlib.suppress(BaseException):
                        await heart
        finally:
            stop_listening()
            with contextlib.suppress(Exception):
                await self.publisher.aclose()
        return status

    async def _heartbeat(self) -> None:
        assert self.lease is not None
        while True:
            await asyncio.sleep(sagents_settings.HEARTBEAT_SECONDS)
            try:
                if await db(runs.beat)(self.lease):
                    self.cancel.cancel("Cancelled")
            except runs.LeaseLost:
                self._lose()
                return
            except Exception:
                logger.warning("Heartbeat of run %s failed", self.run_id, exc_info=True)

    def _lose(self) -> None:
        """Another worker holds the run now: stop, write nothing more."""
        if not self.lost:
            logger.warning("Run %s was taken over by another worker", self.run_id)
        self.lost = True
        self.cancel.cancel("Taken over")

    def _hand_off(self) -> None:
        """The worker drains: stop now, or after the running tools' step."""
        self.handing_off = True
        if not self.in_tools:
            self._stop_for_handoff()

    def _stop_for_handoff(self) -> None:
        if not self.handed_off:
            self.handed_off = True
            self.cancel.cancel("Handed over")

    async def _release(self) -> str:
        """Give the run back to the queue from its last checkpoint, for another
        worker to go on at once."""
        assert self.lease is not None
        if await db(runs.release)(self.lease):
            if sagents_settings.EXECUTOR == "celery":
                from .executors import CeleryExecutor

                await CeleryExecutor().asubmit(self.run_id)
            logger.info("Run %s handed over (this worker drains)", self.run_id)
        return "handed_over"

    async def _run(self) -> str:
        assert self.publisher is not None
        if self.setup_error is not None or self.agent is None:
            error = self.setup_error or RuntimeError("no agent")
            return await self._end_error(f"{type(error).__name__}: {error}")
        # The claim read the row: a cancel asked before it is seen here, one asked
        # later reaches the turn by its control channel or its heartbeat.
        if self.cancel.cancelled or self.agent_run.cancel_requested:
            return await self._end(Ending.cancelled())
        if self.handed_off:
            return await self._release()
        await self._publish_status("running")
        await self.publisher.publish(
            "run_started", {**self._run_info(), "attempt": self.agent_run.attempts}
        )
        try:
            self.state = await self._server_start(self.state)
            outcome = await self._start()
            if self.lost:
                return "lost"
            if self.handed_off:
                return await self._release()
        except InvalidResume as exc:
            return await self._end_error(str(exc), error_type="invalid_resume")
        except QueueLimit as exc:
            return await self._end_error(str(exc), error_type="queue_limit")
        except Exception as exc:
            logger.exception("Run %s failed", self.run_id)
            return await self._end_error(f"{type(exc).__name__}: {exc}")
        return await self._settle(outcome)

    async def _server_start(self, state: State) -> State:
        """``on_server_start`` of each middleware: a session of the conversation
        starts with every turn here (no process stays between turns)."""
        assert self.agent is not None
        for entry in self.agent.middleware:
            try:
                outcome = await call_hook(entry.middleware.on_server_start, state)
            except Exception:
                logger.exception("Middleware %s failed in on_server_start", entry.id)
                continue
            if isinstance(outcome, State):
                state = outcome
        return state

    async def _start(self) -> AgentResult:
        assert self.agent is not None
        options: dict[str, Any] = {
            "callbacks": [self.callbacks()],
            "cancel": self.cancel,
            "inbox": self.inbox,
        }
        assert self.lease is not None
        first = (
            self.agent_run.attempts <= 1 and self.agent_run.checkpoint_revision is None
        )
        options["journal"] = self.journal = DatabaseJournal(
            self.lease, inherited=self._inherited_calls(), fresh=first
        )
        if self.ended_saved or (self.continuing and self.state.interrupt_data):
            # An earlier attempt saved how the turn ended, or paused it.
            return AgentResult(
                status="interrupted" if self.state.interrupt_data else "completed",
                state=self.state,
                interrupt_data=self.state.interrupt_data,
            )
        if self.continuing:
            self.delivered = True
            last = self.state.messages[-1] if self.state.messages else None
            if last is not None and last.role == "assistant" and not last.tool_calls:
                # The reply was checkpointed; only the ending was lost.
                return AgentResult(status="completed", state=self.state)
            return await self.agent.aexecute(self.state, **options)
        request = self.request
        for note in request.notifications:
            self.inbox.post(note.middleware_id, note.message)
        if self.agent_run.trigger == "resume":
            decisions = request.decisions
            if request.revision not in (None, self.revision):
                raise InvalidResume(
                    "These decisions answer an approval that was already answered"
                )
            self._note_resumable()
            await db(self._record_decisions)(decisions)
            return await self.agent.aresume(self.state, decisions, **options)
        if self.state.interrupt_data:
            # Admission never starts a run on a paused state; if one comes (a state
            # restored by hand), it changes nothing: the approval stays answerable.
            raise InvalidResume(
                "The conversation waits for decisions on its pending approval"
            )
        if request.messages:
            state = self.state
            for entry in request.messages:
                user = Message.user(entry.text)
                if entry.metadata:
                    user = replace(user, metadata={**user.metadata, **entry.metadata})
                state = state.add_message(user)
            # The user's messages are the turn's first checkpoint: never lost, and
            # never added twice (the run names the revision that holds them).
            if not await self._save(state, "on_step", declare=True):
                raise RuntimeError(NOT_SAVED)
        self.delivered = True
        if request.halted:
            raise QueueLimit(
                f"Stopped after {sagents_settings.MAX_QUEUED_ROUNDS} queued turns in "
                "a row; the queued messages are kept. Send a message to go on."
            )
        return await self.agent.aexecute(self.state, **options)

    def _note_resumable(self) -> None:
        """Remember which interrupted tool results a resume may complete."""
        try:
            interrupt = interrupt_from_dict(self.state.interrupt_data or {})
        except Exception:
            return
        call_id = getattr(interrupt, "tool_call_id", None) or (
            self.state.interrupt_data or {}
        ).get("tool_call_id")
        if isinstance(call_id, str):
            self.resolving.add(call_id)

    def _record_decisions(self, decisions: Any) -> None:
        """The person's decision on each action request, on its tool-call card."""
        data = self.state.interrupt_data or {}
        requests = data.get("action_requests") or []
        if not isinstance(decisions, list):
            return
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
            events_out.after_commit(
                self.conversation_id,
                "display_message_updated",
                {"display_message": display_message_json(row)},
            )

    # Callbacks -----------------------------------------------------------------
    def callbacks(self) -> dict[str, Any]:
        publisher = self.publisher
        assert publisher is not None

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
                self.in_tools = True
            await self._record(ex, message)
            await publisher.publish("llm_message", {"message": message.to_dict()})

        async def on_tool_response(ex: Any, message: Message) -> None:
            await self._record(ex, message)

        async def on_usage(_ex: Any, usage: TokenUsage) -> None:
            await publisher.publish("llm_token_usage", {"usage": usage.to_dict()})

        async def on_tool_started(ex: Any, call: Any, tool: Any) -> None:
            await saving["on_tool_execution_started"](ex, call, tool)
            update = {"status": "executing", "call_id": call.call_id}
            update.update(name=call.name, arguments=call.arguments)
            display_text = getattr(tool, "display_text", None)
            if display_text:
                update["display_text"] = display_text
            await publisher.publish("tool_execution_update", update)

        async def on_tool_completed(ex: Any, call: Any, result: Any) -> None:
            if result.is_interrupt:
                await saving["on_tool_execution_completed"](ex, call, result)
            else:
                info: ToolInfo = {"call_id": call.call_id, "name": call.name}
                info["result"] = result.text
                await self._finish_call("completed", info)
            status = "interrupted" if result.is_interrupt else "completed"
            update = {"status": status, "call_id": call.call_id, "name": call.name}
            update["result"] = result.text
            await publisher.publish("tool_execution_update", update)

        async def on_tool_failed(ex: Any, call: Any, result: Any) -> None:
            info: ToolInfo = {"call_id": call.call_id, "name": call.name}
            info["error"] = result.text
            await self._finish_call("failed", info)
            update = {"status": "failed", "call_id": call.call_id, "name": call.name}
            update["error"] = result.text
            await publisher.publish("tool_execution_update", update)

        async def on_event(ex: Any, name: str, data: dict[str, Any]) -> None:
            await on_event_save(ex, name, data)
            await self._resolve(name, data)
            await publisher.publish(name, data)
            if name == "conversation_title_generated" and "metadata_key" not in data:
                title = data.get("title")
                await signal(
                    "title_generated",
                    conversation_id=self.conversation_id,
                    title=title,
                )

        async def on_step_end(ex: Any) -> None:
            await self._checkpoint(ex.state)
            self.in_tools = False
            if self.handing_off:
                self._stop_for_handoff()
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
            if not (self.lost or self.handed_off):
                await handler(*args)

        return guarded

    async def _finish_call(self, status: Any, info: ToolInfo) -> None:
        """A finished call's journal entry and its card's update, in one
        transaction; then the card is published."""
        row = await db(self._finish_call_rows)(status, info)
        if row is not None:
            assert self.publisher is not None
            await self.publisher.publish(
                "display_message_updated",
                {"display_message": display_message_json(row)},
            )

    def _finish_call_rows(self, status: Any, info: ToolInfo) -> Any:
        for last in (False, True):
            try:
                with transaction.atomic():
                    if self.journal is not None:
                        self.journal.record(info["call_id"])
                    row = self.display.update_tool_status(
                        self.scope, status, info, self.context()
                    )
                break
            except Exception:
                if last:
                    raise
                logger.warning("Journaling a call failed; trying once more")
                reconnect()
        if self.journal is not None:
            self.journal.forget(info["call_id"])
        return row

    def _inherited_calls(self) -> list[str]:
        """The calls an earlier attempt issued that this one may find half done:
        those of the reply it goes on from, when it is not the first attempt."""
        if self.agent_run.attempts <= 1 or not self.state.messages:
            return []
        last = self.state.messages[-1]
        return [c.call_id for c in last.tool_calls] if last.role == "assistant" else []

    async def _record(self, ex: Any, message: Message) -> None:
        """Save ``message``'s display rows and checkpoint the state that holds it,
        in one transaction; then publish the rows."""
        try:
            rows = await db(self._record_rows)(message, ex.state)
        except runs.LeaseLost:
            self._lose()
            return
        assert self.publisher is not None
        for row in rows:
            await self.publisher.publish(
                "display_message_saved", {"display_message": display_message_json(row)}
            )

    def _record_rows(self, message: Message, state: State) -> list[Any]:
        """On a database thread. The persistence records and swallows a failed
        write, so a failure is seen by its missing rows or checkpoint: the whole
        unit is tried once more on a checked connection (one the server closed
        mid-turn is replaced), then kept as far as it goes."""
        try:
            with transaction.atomic():
                rows = list(
                    self.display.save_message(self.scope, message, self.context())
                )
                if not rows and display_rows(message):
                    raise RuntimeError("The message's display rows were not saved")
                assert self.checkpoints is not None
                self.checkpoints.write(state)
            return rows
        except runs.LeaseLost:
            raise
        except Exception:
            logger.warning(
                "Recording a message failed; trying once more", exc_info=True
            )
            reconnect()
        with transaction.atomic():
            rows = list(self.display.save_message(self.scope, message, self.context()))
            self._write_checkpoint(state)
        return rows

    async def _checkpoint(self, state: State) -> None:
        assert self.checkpoints is not None
        if not self.checkpoints.changed(state):
            return  # the tool results' record already holds this state
        try:
            await db(self._write_checkpoint)(state)
        except runs.LeaseLost:
            self._lose()

    def _write_checkpoint(self, state: State) -> None:
        """A step checkpoint (on a database thread). Failing to write one is
        recorded and the turn goes on (its end saves the whole state); losing the
        lease stops it."""
        assert self.checkpoints is not None
        try:
            with transaction.atomic():
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
            assert self.publisher is not None
            await self.publisher.publish(
                "display_message_updated",
                {"display_message": display_message_json(row)},
            )

    # Ending ------------------------------------------------------------------------
    async def _save(
        self, state: State, lifecycle: Lifecycle, *, declare: bool = False
    ) -> bool:
        """Save the whole ``state`` over this turn's revision; False (recorded) if
        not. ``declare``: the run names the new revision as its checkpoint base in
        the same transaction (its messages are in the state from now on)."""
        context = self.context(lifecycle)
        try:
            data = serialize_server_state(state)
            row = await db(self._save_whole)(data, context, declare)
        except runs.LeaseLost:
            self._lose()
            return False
        except Exception as exc:
            logger.exception("The state of %s was not saved", self.agent_id)
            await db(record_failure)(
                self.scope, context, exc, kind="state", operation=lifecycle
            )
            return False
        self.state, self.revision = state, row.revision
        assert self.lease is not None
        self.checkpoints = Checkpoints(
            lease=self.lease, base_revision=row.revision, state=state, declared=declare
        )
        return True

    def _save_whole(
        self, data: dict[str, Any], context: PersistenceContext, declare: bool
    ) -> Any:
        assert self.lease is not None
        with transaction.atomic():
            if not runs.held(self.lease).exists():
                raise runs.LeaseLost(f"Run {self.run_id} was taken over")
            row = self.agent_persistence.save_state(self.scope, data, context)
            if declare:
                runs.held(self.lease).update(checkpoint_revision=row.revision)
        return row

    async def _settle(self, result: AgentResult) -> str:
        status = result.status
        usage = result.usage
        if not await self._save(result.state, LIFECYCLES[status]):
            if self.lost:
                return "lost"
            return await self._end(
                Ending.failed(NOT_SAVED, "state_not_saved", retryable=True, usage=usage)
            )
        if status == "cancelled":
            await self._mark_cancelled_cards(result.state)
            return await self._end(Ending.cancelled(usage=usage))
        if status == "error":
            exc = result.exception
            return await self._end(
                Ending.failed(
                    result.error or "The turn failed",
                    "provider_error" if isinstance(exc, LLMError) else "agent_error",
                    retryable=bool(getattr(exc, "retryable", False)),
                    usage=usage,
                )
            )
        if status == "interrupted":
            await signal(
                "interrupt_raised",
                conversation_id=self.conversation_id,
                run_id=self.run_id,
                interrupt_data=result.state.interrupt_data,
            )
        last = result.state.messages[-1] if result.state.messages else None
        # The agent's reply: a turn paused for approval has not answered yet.
        if status == "completed" and last is not None and last.role == "assistant":
            await signal(
                "agent_response",
                conversation_id=self.conversation_id,
                run_id=self.run_id,
                message=last.to_dict(),
            )
        return await self._end(Ending(status=status, usage=usage))

    async def _end_anyway(self, error: str) -> str:
        """End the run as an error after a failure the turn did not handle."""
        return await self._end(Ending.failed(error))

    async def _end_error(self, error: str, error_type: str = "agent_error") -> str:
        return await self._end(Ending.failed(error, error_type))

    async def _end(self, ending: Ending) -> str:
        """End the run (``ending.end_run``: the one way a run ends) and publish
        its events through this turn's publisher, the conversation's only one
        while the turn holds it."""
        assert self.publisher is not None
        if self.lost:
            return "lost"
        ending = replace(
            ending,
            cost=cost_of(self.agent, ending.usage),
            interrupt_data=self.state.interrupt_data,
            carry_own=not self.delivered,
        )
        ended = await db(end_run)(
            self.scope,
            self.agent_run,
            ending,
            display=self.display,
            context=self.context(),
        )
        try:
            for event, data in ended.events():
                await self.publisher.publish(event, data)
        except Exception:
            # The run has ended; a client that missed the frames resyncs.
            logger.exception("Publishing the end of run %s failed", self.run_id)
        return ending.status

    async def _mark_cancelled_cards(self, state: State) -> None:
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
                assert self.publisher is not None
                await self.publisher.publish(
                    "display_message_updated",
                    {"display_message": display_message_json(row)},
                )

    async def _publish_status(self, status: str) -> None:
        assert self.publisher is not None
        await self.publisher.publish(
            "status_changed", {"status": status, "run_id": self.run_id}
        )
        await signal(
            "status_changed",
            conversation_id=self.conversation_id,
            status=status,
            run_id=self.run_id,
        )

    def _run_info(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "trigger": self.agent_run.trigger}


def snapshot(state: State) -> dict[str, Any]:
    """What an inspector sees of the state at a step end (not the whole history:
    it would not fit a channel-layer message)."""
    return {
        "message_count": len(state.messages),
        "todos": [t.to_dict() for t in state.todos],
        "metadata_keys": sorted(state.metadata),
        "interrupted": bool(state.interrupt_data),
    }


def _filesystem_scope(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value
