"""AgentServer: Sagents' verbs over the database, an executor and the channel layer.

Sagents keeps a process per conversation; here nothing stays between turns. Each verb
takes the caller's scope first and the conversation's id; a conversation the scope
does not own is ``NotFound``, exactly like one that does not exist. Every verb has a
sync form and an async one prefixed with ``a`` (``execute`` / ``aexecute``).

A turn starts as an ``AgentRun`` created in the same transaction as the message that
caused it (the database refuses a second active run of a conversation) and is handed
to the executor after commit (``SAGENTS["EXECUTOR"]``: inline or Celery). Events
about rows are published after their transaction commits.

    from sagents_django.runtime import agent_server

    submission = agent_server.add_message(scope, conversation.pk, "Hello")
    agent_server.cancel(scope, conversation.pk)
"""

from __future__ import annotations

import fnmatch
import json
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import datetime
from functools import wraps
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar

from asgiref.sync import async_to_sync
from django.db import transaction
from django.utils import timezone

from sagents_django import services
from sagents_django.conf import sagents_settings
from sagents_django.core import State, TokenUsage
from sagents_django.core.approvals import decisions_from_list, interrupt_from_dict
from sagents_django.core.exceptions import InvalidResume
from sagents_django.core.middleware.base import call_hook
from sagents_django.core.persistence import SyntheticMessage
from sagents_django.core.serialization import (
    deserialize_server_state,
    serialize_server_state,
)
from sagents_django.exceptions import Conflict, InvalidInput, NotFound, RunConflict
from sagents_django.models import ACTIVE_RUN_STATUSES, AgentRun, AgentState
from sagents_django.scope import Scope
from sagents_django.services.conversations import conversation_pk, owned_conversations
from sagents_django.services.validation import clean_json, clean_mapping, message_text

from . import control, groups, layer, runs, viewers, waiting
from .database import db
from .events_out import after_commit, signal_after_commit
from .executors import get_executor
from .publisher import display_message_json, publish
from .turn import CANCELLED_TEXT, build_agent, start_queued

logger = logging.getLogger(__name__)

Status = Literal["idle", "running", "interrupted", "cancelled", "error", "not_running"]

MAX_EVENT_NAME = 64
MAX_EVENT_BYTES = 256 * 1024
"""A published event's JSON and a middleware notification are bounded (they travel
over the channel layer, whose messages should stay small)."""

WAITS_FOR_DECISIONS = (
    "The conversation waits for decisions on its pending approval; resume it "
    "with them first"
)

RESUMING = (
    "The answer to the pending approval is being applied; send the message once "
    "that turn ends"
)

_P = ParamSpec("_P")
_R = TypeVar("_R")


@dataclass(frozen=True, slots=True)
class Submission:
    """What ``add_message`` did: the run that will answer and whether the message
    waits for a running turn to end (``queued``)."""

    run_id: str | None
    queued: bool
    message_ids: list[str] = field(default_factory=list)


