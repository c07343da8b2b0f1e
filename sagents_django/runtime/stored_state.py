"""Stored-state verbs: export, restore, reset, middleware notifications, events and
rows a site adds. A write to the state holds the conversation for its duration (a
short run), so no turn overwrites it or is overwritten."""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from django.db import transaction

from sagents_django import services
from sagents_django.core import State
from sagents_django.core.middleware.base import call_hook
from sagents_django.core.persistence import SyntheticMessage
from sagents_django.core.serialization import (
    deserialize_server_state,
    serialize_server_state,
)
from sagents_django.exceptions import InvalidInput
from sagents_django.models import AgentRun
from sagents_django.scope import Scope
from sagents_django.services.conversations import (
    conversation_pk,
    refuse_lent,
    refuse_read_only,
)

from .admission import bounded, send_control, take_held
from .agents import build_agent
from .ending import Ending, end_run
from .events_out import after_commit
from .lookup import load_state, require
from .publisher import display_message_json, publish
from .requests import Notification, RunRequest

logger = logging.getLogger(__name__)

MAX_EVENT_NAME = 64


def export_state(scope: Scope, conversation_id: Any) -> dict[str, Any] | None:
    """The stored state envelope (``{"version", "state", "serialized_at"}``), or
    None when the conversation has no state yet."""
    pk = conversation_pk(conversation_id)
    refuse_lent(scope, pk)  # the owner's, not a share's
    require(scope, pk)
    return services.load_agent_state(scope, pk)


def restore_state(scope: Scope, conversation_id: Any, persisted_state: Any) -> None:
    """Replace the state with an exported envelope (checked by reading it back
    first); ``RunConflict`` while a turn runs, ``InvalidInput`` for an envelope
    that cannot be read."""
    pk = conversation_pk(conversation_id)
    refuse_lent(scope, pk)  # the owner's, not a share's
    conversation = require(scope, pk)
    if not isinstance(persisted_state, dict):
        raise InvalidInput("persisted_state must be an exported state envelope")
    agent = build_agent(conversation.agent_id, scope, None)
    try:
        state = deserialize_server_state(
            agent.agent_id, persisted_state, middleware=agent.middleware
        )
    except Exception as exc:
        raise InvalidInput(f"The state cannot be read: {exc}") from None
    _replace_state(scope, pk, state, "restore")


def update_agent_and_state(scope: Scope, conversation_id: Any, state: State) -> None:
    """Save ``state`` as the conversation's. The agent is the factory's on every
    turn (config lives in code), so only the state is taken."""
    if not isinstance(state, State):
        raise InvalidInput(f"state must be a State, not {type(state).__name__}")
    pk = conversation_pk(conversation_id)
    refuse_lent(scope, pk)  # the owner's, not a share's
    require(scope, pk)
    _replace_state(scope, pk, state, "update")


RESET_TEXT = "The agent was reset: it starts afresh from here."


def reset(scope: Scope, conversation_id: Any) -> None:
    """Start the conversation's agent afresh (Sagents' ``AgentServer.reset``):
    messages, todos and any pending interrupt are cleared, metadata is kept. Files
    the agent keeps in storage stay (Sagents keeps persisted files; files kept in
    memory only last a turn here anyway). The transcript people see stays, with a
    note saying the agent starts afresh. The one reset of the API, the chat page
    and the admin. ``RunConflict`` while a turn runs."""
    pk = conversation_pk(conversation_id)
    refuse_lent(scope, pk)  # the owner's, not a share's
    conversation = require(scope, pk)
    state = load_state(scope, conversation)
    fresh = State(agent_id=state.agent_id, metadata=dict(state.metadata))
    with transaction.atomic():
        _replace_state(scope, pk, fresh, "reset")
        note = services.append_display_message(
            scope,
            pk,
            message_type="system",
            content_type="notification",
            content={"text": RESET_TEXT, "reason": "reset"},
        )
    after_commit(
        pk, "display_message_saved", {"display_message": display_message_json(note)}
    )
    after_commit(pk, "agent_state_update", {"reason": "reset"})


