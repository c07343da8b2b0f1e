"""The run admin's actions: cancel, resume (approve all / reject all), dismiss a
pending approval, re-run.

An operator acts for the conversation's owner: each action rebuilds the scope the
run was started with (``run.metadata["scope"]``, checked again on load, so a user
who lost access to the conversation no longer acts on it) or, for a run that stored
none, the scope of the conversation's owner, and goes through the ``agent_server``
verbs a person would use. So a cancel reaches the worker running the turn in any
process, a resume is validated like a posted approval, and a re-run is the
``execute`` verb on the stored state.

Every selected run gets its own line saying what happened ("not running", "nothing
to resume", a conflict...); an action never raises, whatever a row's outcome.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db import models
from django.http import HttpRequest

from sagents_django.approvals import records
from sagents_django.core.approvals import interrupt_from_dict
from sagents_django.core.exceptions import SagentsError
from sagents_django.exceptions import Conflict, NotFound, RunConflict
from sagents_django.models import AgentRun, AgentState
from sagents_django.scope import Scope, owned_by_users, owner_field, scope_class

logger = logging.getLogger(__name__)

Outcome = tuple[int, str]
"""A message level and what happened to one run."""


class Skip(Exception):
    """This run is not in a state the action applies to (said to the operator)."""


def run_scope(run: AgentRun) -> Scope:
    """The scope to act for on ``run``'s conversation."""
    from sagents_django.runtime.requests import RunRequest

    stored = RunRequest.of(run).scope
    if stored is not None:
        return scope_class().from_dict(stored)
    conversation = run.conversation
    field = owner_field(type(conversation))
    if field is not None and owned_by_users(type(conversation)):
        return scope_class().for_user(getattr(conversation, field))
    raise Skip("the run stores no scope to act with")


def _server() -> Any:
    # Imported on use: the admin loads at every start-up, the runtime need not.
    from sagents_django.runtime import agent_server

    return agent_server


def _later_run(run: AgentRun) -> AgentRun | None:
    return (
        AgentRun.objects.filter(
            conversation_id=run.conversation_id, created_at__gt=run.created_at
        )
        .order_by("-created_at")
        .first()
    )


def _require_latest(run: AgentRun, what: str) -> None:
    later = _later_run(run)
    if later is not None:
        raise Skip(f"{what}: a later run ({later.status}) followed it")


def cancel_one(run: AgentRun) -> Outcome:
    if not run.is_active:
        raise Skip(f"not running ({run.status})")
    if not _server().cancel(run_scope(run), run.conversation_id):
        raise Skip("not running (it ended meanwhile)")
    return messages.SUCCESS, "cancel requested; the turn stops at its next step"


def resume_one(run: AgentRun, decision: str, user: Any = None) -> Outcome:
    if run.status != "interrupted":
        raise Skip(f"nothing to resume ({run.status})")
    _require_latest(run, "nothing to resume")
    data = (
        AgentState.objects.filter(conversation_id=run.conversation_id)
        .values_list("state_data__state__interrupt_data", flat=True)
        .first()
    )
    if not data:
        raise Skip("nothing to resume: no approval is pending")
    requests = getattr(interrupt_from_dict(data), "action_requests", None)
    if not requests:
        raise Skip("nothing to resume: the pause is not an approval of tool calls")
    refused = [r.tool_name for r in requests if decision not in r.allowed_decisions]
    if refused:
        raise Skip(
            f"{decision} is not allowed for {', '.join(refused)}; decide on the "
            "conversation's page instead"
        )
    decisions = [{"type": decision}] * len(requests)
    with records.acting(user, via="admin"):
        new = _server().resume(run_scope(run), run.conversation_id, decisions)
    count = len(requests)
    verb = "approved" if decision == "approve" else "rejected"
    plural = "s" if count != 1 else ""
    return messages.SUCCESS, f"{verb} {count} action{plural}; resumed as run {new}"


def dismiss_one(run: AgentRun) -> Outcome:
    if run.status != "interrupted":
        raise Skip(f"nothing to dismiss ({run.status})")
    _require_latest(run, "nothing to dismiss")
    answering = _server().dismiss(run_scope(run), run.conversation_id)
    held = f"; held messages answered by run {answering}" if answering else ""
    return messages.SUCCESS, f"approval dismissed{held}"


def rerun_one(run: AgentRun) -> Outcome:
    if run.status != "error":
        raise Skip(f"not failed ({run.status})")
    _require_latest(run, "not re-run")
    new = _server().execute(run_scope(run), run.conversation_id)
    return messages.SUCCESS, f"re-run as run {new} on the stored state"


def apply(
    model_admin: admin.ModelAdmin,
    request: HttpRequest,
    queryset: models.QuerySet,
    act: Callable[[AgentRun], Outcome],
) -> None:
    """Run ``act`` on each selected run, oldest first, and say what it did."""
    runs = queryset.select_related("conversation").order_by("created_at")
    for run in runs:
        try:
            level, text = act(run)
        except Skip as skip:
            level, text = messages.WARNING, str(skip)
        except RunConflict:
            level, text = messages.WARNING, "conflict: another turn is running"
        except NotFound:
            level, text = (
                messages.ERROR,
                "the run's user can no longer see this conversation",
            )
        except Conflict as exc:
            level, text = messages.WARNING, f"conflict: {exc}"
        except SagentsError as exc:
            level, text = messages.ERROR, str(exc)
        except Exception as exc:
            # An operator's click must not end in a 500; the log keeps the trace.
            logger.exception("Admin action on run %s failed", run.pk)
            level, text = messages.ERROR, f"failed: {type(exc).__name__}: {exc}"
        else:
            model_admin.log_change(request, run, text)
        model_admin.message_user(request, f"{label(run)}: {text}.", level)


def label(run: AgentRun) -> str:
    title = str(run.conversation)
    return f"Run {str(run.pk)[:8]} of “{title}”"


@admin.action(description="Cancel the running turn", permissions=["operate"])
def cancel_runs(
    model_admin: admin.ModelAdmin, request: HttpRequest, queryset: models.QuerySet
) -> None:
    apply(model_admin, request, queryset, cancel_one)


@admin.action(
    description="Resume: approve all pending actions", permissions=["operate"]
)
def resume_approve_all(
    model_admin: admin.ModelAdmin, request: HttpRequest, queryset: models.QuerySet
) -> None:
    apply(
        model_admin,
        request,
        queryset,
        lambda run: resume_one(run, "approve", request.user),
    )


@admin.action(description="Resume: reject all pending actions", permissions=["operate"])
def resume_reject_all(
    model_admin: admin.ModelAdmin, request: HttpRequest, queryset: models.QuerySet
) -> None:
    apply(
        model_admin,
        request,
        queryset,
        lambda run: resume_one(run, "reject", request.user),
    )


@admin.action(
    description="Dismiss the pending approval (its calls do not run)",
    permissions=["operate"],
)
def dismiss_approvals(
    model_admin: admin.ModelAdmin, request: HttpRequest, queryset: models.QuerySet
) -> None:
    apply(model_admin, request, queryset, dismiss_one)


@admin.action(description="Re-run the failed turn", permissions=["operate"])
def rerun_failed(
    model_admin: admin.ModelAdmin, request: HttpRequest, queryset: models.QuerySet
) -> None:
    apply(model_admin, request, queryset, rerun_one)


RUN_ACTIONS: tuple[Any, ...] = (
    cancel_runs,
    resume_approve_all,
    resume_reject_all,
    dismiss_approvals,
    rerun_failed,
)
