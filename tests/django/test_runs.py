"""Runs hold a conversation: one active run at a time, ended on every exit path."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import transaction

from sagents_django import services
from sagents_django.core.messages import TokenUsage
from sagents_django.exceptions import InvalidInput, NotFound, RunConflict
from sagents_django.models import AgentRun
from sagents_django.scope import Scope

pytestmark = pytest.mark.django_db


def test_a_run_begins_running_and_a_second_one_is_a_conflict_naming_the_first(
    scope: Scope, conversation: Any
) -> None:
    run = services.begin_run(scope, conversation.pk, trigger="message", owner="w1")
    assert (run.status, run.trigger, run.lease_owner, run.attempts) == (
        "running",
        "message",
        "w1",
        1,
    )
    assert run.started_at is not None

    with pytest.raises(RunConflict) as caught:
        services.begin_run(scope, conversation.pk)

    assert caught.value.run_id == run.pk
    assert "is already running a turn" in str(caught.value)
    assert AgentRun.objects.filter(conversation=conversation).count() == 1


def test_finishing_a_run_frees_the_conversation_and_keeps_its_record(
    scope: Scope, conversation: Any
) -> None:
    run = services.begin_run(scope, conversation.pk)
    usage = TokenUsage(input=12, output=34)
    assert services.finish_run(
        scope, run.pk, status="error", error="boom " * 5000, usage=usage
    )
    run.refresh_from_db()
    assert (run.status, run.input_tokens, run.output_tokens) == ("error", 12, 34)
    assert run.finished_at is not None
    assert len(run.error) == services.runs.ERROR_MAX_LENGTH
    # Ended once: a second finish changes nothing and says so.
    assert not services.finish_run(scope, run.pk, status="completed")
    run.refresh_from_db()
    assert run.status == "error"

    second = services.begin_run(scope, str(conversation.pk), trigger="resume")
    assert second.pk != run.pk


def test_a_discarded_run_leaves_no_trace_and_frees_the_conversation(
    scope: Scope, conversation: Any
) -> None:
    run = services.begin_run(scope, conversation.pk)
    assert services.discard_run(scope, run.pk)
    assert not AgentRun.objects.exists()
    services.begin_run(scope, conversation.pk)


def test_another_tenant_cannot_begin_finish_or_discard_a_run(
    scope: Scope, other_scope: Scope, conversation: Any
) -> None:
    run = services.begin_run(scope, conversation.pk)
    with pytest.raises(NotFound):
        services.begin_run(other_scope, conversation.pk)
    with pytest.raises(NotFound):
        services.finish_run(other_scope, run.pk, status="completed")
    with pytest.raises(NotFound):
        services.discard_run(other_scope, run.pk)
    run.refresh_from_db()
    assert run.status == "running"


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(
            lambda s, c, r: services.finish_run(s, r.pk, status="running"),
            id="an active status",
        ),
        pytest.param(
            lambda s, c, r: services.finish_run(s, r.pk, status="done"),
            id="an unknown status",
        ),
        pytest.param(
            lambda s, c, r: services.finish_run(s, "run-1", status="error"),
            id="a malformed run id",
        ),
        pytest.param(
            lambda s, c, r: services.begin_run(s, c.pk, trigger="x" * 33),
            id="a long trigger",
        ),
        pytest.param(
            lambda s, c, r: services.begin_run(s, c.pk, owner=["w1"]),
            id="an owner that is no string",
        ),
    ],
)
def test_bad_arguments_are_invalid_input_and_change_nothing(
    scope: Scope, conversation: Any, call: Any
) -> None:
    run = services.begin_run(scope, conversation.pk)
    with pytest.raises(InvalidInput):
        call(scope, conversation, run)
    run.refresh_from_db()
    assert run.status == "running"
    assert AgentRun.objects.count() == 1


def test_an_unknown_run_is_not_found(scope: Scope, conversation: Any) -> None:
    with pytest.raises(NotFound):
        services.finish_run(scope, uuid.uuid4(), status="completed")


def test_a_conflict_inside_the_callers_transaction_leaves_it_usable(
    scope: Scope, conversation: Any
) -> None:
    services.begin_run(scope, conversation.pk)
    with transaction.atomic():
        with pytest.raises(RunConflict):
            services.begin_run(scope, conversation.pk)
        assert AgentRun.objects.filter(conversation=conversation).count() == 1