def _async(
    sync: Callable[Concatenate[AgentServer, _P], _R],
) -> Callable[Concatenate[AgentServer, _P], Coroutine[Any, Any, _R]]:
    """The ``a`` form of a verb: the sync one on the runtime's database threads."""

    @wraps(sync)
    async def verb(self: AgentServer, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return await db(sync)(self, *args, **kwargs)

    verb.__doc__ = f"``{sync.__name__}`` for async code."
    return verb


class AgentServer:
    """The verbs of Sagents' AgentServer, by conversation, scope first."""

    # Messages and turns ------------------------------------------------------------
    def add_message(
        self,
        scope: Scope,
        conversation_id: Any,
        text: Any,
        *,
        metadata: dict[str, Any] | None = None,
        filesystem_scope: Any = None,
    ) -> Submission:
        """Save the user's message (shown at once) and have the agent answer it.

        Idle: a run starts (``Submission.run_id``). While a turn runs, the site's
        ``SAGENTS["DOUBLE_TEXT"]`` policy decides: "enqueue" keeps the message for
        a run right after the current one (``queued=True``, a ``message_queued``
        event), "reject" raises ``RunConflict`` and writes nothing, "interrupt"
        queues it and cancels the current turn. While an approval is pending,
        ``Conflict``. A bad message is ``InvalidInput`` before anything is written.
        """
        text = message_text(text)
        extra = _metadata(metadata)
        pk = conversation_pk(conversation_id)
        for attempt in range(5):
            try:
                return self._add_message(scope, pk, text, extra, filesystem_scope)
            except RunConflict:
                # A turn ended and its queued messages' run began between our
                # look and our write: look again (a real "reject" raises at once).
                if attempt == 4 or sagents_settings.DOUBLE_TEXT == "reject":
                    raise
        raise AssertionError("unreachable")

    def _add_message(
        self,
        scope: Scope,
        pk: Any,
        text: str,
        extra: dict[str, Any],
        filesystem_scope: Any,
    ) -> Submission:
        policy = sagents_settings.DOUBLE_TEXT
        with transaction.atomic():
            _require(scope, pk, lock=True)
            active = (
                AgentRun.objects.select_for_update()
                .filter(conversation_id=pk, status__in=ACTIVE_RUN_STATUSES)
                .first()
            )
            if _interrupt_pending(pk):
                # Answered already (its resume runs) or still waiting for answers.
                raise Conflict(RESUMING if active is not None else WAITS_FOR_DECISIONS)
            if active is not None and policy == "reject":
                raise RunConflict(pk, run_id=active.pk)
            row = services.append_text_message(
                scope,
                pk,
                "user",
                text,
                metadata={**extra, "queued": active is not None},
            )
            entry = {"text": text, "metadata": extra, "display_ids": [row.pk]}
            after_commit(
                pk,
                "display_message_saved",
                {"display_message": display_message_json(row)},
            )
            signal_after_commit(
                "message_received",
                conversation_id=str(pk),
                run_id=str(active.pk) if active else None,
                display_message_ids=[row.pk],
            )
            if active is None:
                run = self._begin(
                    scope, pk, "message", filesystem_scope, messages=[entry]
                )
                return Submission(str(run.pk), False, [str(row.pk)])
            meta = dict(active.metadata or {})
            meta["queued"] = [*meta.get("queued", []), entry]
            active.metadata = meta
            active.save(update_fields=["metadata"])
            after_commit(
                pk,
                "message_queued",
                {
                    "run_id": str(active.pk),
                    "display_message": display_message_json(row),
                    "policy": policy,
                },
            )
            if policy == "interrupt":
                self._request_cancel(scope, pk, "A new message interrupted the turn")
            return Submission(str(active.pk), True, [str(row.pk)])

    def execute(
        self, scope: Scope, conversation_id: Any, *, filesystem_scope: Any = None
    ) -> str:
        """Run the agent on the stored state as it is (after a restore, or to retry
        a failed turn); the run's id. ``RunConflict`` while a turn runs,
        ``Conflict`` while an approval is pending."""
        pk = conversation_pk(conversation_id)
        with transaction.atomic():
            _require(scope, pk, lock=True)
            if _interrupt_pending(pk):
                raise Conflict(WAITS_FOR_DECISIONS)
            return str(self._begin(scope, pk, "execute", filesystem_scope).pk)

    def resume(
        self,
        scope: Scope,
        conversation_id: Any,
        decisions: Any,
        *,
        filesystem_scope: Any = None,
    ) -> str:
        """Continue a turn paused for approval with the person's decisions (the
        core's decision JSON, one per action request); the run's id. The first
        resume of an interrupt wins: a second gets ``Conflict`` (or ``RunConflict``
        while the first still runs). Decisions of the wrong shape are
        ``InvalidInput`` and change nothing."""
        try:
            checked = decisions_from_list(decisions)
        except InvalidResume as exc:
            raise InvalidInput(str(exc)) from None
        as_json = [d.to_dict() for d in checked]
        as_json = _bounded(as_json, "decisions")
        pk = conversation_pk(conversation_id)
        with transaction.atomic():
            _require(scope, pk, lock=True)
            revision = services.state_revision(scope, pk)
            pending = _pending_interrupt(pk)
            if not pending:
                raise Conflict("Nothing to resume: no approval is pending")
            _fit(checked, pending)
            run = self._begin(
                scope,
                pk,
                "resume",
                filesystem_scope,
                decisions=as_json,
                revision=revision,
            )
        return str(run.pk)

    def cancel(self, scope: Scope, conversation_id: Any) -> bool:
        """Stop the conversation's running turn, from any process; False when no
        turn runs. The turn stops within the core's bound and keeps its partial
        reply."""
        pk = conversation_pk(conversation_id)
        return self._request_cancel(scope, pk, "Cancelled")

    def _request_cancel(self, scope: Scope, pk: Any, reason: str) -> bool:
        with transaction.atomic():
            run = services.request_cancel(scope, pk)
            if run is None:
                return False
            if runs.end_unattended(run, stale_after=sagents_settings.LEASE_SECONDS):
                # Nobody runs it (not started yet, or its process died): it ends
                # here, and the runs of messages queued on it start.
                _ended_here(scope, pk, run)
                return True
        message = {"action": "cancel", "run_id": str(run.pk), "reason": reason}
        transaction.on_commit(lambda: _control(pk, message))
        return True

    def _begin(
        self,
        scope: Scope,
        pk: Any,
        trigger: str,
        filesystem_scope: Any,
        **payload: Any,
    ) -> AgentRun:
        meta = {
            "scope": scope.to_dict(),
            "filesystem_scope": _json_scope(filesystem_scope),
            **payload,
        }
        run = services.begin_run(scope, pk, trigger=trigger, queued=True, metadata=meta)
        get_executor().submit(str(run.pk))
        return run

    # Status and state ---------------------------------------------------------------
    def get_status(self, scope: Scope, conversation_id: Any) -> Status:
        """idle, running, interrupted, cancelled, error, or not_running (no run, no
        viewer and nothing for ``SAGENTS["INACTIVITY_TIMEOUT"]`` seconds: what
        Sagents' shut-down agent is here)."""
        pk = conversation_pk(conversation_id)
        _require(scope, pk)
        runs = AgentRun.objects.filter(conversation_id=pk)
        if runs.filter(status__in=ACTIVE_RUN_STATUSES).exists():
            return "running"
        if _interrupt_pending(pk):
            return "interrupted"
        if not _active_recently(pk):
            return "not_running"
        last = runs.order_by("-created_at").values_list("status", flat=True).first()
        if last in ("cancelled", "error"):
            return last  # type: ignore[return-value]
        return "idle"

    def get_info(self, scope: Scope, conversation_id: Any) -> dict[str, Any]:
        """Status, the state (a ``State``), its pending interrupt and the last
        error, as Sagents' ``get_info``."""
        pk = conversation_pk(conversation_id)
        conversation = _require(scope, pk)
        status = self.get_status(scope, pk)
        last = (
            AgentRun.objects.filter(conversation_id=pk).order_by("-created_at").first()
        )
        state = _load_state(scope, conversation)
        return {
            "status": status,
            "state": state,
            "interrupt_data": state.interrupt_data,
            "error": last.error
            if last is not None and last.status == "error"
            else None,
            "run_id": str(last.pk) if last is not None else None,
        }

    def get_metadata(self, scope: Scope, conversation_id: Any) -> dict[str, Any]:
        pk = conversation_pk(conversation_id)
        conversation = _require(scope, pk)
        active = services.active_run(scope, pk)
        return {
            "status": self.get_status(scope, pk),
            "last_activity_at": _last_activity(pk),
            "conversation_id": str(pk),
            "agent_id": conversation.agent_id,
            "node": active.lease_owner or None if active is not None else None,
        }

    def export_state(self, scope: Scope, conversation_id: Any) -> dict[str, Any] | None:
        """The stored state envelope (``{"version", "state", "serialized_at"}``), or
        None when the conversation has no state yet."""
        pk = conversation_pk(conversation_id)
        _require(scope, pk)
        return services.load_agent_state(scope, pk)

    def restore_state(
        self, scope: Scope, conversation_id: Any, persisted_state: Any
    ) -> None:
        """Replace the state with an exported envelope (checked by reading it back
        first); ``RunConflict`` while a turn runs, ``InvalidInput`` for an envelope
        that cannot be read."""
        pk = conversation_pk(conversation_id)
        conversation = _require(scope, pk)
        if not isinstance(persisted_state, dict):
            raise InvalidInput("persisted_state must be an exported state envelope")
        agent = build_agent(conversation.agent_id, scope, None)
        try:
            state = deserialize_server_state(
                agent.agent_id, persisted_state, middleware=agent.middleware
            )
        except Exception as exc:
            raise InvalidInput(f"The state cannot be read: {exc}") from None
        self._replace_state(scope, pk, state, "restore")

    def update_agent_and_state(
        self, scope: Scope, conversation_id: Any, state: State
    ) -> None:
        """Save ``state`` as the conversation's. The agent is the factory's on every
        turn (config lives in code), so only the state is taken."""
        if not isinstance(state, State):
            raise InvalidInput(f"state must be a State, not {type(state).__name__}")
        pk = conversation_pk(conversation_id)
        _require(scope, pk)
        self._replace_state(scope, pk, state, "update")

    def reset(self, scope: Scope, conversation_id: Any) -> None:
        """Start the conversation's agent afresh: messages, todos and any pending
        interrupt are cleared, metadata is kept. Files the agent keeps in storage
        stay (as Sagents keeps persisted files); the transcript people see stays."""
        pk = conversation_pk(conversation_id)
        conversation = _require(scope, pk)
        state = _load_state(scope, conversation)
        fresh = State(agent_id=state.agent_id, metadata=dict(state.metadata))
        self._replace_state(scope, pk, fresh, "reset")
        after_commit(pk, "agent_state_update", {"reason": "reset"})

    def _replace_state(self, scope: Scope, pk: Any, state: State, why: str) -> None:
        """Write ``state`` while holding the conversation (a short run), so no turn
        overwrites it or is overwritten."""
        data = serialize_server_state(state)
        with transaction.atomic():
            run = services.begin_run(scope, pk, trigger=why)
            services.save_agent_state(scope, pk, data)
            services.finish_run(scope, run.pk, status="completed")

    # Middleware and events ----------------------------------------------------------
    def notify_middleware(
        self, scope: Scope, conversation_id: Any, middleware_id: str, message: Any
    ) -> None:
        """Deliver ``message`` (JSON) to the middleware ``middleware_id``'s
        ``handle_message``: at the next step of a running turn, or now when idle,
        with the state saved. An unknown middleware is logged and skipped."""
        if not isinstance(middleware_id, str) or not middleware_id:
            raise InvalidInput("middleware_id must be a middleware's id (a string)")
        message = _bounded(message, "message")
        pk = conversation_pk(conversation_id)
        conversation = _require(scope, pk)
        note = {"middleware_id": middleware_id, "message": message}
        with transaction.atomic():
            active = (
                AgentRun.objects.select_for_update()
                .filter(conversation_id=pk, status__in=ACTIVE_RUN_STATUSES)
                .first()
            )
            if active is not None:
                meta = dict(active.metadata or {})
                meta["notifications"] = [*meta.get("notifications", []), note]
                active.metadata = meta
                active.save(update_fields=["metadata"])
                envelope = {"action": "notify", "run_id": str(active.pk), **note}
                transaction.on_commit(lambda: _control(pk, envelope))
                return
            run = services.begin_run(scope, pk, trigger="notify")
        try:
            self._apply_now(scope, conversation, middleware_id, message)
        finally:
            services.finish_run(scope, run.pk, status="completed")

    def _apply_now(
        self, scope: Scope, conversation: Any, middleware_id: str, message: Any
    ) -> None:
        agent = build_agent(conversation.agent_id, scope, None)
        entry = agent.get_middleware(middleware_id)
        if entry is None:
            logger.warning("No middleware %r to take a message", middleware_id)
            return
        state = _load_state(scope, conversation, agent=agent)
        revision = services.state_revision(scope, conversation.pk)
        outcome = async_to_sync(call_hook)(
            entry.middleware.handle_message, message, state
        )
        if isinstance(outcome, State):
            services.save_agent_state(
                scope,
                conversation.pk,
                serialize_server_state(outcome),
                expected_revision=revision,
            )

    def publish_event_from(
        self, scope: Scope, conversation_id: Any, event: str, data: Any
    ) -> None:
        """Publish ``event`` with ``data`` (a JSON object) to the conversation's
        subscribers, as a middleware would."""
        self._publish(scope, conversation_id, event, data, debug=False)

    def publish_debug_event_from(
        self, scope: Scope, conversation_id: Any, event: str, data: Any
    ) -> None:
        """Publish to the conversation's debug subscribers (inspectors)."""
        self._publish(scope, conversation_id, event, data, debug=True)

    def _publish(
        self, scope: Scope, conversation_id: Any, event: Any, data: Any, *, debug: bool
    ) -> None:
        if not isinstance(event, str) or not 0 < len(event) <= MAX_EVENT_NAME:
            raise InvalidInput(f"event must be a name of 1 to {MAX_EVENT_NAME} chars")
        if not isinstance(data, dict):
            raise InvalidInput("data must be a JSON object")
        data = _bounded(data, "data")
        pk = conversation_pk(conversation_id)
        _require(scope, pk)
        from . import loop

        def send() -> None:
            loop.submit(publish(pk, event, data, debug=debug))

        transaction.on_commit(send)

    def save_synthetic_message(
        self, scope: Scope, conversation_id: Any, message: SyntheticMessage
    ) -> Any:
        """Add a row of the runtime's own to the transcript (a notice, an error),
        published as ``display_message_saved``; the row."""
        if not isinstance(message, dict):
            raise InvalidInput("message must be a display row: message_type, ...")
        pk = conversation_pk(conversation_id)
        [row] = services.append_display_messages(scope, pk, [dict(message)])
        after_commit(
            pk, "display_message_saved", {"display_message": display_message_json(row)}
        )
        return row

    # Subscriptions and presence -----------------------------------------------------
    async def asubscribe(
        self, scope: Scope, conversation_id: Any, channel_name: str
    ) -> None:
        """Send the conversation's events to ``channel_name`` (a consumer's)."""
        pk = await self._arequire(scope, conversation_id)
        await layer.group_add(groups.conversation_group(pk), channel_name)
        await viewers.aadd(str(pk), channel_name)

    async def aunsubscribe(
        self, scope: Scope, conversation_id: Any, channel_name: str
    ) -> None:
        """Stop sending the conversation's events to ``channel_name``; the last
        viewer leaving an idle conversation publishes ``agent_shutdown``."""
        pk = await self._arequire(scope, conversation_id)
        await layer.group_discard(groups.conversation_group(pk), channel_name)
        await viewers.release(str(pk), channel_name)

    async def asubscribe_debug(
        self, scope: Scope, conversation_id: Any, channel_name: str
    ) -> None:
        pk = await self._arequire(scope, conversation_id)
        await layer.group_add(groups.debug_group(pk), channel_name)

    async def aunsubscribe_debug(
        self, scope: Scope, conversation_id: Any, channel_name: str
    ) -> None:
        pk = await self._arequire(scope, conversation_id)
        await layer.group_discard(groups.debug_group(pk), channel_name)

    async def _arequire(self, scope: Scope, conversation_id: Any) -> Any:
        pk = conversation_pk(conversation_id)
        await db(_require)(scope, pk)
        return pk

    def subscribe(self, scope: Scope, conversation_id: Any, channel_name: str) -> None:
        async_to_sync(self.asubscribe)(scope, conversation_id, channel_name)

    def unsubscribe(
        self, scope: Scope, conversation_id: Any, channel_name: str
    ) -> None:
        async_to_sync(self.aunsubscribe)(scope, conversation_id, channel_name)

    def subscribe_debug(
        self, scope: Scope, conversation_id: Any, channel_name: str
    ) -> None:
        async_to_sync(self.asubscribe_debug)(scope, conversation_id, channel_name)

    def unsubscribe_debug(
        self, scope: Scope, conversation_id: Any, channel_name: str
    ) -> None:
        async_to_sync(self.aunsubscribe_debug)(scope, conversation_id, channel_name)

    def touch(self, scope: Scope, conversation_id: Any) -> None:
        """Mark activity (a person looking), which keeps the conversation from
        counting as inactive."""
        pk = conversation_pk(conversation_id)
        _require(scope, pk)
        viewers.touch(str(pk))

    def get_inactivity_status(
        self, scope: Scope, conversation_id: Any
    ) -> dict[str, Any]:
        """Sagents' inactivity status: the timeout (ms), the last activity, whether
        the "timer" runs (no run and no viewer) and the ms since activity."""
        pk = conversation_pk(conversation_id)
        _require(scope, pk)
        timeout = sagents_settings.INACTIVITY_TIMEOUT
        last = _last_activity(pk)
        busy = (
            AgentRun.objects.filter(
                conversation_id=pk, status__in=ACTIVE_RUN_STATUSES
            ).exists()
            or viewers.count(str(pk)) > 0
        )
        since = None
        if last is not None:
            since = int((timezone.now() - last).total_seconds() * 1000)
        return {
            "inactivity_timeout": timeout * 1000 if timeout is not None else None,
            "last_activity_at": last,
            "timer_active": timeout is not None and not busy,
            "time_since_activity": since,
        }

    # Listing --------------------------------------------------------------------------
    def list_running_agents(self, scope: Scope) -> list[str]:
        """The agent ids of the scope's conversations with a turn running."""
        _check_scope(scope)
        ids = (
            AgentRun.objects.filter(
                status__in=ACTIVE_RUN_STATUSES,
                conversation__in=owned_conversations(scope).values("pk"),
            )
            .order_by("created_at")
            .values_list("conversation_id", flat=True)
        )
        return [f"conversation-{pk}" for pk in ids]

    def list_agents_matching(self, scope: Scope, pattern: str) -> list[str]:
        """``list_running_agents`` filtered by a glob (``*`` any run of chars)."""
        if not isinstance(pattern, str) or len(pattern) > 255:
            raise InvalidInput("pattern must be a glob string of at most 255 chars")
        return [
            a
            for a in self.list_running_agents(scope)
            if fnmatch.fnmatchcase(a, pattern)
        ]

    def agent_count(self, scope: Scope) -> int:
        return len(self.list_running_agents(scope))

    def agent_info(self, scope: Scope, agent_id: str) -> dict[str, Any] | None:
        """Status and state of a running agent (None when not running or not the
        scope's), as Sagents' ``agent_info``."""
        if not isinstance(agent_id, str) or agent_id not in self.list_running_agents(
            scope
        ):
            return None
        pk = agent_id.removeprefix("conversation-")
        info = self.get_info(scope, pk)
        state = info["state"]
        return {
            "agent_id": agent_id,
            "status": info["status"],
            "state": state,
            "message_count": len(state.messages),
            "has_interrupt": bool(state.interrupt_data),
        }

    # Waiting ------------------------------------------------------------------------
    def wait_run(
        self,
        scope: Scope,
        conversation_id: Any,
        run_id: Any,
        *,
        timeout: float = waiting.DEFAULT_TIMEOUT,
        follow: bool = True,
    ) -> waiting.RunOutcome:
        """Block until the run ends (with ``follow``, the runs of messages queued
        meanwhile too); how it ended. ``RunTimeout`` after ``timeout`` seconds (the
        run goes on), ``NotFound`` outside the scope. See ``runtime.waiting``."""
        return waiting.wait_run(
            scope, conversation_id, run_id, timeout=timeout, follow=follow
        )

    async def await_run(
        self,
        scope: Scope,
        conversation_id: Any,
        run_id: Any,
        *,
        timeout: float = waiting.DEFAULT_TIMEOUT,
        follow: bool = True,
    ) -> waiting.RunOutcome:
        """``wait_run`` for async code."""
        return await waiting.await_run(
            scope, conversation_id, run_id, timeout=timeout, follow=follow
        )

    aadd_message = _async(add_message)
    aexecute = _async(execute)
    aresume = _async(resume)
    acancel = _async(cancel)
    aget_status = _async(get_status)
    aget_info = _async(get_info)
    aget_metadata = _async(get_metadata)
    aexport_state = _async(export_state)
    arestore_state = _async(restore_state)
    aupdate_agent_and_state = _async(update_agent_and_state)
    areset = _async(reset)
    anotify_middleware = _async(notify_middleware)
    apublish_event_from = _async(publish_event_from)
    apublish_debug_event_from = _async(publish_debug_event_from)
    asave_synthetic_message = _async(save_synthetic_message)
    atouch = _async(touch)
    aget_inactivity_status = _async(get_inactivity_status)
    alist_running_agents = _async(list_running_agents)
    alist_agents_matching = _async(list_agents_matching)
    aagent_count = _async(agent_count)
    aagent_info = _async(agent_info)


agent_server = AgentServer()
"""The server every entry point uses (views, consumers, the admin, scripts)."""


# Helpers --------------------------------------------------------------------------
def _check_scope(scope: Any) -> None:
    if not isinstance(scope, Scope):
        raise InvalidInput(
            "scope must be a Scope (get_scope(request), Scope.for_user(user)), not "
            f"{type(scope).__name__}"
        )


def _require(scope: Scope, pk: Any, *, lock: bool = False) -> Any:
    """The scope's conversation (else ``NotFound``). ``lock``: its row is held to
    the end of the transaction, so the requests that start runs of one
    conversation take turns (PostgreSQL; SQLite writers take turns anyway)."""
    _check_scope(scope)
    conversation = services.get_conversation(scope, pk)
    if conversation is None:
        raise NotFound("conversation", str(pk))
    if lock:
        rows = services.conversation_model()._default_manager.select_for_update()
        list(rows.filter(pk=pk).values_list("pk", flat=True))
    return conversation


def _pending_interrupt(pk: Any) -> Any:
    """The stored interrupt data of the conversation (falsy: none pending)."""
    return (
        AgentState.objects.filter(conversation_id=pk)
        .values_list("state_data__state__interrupt_data", flat=True)
        .first()
    )


def _interrupt_pending(pk: Any) -> bool:
    return bool(_pending_interrupt(pk))


def _fit(decisions: list[Any], pending: Any) -> None:
    """Decisions that cannot answer the pending approval are ``InvalidInput``
    before a run exists: one per action request, each of a type it allows. (The
    turn checks again against the state's pending calls.)"""
    try:
        interrupt = interrupt_from_dict(pending)
    except Exception:
        return  # unreadable: the turn says what it makes of it
    requests = getattr(interrupt, "action_requests", None)
    if requests is None:
        return  # a custom interrupt: its middleware checks its own resume
    if len(decisions) != len(requests):
        raise InvalidInput(
            f"Expected {len(requests)} decision(s), one per action request, "
            f"got {len(decisions)}"
        )
    for i, (request, decision) in enumerate(zip(requests, decisions, strict=True)):
        if decision.type not in request.allowed_decisions:
            raise InvalidInput(
                f"decisions[{i}].type {decision.type!r} is not allowed for "
                f"{request.tool_name!r}; allowed: {list(request.allowed_decisions)}"
            )


def _load_state(scope: Scope, conversation: Any, *, agent: Any = None) -> State:
    agent = agent or build_agent(conversation.agent_id, scope, None)
    data = services.load_agent_state(scope, conversation.pk)
    if data is None:
        return State(agent_id=agent.agent_id)
    return deserialize_server_state(agent.agent_id, data, middleware=agent.middleware)


def _last_activity(pk: Any) -> datetime | None:
    times = [viewers.last_activity(str(pk))]
    run = AgentRun.objects.filter(conversation_id=pk).order_by("-created_at").first()
    if run is not None:
        times += [run.finished_at, run.heartbeat_at, run.created_at]
    conversations = services.conversation_model()._default_manager
    updated = conversations.filter(pk=pk).values_list("updated_at", flat=True).first()
    times.append(updated)
    known = [t for t in times if t is not None]
    return max(known) if known else None


def _active_recently(pk: Any) -> bool:
    timeout = sagents_settings.INACTIVITY_TIMEOUT
    if timeout is None or viewers.count(str(pk)) > 0:
        return True
    last = _last_activity(pk)
    return last is not None and (timezone.now() - last).total_seconds() < timeout


def _ended_here(scope: Scope, pk: Any, run: AgentRun) -> None:
    """What a turn does when it ends cancelled, for a run no turn holds: the
    transcript note, the follow-up run, the events."""
    row = services.append_text_message(
        scope, pk, "system", CANCELLED_TEXT, metadata={"kind": "cancelled"}
    )
    never_started = run.started_at is None
    run.refresh_from_db()
    follow = start_queued(scope, str(pk), run, carry_own=never_started)
    if follow is not None:
        get_executor().submit(str(follow.pk))
    after_commit(
        pk, "display_message_saved", {"display_message": display_message_json(row)}
    )
    after_commit(
        pk,
        "run_finished",
        {
            "run_id": str(run.pk),
            "trigger": run.trigger,
            "status": "cancelled",
            "error": "",
            "usage": TokenUsage().to_dict(),
            "cost": None,
            "next_run_id": str(follow.pk) if follow is not None else None,
        },
    )
    after_commit(pk, "status_changed", {"status": "cancelled", "run_id": str(run.pk)})


def _control(pk: Any, message: dict[str, Any]) -> None:
    from . import loop

    loop.submit(control.send(pk, message))


def _metadata(value: Any) -> dict[str, Any]:
    return clean_mapping(value, what="metadata", max_bytes=MAX_EVENT_BYTES)


def _bounded(value: Any, what: str) -> Any:
    """``value`` as JSON the database and the channel layer take: bounded in size
    and depth, NULs and lone surrogates replaced; else ``InvalidInput``."""
    return clean_json(value, what=what, max_bytes=MAX_EVENT_BYTES, require_dict=False)[
        0
    ]


def _json_scope(value: Any) -> Any:
    if value is None:
        return None
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        raise InvalidInput("filesystem_scope must be JSON, e.g. ['user', 42]") from None
    return list(value) if isinstance(value, tuple) else value
