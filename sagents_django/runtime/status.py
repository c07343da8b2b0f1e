"""Status verbs: how a conversation's agent is doing, and which agents run.

Sagents keeps a process per conversation and asks it; here the runs and the
viewers are the truth (a conversation no run, viewer or touch has used for
``SAGENTS["INACTIVITY_TIMEOUT"]`` seconds is what Sagents calls shut down).
"""

from __future__ import annotations

import fnmatch
from datetime import datetime
from typing import Any, Literal

from django.utils import timezone

from sagents_django import services
from sagents_django.conf import sagents_settings
from sagents_django.core import Agent
from sagents_django.exceptions import InvalidInput
from sagents_django.models import AgentRun, DisplayMessage
from sagents_django.scope import Scope
from sagents_django.services.branches import load_tree, path_filter
from sagents_django.services.conversations import conversation_pk, owned_conversations

from . import viewers
from .agents import build_agent
from .lookup import check_scope, load_state, pending_interrupt, require

Status = Literal["idle", "running", "interrupted", "cancelled", "error", "not_running"]


def get_status(scope: Scope, conversation_id: Any) -> Status:
    """idle, running, interrupted, cancelled, error, or not_running (no run, no
    viewer and nothing for ``SAGENTS["INACTIVITY_TIMEOUT"]`` seconds: what
    Sagents' shut-down agent is here)."""
    pk = conversation_pk(conversation_id)
    require(scope, pk)
    runs = AgentRun.objects.of(pk)
    if runs.active().exists():
        return "running"
    if bool(pending_interrupt(pk)):
        return "interrupted"
    if not _active_recently(pk):
        return "not_running"
    last = shown_last_run_status(pk)
    if last in ("cancelled", "error"):
        return last  # type: ignore[return-value]
    return "idle"


def shown_last_run_status(pk: Any) -> str | None:
    """The status of the latest run of the branch shown (``runtime.branches``):
    a conversation that never branched, its latest run's. A branch's runs are
    those made since it was last shown (branching and switching wait until no
    run is active, so every run since belongs to it) and, before that, the runs
    whose rows its transcript holds."""
    runs = AgentRun.objects.of(pk).order_by("-created_at")
    tree = load_tree(pk)
    if tree is None:
        return runs.values_list("status", flat=True).first()
    shown_since = tree.active.order[0]
    since = runs.filter(created_at__gte=shown_since)
    status = since.values_list("status", flat=True).first()
    if status is not None:
        return str(status)
    rows = DisplayMessage.objects.filter(conversation_id=pk, run__isnull=False)
    condition = path_filter(tree)
    if condition is not None:
        rows = rows.filter(condition)
    found = rows.order_by("-id").values_list("run__status", flat=True).first()
    return None if found is None else str(found)


def is_running(scope: Scope, conversation_id: Any) -> bool:
    """Whether a turn of the conversation is queued or running (Sagents'
    ``AgentServer.running?``)."""
    pk = conversation_pk(conversation_id)
    require(scope, pk)
    return AgentRun.objects.of(pk).active().exists()


def get_agent(scope: Scope, conversation_id: Any) -> Agent:
    """The conversation's agent as its next turn will run it: the site's factory
    builds it (configuration lives in code), for ``scope``. Sagents'
    ``get_agent``; NotFound outside the scope."""
    conversation = require(scope, conversation_pk(conversation_id))
    return build_agent(conversation.agent_id, scope, None)


def get_info(scope: Scope, conversation_id: Any) -> dict[str, Any]:
    """Status, the state (a ``State``), its pending interrupt and the last
    error, as Sagents' ``get_info``."""
    pk = conversation_pk(conversation_id)
    conversation = require(scope, pk)
    status = get_status(scope, pk)
    last = AgentRun.objects.filter(conversation_id=pk).order_by("-created_at").first()
    state = load_state(scope, conversation)
    return {
        "status": status,
        "state": state,
        "interrupt_data": state.interrupt_data,
        "error": last.error if last is not None and last.status == "error" else None,
        "run_id": str(last.pk) if last is not None else None,
    }


def get_metadata(scope: Scope, conversation_id: Any) -> dict[str, Any]:
    pk = conversation_pk(conversation_id)
    conversation = require(scope, pk)
    active = services.active_run(scope, pk)
    return {
        "status": get_status(scope, pk),
        "last_activity_at": _last_activity(pk),
        "conversation_id": str(pk),
        "agent_id": conversation.agent_id,
        "node": active.lease_owner or None if active is not None else None,
    }


def touch(scope: Scope, conversation_id: Any) -> None:
    """Mark activity (a person looking), which keeps the conversation from
    counting as inactive."""
    pk = conversation_pk(conversation_id)
    require(scope, pk)
    viewers.touch(str(pk))


def get_inactivity_status(scope: Scope, conversation_id: Any) -> dict[str, Any]:
    """Sagents' inactivity status: the timeout (ms), the last activity, whether
    the "timer" runs (no run and no viewer) and the ms since activity."""
    pk = conversation_pk(conversation_id)
    require(scope, pk)
    timeout = sagents_settings.INACTIVITY_TIMEOUT
    last = _last_activity(pk)
    busy = AgentRun.objects.of(pk).active().exists() or viewers.count(str(pk)) > 0
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
def list_running_agents(scope: Scope) -> list[str]:
    """The agent ids of the scope's conversations with a turn running."""
    check_scope(scope)
    ids = (
        AgentRun.objects.active()
        .filter(conversation__in=owned_conversations(scope).values("pk"))
        .order_by("created_at")
        .values_list("conversation_id", flat=True)
    )
    return [f"conversation-{pk}" for pk in ids]


def list_agents_matching(scope: Scope, pattern: str) -> list[str]:
    """``list_running_agents`` filtered by a glob (``*`` any run of chars)."""
    if not isinstance(pattern, str) or len(pattern) > 255:
        raise InvalidInput("pattern must be a glob string of at most 255 chars")
    return [a for a in list_running_agents(scope) if fnmatch.fnmatchcase(a, pattern)]


def agent_count(scope: Scope) -> int:
    return len(list_running_agents(scope))


def agent_info(scope: Scope, agent_id: str) -> dict[str, Any] | None:
    """Status and state of a running agent (None when not running or not the
    scope's), as Sagents' ``agent_info``."""
    if not isinstance(agent_id, str) or agent_id not in list_running_agents(scope):
        return None
    pk = agent_id.removeprefix("conversation-")
    info = get_info(scope, pk)
    state = info["state"]
    return {
        "agent_id": agent_id,
        "status": info["status"],
        "state": state,
        "message_count": len(state.messages),
        "has_interrupt": bool(state.interrupt_data),
    }


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