def _replace_state(scope: Scope, pk: Any, state: State, why: str) -> None:
    """Write ``state`` while holding the conversation (a short run), so no turn
    overwrites it or is overwritten."""
    data = serialize_server_state(state)
    with transaction.atomic():
        run = services.begin_run(scope, pk, trigger=why)
        services.save_agent_state(scope, pk, data)
        if state.interrupt_data:
            services.finish_run(scope, run.pk, status="completed")
            return
        # No approval waits any more: the messages held for one are answered.
        held = take_held(pk)
        run.metadata = RunRequest(scope=scope.to_dict(), queued=held).to_dict()
        ended = end_run(scope, run, Ending(status="completed"))
        if ended.next_run_id is not None:
            for event, payload in ended.events():
                after_commit(pk, event, payload)


# Middleware and events ----------------------------------------------------------


def notify_middleware(
    scope: Scope, conversation_id: Any, middleware_id: str, message: Any
) -> None:
    """Deliver ``message`` (JSON) to the middleware ``middleware_id``'s
    ``handle_message``: at the next step of a running turn, or now when idle,
    with the state saved. An unknown middleware is logged and skipped."""
    if not isinstance(middleware_id, str) or not middleware_id:
        raise InvalidInput("middleware_id must be a middleware's id (a string)")
    message = bounded(message, "message")
    pk = conversation_pk(conversation_id)
    refuse_read_only(scope, pk)
    conversation = require(scope, pk)
    note = Notification(middleware_id=middleware_id, message=message)
    with transaction.atomic():
        active = AgentRun.objects.of(pk).active().select_for_update().first()
        if active is not None:
            request = RunRequest.of(active).with_notification(note)
            active.metadata = request.to_dict()
            active.save(update_fields=["metadata"])
            envelope = {"action": "notify", "run_id": str(active.pk), **note.to_dict()}
            transaction.on_commit(lambda: send_control(pk, envelope))
            return
        run = services.begin_run(scope, pk, trigger="notify")
    try:
        _apply_now(scope, conversation, middleware_id, message)
    finally:
        services.finish_run(scope, run.pk, status="completed")


def _apply_now(
    scope: Scope, conversation: Any, middleware_id: str, message: Any
) -> None:
    agent = build_agent(conversation.agent_id, scope, None)
    entry = agent.get_middleware(middleware_id)
    if entry is None:
        logger.warning("No middleware %r to take a message", middleware_id)
        return
    state = load_state(scope, conversation, agent=agent)
    revision = services.state_revision(scope, conversation.pk)
    outcome = async_to_sync(call_hook)(entry.middleware.handle_message, message, state)
    if isinstance(outcome, State):
        services.save_agent_state(
            scope,
            conversation.pk,
            serialize_server_state(outcome),
            expected_revision=revision,
        )


def publish_event_from(
    scope: Scope, conversation_id: Any, event: str, data: Any
) -> None:
    """Publish ``event`` with ``data`` (a JSON object) to the conversation's
    subscribers, as a middleware would."""
    _publish(scope, conversation_id, event, data, debug=False)


def publish_debug_event_from(
    scope: Scope, conversation_id: Any, event: str, data: Any
) -> None:
    """Publish to the conversation's debug subscribers (inspectors)."""
    _publish(scope, conversation_id, event, data, debug=True)


def _publish(
    scope: Scope, conversation_id: Any, event: Any, data: Any, *, debug: bool
) -> None:
    if not isinstance(event, str) or not 0 < len(event) <= MAX_EVENT_NAME:
        raise InvalidInput(f"event must be a name of 1 to {MAX_EVENT_NAME} chars")
    if not isinstance(data, dict):
        raise InvalidInput("data must be a JSON object")
    data = bounded(data, "data")
    pk = conversation_pk(conversation_id)
    refuse_read_only(scope, pk)
    require(scope, pk)
    from . import loop

    def send() -> None:
        loop.submit(publish(pk, event, data, debug=debug))

    transaction.on_commit(send)


def save_synthetic_message(
    scope: Scope, conversation_id: Any, message: SyntheticMessage
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
