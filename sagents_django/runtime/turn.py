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
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from sagents_django.conf import sagents_settings
from sagents_django.core import (
    Agent,
    AgentResult,
    CancelToken,
    Inbox,
    InvalidResume,
    Message,
    State,
)
from sagents_django.core.exceptions import LLMError, TurnStopped
from sagents_django.core.filesystem.debounce import (
    flush_pending_writes,
    has_pending_writes,
)
from sagents_django.core.middleware.base import fold_hooks
from sagents_django.core.middleware.patch_tool_calls import patch_dangling_tool_calls
from sagents_django.core.persistence import (
    Lifecycle,
    PersistenceContext,
)
from sagents_django.core.serialization import (
    serialize_server_state,
)
from sagents_django.models import AgentRun
from sagents_django.persistence import (
    DjangoAgentPersistence,
    record_failure,
)
from sagents_django.scope import Scope
from sagents_django.services.sql import unit

from . import control, draining, runs
from .agents import cost_of
from .checkpoints import Checkpoints
from .database import db
from .ending import Ended, Ending, closing_signals, end_run, end_with_state
from .events_out import asignal
from .journal import DatabaseJournal
from .publisher import Publisher, display_message_json
from .recorder import Recorder
from .requests import RunRequest
from .tenure import Tenure

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


Start = Literal["fresh", "continuing", "ended_saved"]
"""Where an attempt starts: the run's request on the stored state; a takeover going
on from the last checkpoint of the attempt before (whose messages reached it); or a
takeover of a run whose whole state was saved (only its ending was lost)."""


class QueueLimit(Exception):
    """Queued messages started too many turns in a row."""


