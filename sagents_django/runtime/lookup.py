"""What every verb looks up first: the scope's conversation, its pending approval,
its stored state. A conversation the scope does not own is ``NotFound``, exactly
like one that does not exist."""

from __future__ import annotations

from typing import Any

from sagents_django import services
from sagents_django.core import State
from sagents_django.core.middleware.base import is_restorable
from sagents_django.core.serialization import deserialize_server_state
from sagents_django.exceptions import InvalidInput, NotFound
from sagents_django.models import AgentRun, AgentState
from sagents_django.scope import Scope, scope_class
from sagents_django.services.conversations import refuse_read_only

from .agents import build_agent
from .requests import RunRequest


def check_scope(scope: Any) -> None:
    if not isinstance(scope, Scope):
        raise InvalidInput(
            "scope must be a Scope (get_scope(request), Scope.for_user(user)), not "
            f"{type(scope).__name__}"
        )


def require(scope: Scope, pk: Any, *, lock: bool = False) -> Any:
    """The scope's conversation (else ``NotFound``; with ``lock``, also for a read
    share's lent scope). ``lock``: its row is held to
    the end of the transaction, so the requests that start runs of one
    conversation take turns (PostgreSQL; SQLite writers take turns anyway)."""
    check_scope(scope)
    if lock:
        # The verbs that start, stop or decide turns lock: a read share's lent
        # scope does none of them.
        refuse_read_only(scope, pk)
    conversation = services.get_conversation(scope, pk)
    if conversation is None:
        raise NotFound("conversation", str(pk))
    if lock:
        rows = services.conversation_model()._default_manager.select_for_update()
        list(rows.filter(pk=pk).values_list("pk", flat=True))
    return conversation


def pending_interrupt(pk: Any) -> Any:
    """The stored interrupt data of the conversation (falsy: none pending)."""
    return (
        AgentState.objects.filter(conversation_id=pk)
        .values_list("state_data__state__interrupt_data", flat=True)
        .first()
    )


def last_run(pk: Any, *, lock: bool = False) -> AgentRun | None:
    runs = AgentRun.objects.of(pk).latest_first()
    return (runs.select_for_update() if lock else runs).first()


def load_state(scope: Scope, conversation: Any, *, agent: Any = None) -> State:
    agent = agent or build_agent(conversation.agent_id, scope, None)
    data = services.load_agent_state(scope, conversation.pk)
    if data is None:
        return State(agent_id=agent.agent_id)
    return deserialize_server_state(agent.agent_id, data, middleware=agent.middleware)


def interrupt_restorable(pk: Any) -> bool | None:
    """Whether the conversation's pending approval can still be decided once its
    agent is shut down (upstream v0.11's ``interrupt_restorable``): a middleware of
    its agent claims it on load. None: no approval is pending. The agent is built
    for the scope of the run that paused."""
    data = pending_interrupt(pk)
    if not data:
        return None
    conversation = services.conversation_model()._default_manager.filter(pk=pk).first()
    run = last_run(pk)
    if conversation is None or run is None:
        return False
    scope = scope_class().from_dict(RunRequest.of(run).scope or {"user_id": None})
    agent = build_agent(conversation.agent_id, scope, None)
    return is_restorable(agent.middleware, data)