@dataclass(kw_only=True, eq=False)
class Turn:
    """One attempt at a run: opened (``runtime.opening``: the agent built, the
    state loaded), run, and settled by the one ending (``runtime.ending``). Its tenure of the run and the
    recording of what the agent does are objects of their own."""

    agent_run: AgentRun
    scope: Scope
    request: RunRequest
    conversation_id: str
    agent_id: str
    tenure: Tenure
    recorder: Recorder
    publisher: Publisher
    filesystem_scope: Any = None
    agent: Agent | None = None
    setup_error: Exception | None = None
    state: State = field(default_factory=State)
    revision: int = 0
    agent_persistence: Any = field(default_factory=DjangoAgentPersistence)
    """The site's agent persistence (``SAGENTS["AGENT_PERSISTENCE"]``)."""
    cancel: CancelToken = field(default_factory=CancelToken)
    inbox: Inbox = field(default_factory=Inbox)
    start: Start = "fresh"
    delivered: bool = False
    """Whether the run's own messages reached the state (else the run of the
    messages queued on it takes them along)."""

    @property
    def run_id(self) -> str:
        return str(self.agent_run.pk)

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

    # Running (on the runtime loop) ---------------------------------------------
    async def end_abandoned(self, error: str) -> str:
        """End a run whose workers kept dying as an error (the sweeper's last word),
        keeping the steps they checkpointed."""
        try:
            if self.start == "continuing" and self.agent is not None:
                messages = patch_dangling_tool_calls(
                    self.state.messages, include_last=True
                )
                await self._save(self.state.set_messages(messages), "on_error")
            return await self._end_error(error, error_type="worker_lost")
        finally:
            with contextlib.suppress(Exception):
                await self.publisher.aclose()

    async def run(self) -> str:
        handle = control.TurnHandle(
            self.conversation_id, self.run_id, self.cancel, self.inbox
        )
        status = "error"
        loop = asyncio.get_running_loop()
        stop_listening = draining.on_drain(
            lambda: loop.call_soon_threadsafe(self.tenure.hand_off)
        )
        try:
            async with control.listening(handle):
                heart = asyncio.ensure_future(self.tenure.heartbeat())
                try:
                    status = await self._run()
                except Exception as exc:
                    # Outside the turn's own handling (its database failed at its
                    # start or its end): the run must still end, or its
                    # conversation stays held.
                    logger.exception("Run %s failed outside its turn", self.run_id)
                    status = await self._end_error(f"{type(exc).__name__}: {exc}")
                finally:
                    heart.cancel()
                    with contextlib.suppress(BaseException):
                        await heart
        finally:
            stop_listening()
            with contextlib.suppress(Exception):
                await self.publisher.aclose()
        return status

    async def _run(self) -> str:
        if self.setup_error is not None or self.agent is None:
            error = self.setup_error or RuntimeError("no agent")
            return await self._end_error(f"{type(error).__name__}: {error}")
        # The claim read the row: a cancel asked before it is seen here, one asked
        # later reaches the turn by its control channel or its heartbeat.
        if self.cancel.cancelled or self.agent_run.cancel_requested:
            return await self._end(Ending.cancelled())
        if self.tenure.handed_off:
            return await self.tenure.release()
        await self._publish_status("running")
        await self.publisher.publish(
            "run_started", {**self._run_info(), "attempt": self.agent_run.attempts}
        )
        try:
            self.state = await self._server_start(self.state)
            try:
                outcome = await self._start()
            finally:
                await _store_pending_files()
            await self.recorder.flush()  # calls of a step cut short
            if self.tenure.lost:
                return "lost"
            if self.tenure.handed_off:
                return await self.tenure.release()
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
        return await fold_hooks(self.agent.middleware, "on_server_start", state)

    async def _start(self) -> AgentResult:
        assert self.agent is not None
        options: dict[str, Any] = {
            "callbacks": [self.recorder.callbacks()],
            "cancel": self.cancel,
            "inbox": self.inbox,
        }
        first = (
            self.agent_run.attempts <= 1 and self.agent_run.checkpoint_revision is None
        )
        options["journal"] = self.recorder.journal = DatabaseJournal(
            self.tenure.lease, inherited=self._inherited_calls(), fresh=first
        )
        continuing = self.start == "continuing"
        if self.start == "ended_saved" or (continuing and self.state.interrupt_data):
            # An earlier attempt saved how the turn ended, or paused it.
            return AgentResult(
                status="interrupted" if self.state.interrupt_data else "completed",
                state=self.state,
                interrupt_data=self.state.interrupt_data,
            )
        if continuing:
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
            self.recorder.note_resumable(self.state)
            rows = await db(self.recorder.record_decisions)(self.state, decisions)
            for row in rows:
                await self.publisher.publish(
                    "display_message_updated",
                    {"display_message": display_message_json(row)},
                )
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
                user = (
                    Message.from_dict(entry.llm)
                    if entry.llm is not None
                    else Message.user(entry.text)
                )
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

    def _inherited_calls(self) -> list[str]:
        """The calls an earlier attempt issued that this one may find half done:
        those of the reply it goes on from, when it is not the first attempt."""
        if self.agent_run.attempts <= 1 or not self.state.messages:
            return []
        last = self.state.messages[-1]
        return [c.call_id for c in last.tool_calls] if last.role == "assistant" else []

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
            self.tenure.lose()
            return False
        except Exception as exc:
            logger.exception("The state of %s was not saved", self.agent_id)
            await db(record_failure)(
                self.scope, context, exc, kind="state", operation=lifecycle
            )
            return False
        self.state, self.revision = state, row.revision
        self.recorder.checkpoints = Checkpoints(
            lease=self.tenure.lease,
            base_revision=row.revision,
            state=state,
            declared=declare,
        )
        return True

    def _save_whole(
        self, data: dict[str, Any], context: PersistenceContext, declare: bool
    ) -> Any:
        # A unit: no savepoint around the save (a failure fails the whole write).
        with unit():
            return self._write_whole(data, context, declare)

    def _write_whole(
        self, data: dict[str, Any], context: PersistenceContext, declare: bool
    ) -> Any:
        lease = self.tenure.lease
        if not declare and not runs.held(lease).exists():
            raise runs.LeaseLost(f"Run {self.run_id} was taken over")
        row = self.agent_persistence.save_state(self.scope, data, context)
        # Declaring is the fence too: a run no longer held updates nothing, and
        # the save is rolled back with it.
        if declare and not runs.held(lease).update(checkpoint_revision=row.revision):
            raise runs.LeaseLost(f"Run {self.run_id} was taken over")
        return row

    async def _settle_at_once(self, result: AgentResult) -> str | None:
        """A turn that completed or paused: its last save and its ending in one
        transaction (``ending.end_with_state``). None when that failed, with
        nothing written: ``_settle`` then saves and ends apart."""
        status, state = result.status, result.state
        ending = Ending(
            status=status,
            usage=result.usage,
            interrupt_data=state.interrupt_data,
            carry_own=not self.delivered,
        )
        context = self.context(LIFECYCLES[status])
        try:
            data = serialize_server_state(state)
            row, ended = await db(self._settle_on_database)(
                data, context, ending, closing_signals(result)
            )
        except Exception as exc:
            logger.info("Saving and ending run %s at once failed: %r", self.run_id, exc)
            return None
        self.state, self.revision = state, row.revision
        await self._publish_ended(ended)
        return ending.status

    def _settle_on_database(
        self,
        data: dict[str, Any],
        context: PersistenceContext,
        ending: Ending,
        signals: list[tuple[str, dict[str, Any]]],
    ) -> Any:
        about = {"conversation_id": self.conversation_id, "run_id": self.run_id}
        return end_with_state(
            self.scope,
            self.agent_run,
            replace(ending, cost=cost_of(self.agent, ending.usage)),
            save=lambda: self._write_whole(data, context, False),
            signals=[(name, {**about, **kwargs}) for name, kwargs in signals],
            display=self.recorder.display,
            context=self.context(),
        )

    async def _settle(self, result: AgentResult) -> str:
        status = result.status
        usage = result.usage
        await self.recorder.queue_rest(result.queued_messages)
        if status in ("completed", "interrupted") and not self.tenure.lost:
            settled = await self._settle_at_once(result)
            if settled is not None:
                return settled
        if not await self._save(result.state, LIFECYCLES[status]):
            if self.tenure.lost:
                return "lost"
            return await self._end(
                Ending.failed(NOT_SAVED, "state_not_saved", retryable=True, usage=usage)
            )
        if status == "cancelled":
            await self.recorder.mark_cancelled_cards(result.state)
            return await self._end(Ending.cancelled(usage=usage))
        if status == "error":
            exc = result.exception
            kind = "provider_error" if isinstance(exc, LLMError) else "agent_error"
            return await self._end(
                Ending.failed(
                    result.error or "The turn failed",
                    exc.reason if isinstance(exc, TurnStopped) else kind,
                    retryable=bool(getattr(exc, "retryable", False)),
                    usage=usage,
                    details=exc.data if isinstance(exc, TurnStopped) else {},
                )
            )
        for name, kwargs in closing_signals(result):
            await asignal(
                name, conversation_id=self.conversation_id, run_id=self.run_id, **kwargs
            )
        return await self._end(Ending(status=status, usage=usage))

    def _end_on_database(self, ending: Ending) -> Any:
        # The price comes from litellm's cost map, whose first use imports litellm
        # (seconds): never on the turn's loop, which streams every other turn.
        ending = replace(
            ending,
            cost=cost_of(self.agent, ending.usage),
            model=self.agent.model.name if self.agent is not None else "",
        )
        return end_run(
            self.scope,
            self.agent_run,
            ending,
            display=self.recorder.display,
            context=self.context(),
        )

    async def _end_error(self, error: str, error_type: str = "agent_error") -> str:
        return await self._end(Ending.failed(error, error_type))

    async def _end(self, ending: Ending) -> str:
        """End the run (``ending.end_run``: the one way a run ends) and publish
        its events through this turn's publisher, the conversation's only one
        while the turn holds it."""
        if self.tenure.lost:
            return "lost"
        ending = replace(
            ending,
            interrupt_data=self.state.interrupt_data,
            carry_own=not self.delivered,
        )
        await self._publish_ended(await db(self._end_on_database)(ending))
        return ending.status

    async def _publish_ended(self, ended: Ended) -> None:
        try:
            for event, data in ended.events():
                await self.publisher.publish(event, data)
        except Exception:
            # The run has ended; a client that missed the frames resyncs.
            logger.exception("Publishing the end of run %s failed", self.run_id)

    async def _publish_status(self, status: str) -> None:
        await self.publisher.publish(
            "status_changed", {"status": status, "run_id": self.run_id}
        )
        await asignal(
            "status_changed",
            conversation_id=self.conversation_id,
            status=status,
            run_id=self.run_id,
        )

    def _run_info(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "trigger": self.agent_run.trigger}


async def _store_pending_files() -> None:
    """Debounced file writes reach storage before the run is settled or handed
    over: the next turn, or the worker that takes this one over, reads storage, not
    this process's memory (a handed-over turn stops after a step's tools, before
    the model call whose ``before_model`` would have flushed them)."""
    if has_pending_writes():
        await asyncio.to_thread(flush_pending_writes)
