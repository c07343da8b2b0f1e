"""Step checkpoints, the tool journal and leases, on the database the suite runs
on (the processes that crash are in ``test_durability``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from sagents_django import services
from sagents_django.core import Message, State, ToolCall, ToolResult
from sagents_django.core.journal import LOST_TEXT
from sagents_django.core.serialization import (
    deserialize_server_state,
    serialize_server_state,
)
from sagents_django.core.todo import Todo
from sagents_django.models import AgentRun, AgentStep, ToolCallRecord
from sagents_django.runtime import checkpoints, runs
from sagents_django.runtime.checkpoints import Checkpoints
from sagents_django.runtime.journal import DatabaseJournal
from sagents_django.runtime.tenure import worker_name
from tests.runtime.follow import make_scope

pytestmark = pytest.mark.django_db(transaction=True)


def history(n: int) -> list[Message]:
    return [
        Message.user(f"question {i}") if i % 2 == 0 else Message.assistant(f"a{i}")
        for i in range(n)
    ]


def claimed_run(*, messages: int = 0) -> tuple[Any, AgentRun, State, int]:
    scope = make_scope("ada")
    conversation = services.create_conversation(scope)
    state = State(messages=history(messages))
    row = services.save_agent_state(
        scope, conversation.pk, serialize_server_state(state)
    )
    services.begin_run(scope, conversation.pk, queued=True, metadata={})
    run = AgentRun.objects.get(conversation=conversation)
    claimed = runs.claim_run(
        run.pk, owner=worker_name(), lease_seconds=30, max_attempts=3
    )
    assert claimed is not None
    return scope, claimed, state, row.revision


def test_a_step_writes_what_it_added_however_long_the_history() -> None:
    _, run, state, revision = claimed_run(messages=1000)
    points = Checkpoints(lease=runs.lease_of(run), base_revision=revision, state=state)
    reply = Message.assistant("the answer")

    assert points.write(state.add_message(reply))

    [step] = AgentStep.objects.filter(run=run)
    assert (step.keep, len(step.messages)) == (1000, 1)
    assert Message.from_dict(step.messages[0]).text == "the answer"
    run.refresh_from_db()
    assert run.checkpoint_revision == revision
    assert not points.write(points.state)  # nothing changed: nothing written


def test_a_takeover_loads_the_state_row_plus_its_steps() -> None:
    _, run, state, revision = claimed_run(messages=4)
    points = Checkpoints(lease=runs.lease_of(run), base_revision=revision, state=state)
    step_one = state.add_message(Message.assistant("one"))
    points.write(step_one)
    step_two = step_one.add_message(Message.user("two")).set_todos(
        [Todo(id="1", content="plan", status="pending")]
    )
    points.write(step_two)

    resumed = checkpoints.resume_from(runs.lease_of(run), revision, state)

    assert [m.text for m in resumed.state.messages] == [
        m.text for m in step_two.messages
    ]
    assert [t.content for t in resumed.state.todos] == ["plan"]
    assert resumed.number == 2
    # Steps built on another revision (an older turn's) are not applied.
    assert (
        checkpoints.resume_from(runs.lease_of(run), revision + 1, state).state == state
    )


def test_a_rewritten_history_is_written_whole() -> None:
    _, run, state, revision = claimed_run(messages=6)
    points = Checkpoints(lease=runs.lease_of(run), base_revision=revision, state=state)
    summary = state.set_messages([Message.user("summary of six"), *state.messages[4:]])

    points.write(summary)

    [step] = AgentStep.objects.filter(run=run)
    assert (step.keep, len(step.messages)) == (0, 3)
    resumed = checkpoints.resume_from(runs.lease_of(run), revision, state)
    assert [m.text for m in resumed.state.messages] == [
        m.text for m in summary.messages
    ]


def test_a_worker_that_lost_its_lease_cannot_checkpoint_or_beat() -> None:
    _, run, state, revision = claimed_run()
    old = runs.lease_of(run)
    AgentRun.objects.filter(pk=run.pk).update(
        heartbeat_at=timezone.now() - timedelta(minutes=1)
    )
    taken = runs.claim_run(run.pk, owner="other:1:x", lease_seconds=30, max_attempts=3)
    assert taken is not None and taken.attempts == 2
    points = Checkpoints(lease=old, base_revision=revision, state=state)

    with pytest.raises(runs.LeaseLost):
        points.write(state.add_message(Message.assistant("late")))
    with pytest.raises(runs.LeaseLost):
        runs.beat(old)
    assert not AgentStep.objects.filter(run=run).exists()
    assert runs.beat(runs.lease_of(taken)) is False  # the new holder's lease lives


def test_a_living_lease_is_not_taken_and_a_spent_run_is_not_claimed() -> None:
    _, run, _, _ = claimed_run()
    assert runs.claim_run(run.pk, owner="b", lease_seconds=30, max_attempts=3) is None
    AgentRun.objects.filter(pk=run.pk).update(
        attempts=3, heartbeat_at=timezone.now() - timedelta(minutes=1)
    )
    assert runs.claim_run(run.pk, owner="b", lease_seconds=30, max_attempts=3) is None
    assert not runs.requeue_stale(run.pk, lease_seconds=30, max_attempts=3)
    ended = runs.claim_exhausted(run.pk, owner="s", lease_seconds=30, max_attempts=3)
    assert ended is not None and ended.lease_owner == "s"


def test_a_claim_is_one_statement_on_postgresql_and_returns_the_row_as_stored() -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    scope = make_scope("ada")
    conversation = services.create_conversation(scope)
    services.begin_run(scope, conversation.pk, queued=True, metadata={"k": [1]})
    run = AgentRun.objects.get(conversation=conversation)

    with CaptureQueriesContext(connection) as queries:
        claimed = runs.claim_run(
            run.pk, owner="w" * 300, lease_seconds=30, max_attempts=3
        )

    assert claimed is not None
    stored = AgentRun.objects.get(pk=run.pk)
    fields = [f.attname for f in AgentRun._meta.concrete_fields]
    assert [getattr(claimed, f) for f in fields] == [getattr(stored, f) for f in fields]
    assert (stored.status, stored.attempts, stored.lease_owner) == (
        "running",
        1,
        "w" * 255,
    )
    assert stored.started_at == stored.heartbeat_at is not None
    assert len(queries) == (1 if connection.vendor == "postgresql" else 2)


def test_a_handover_gives_the_run_back_without_spending_an_attempt() -> None:
    _, run, _, _ = claimed_run()
    assert runs.release(runs.lease_of(run))
    run.refresh_from_db()
    assert (run.status, run.attempts, run.lease_owner) == ("queued", 0, "")
    again = runs.claim_run(run.pk, owner="b", lease_seconds=30, max_attempts=3)
    assert again is not None and again.attempts == 1


async def test_the_journal_replays_finished_calls_and_refuses_to_repeat_a_lost_one() -> (
    None
):
    from asgiref.sync import sync_to_async

    _, run, _, _ = await sync_to_async(claimed_run)()
    first = DatabaseJournal(runs.lease_of(run))
    done = ToolCall(call_id="c1", name="write_todos", arguments={})
    todo = {"todos": [Todo(id="1", content="x", status="pending")]}
    result = ToolResult(
        tool_call_id="c1", name="write_todos", content="ok", processed_content=todo
    )
    await first.started(done, None)
    await first.finished(done, result)
    await sync_to_async(first.record)("c1")  # with its card, in the turn
    # A takeover inherits the calls of the reply it goes on from.
    lost = ToolCall(call_id="c2", name="send_email", arguments={})
    safe = ToolCall(call_id="c3", name="read_file", arguments={})
    fresh = ToolCall(call_id="c4", name="send_email", arguments={})
    second = DatabaseJournal(runs.lease_of(run), inherited=["c1", "c2", "c3"])

    replayed = await second.recall(done, None)
    assert replayed is not None and replayed.text == "ok"
    assert replayed.processed_content["todos"][0]["content"] == "x"
    refused = await second.recall(lost, None)
    assert refused is not None and refused.is_error
    assert refused.text == LOST_TEXT.format(name="send_email")

    class Idempotent:
        idempotent = True

    assert await second.recall(safe, Idempotent()) is None  # runs again
    assert await second.recall(fresh, None) is None  # issued by this attempt
    statuses = {
        r.call_id: r.status async for r in ToolCallRecord.objects.filter(run=run)
    }
    assert statuses == {"c1": "completed", "c2": "lost"}
    # The lost call's answer is journaled too: a third attempt gives the same.
    again = await DatabaseJournal(runs.lease_of(run), inherited=["c2"]).recall(
        lost, None
    )
    assert again is not None and again.text == refused.text


def test_a_state_checkpoint_round_trips_through_the_envelope() -> None:
    """What a step stores is what ``serialize_state`` stores: a takeover reads it
    back as the original turn saw it."""
    _, run, state, revision = claimed_run(messages=2)
    points = Checkpoints(lease=runs.lease_of(run), base_revision=revision, state=state)
    call = ToolCall(call_id="c9", name="ls", arguments={"path": "/"})
    grown = state.add_message(Message.assistant("", tool_calls=[call])).put_metadata(
        "k", {"v": 1}
    )
    points.write(grown)
    resumed = checkpoints.resume_from(runs.lease_of(run), revision, state).state
    assert (
        serialize_server_state(resumed)["state"]
        == serialize_server_state(grown)["state"]
    )
    assert (
        deserialize_server_state(None, serialize_server_state(resumed))
        .messages[-1]
        .tool_calls[0]
        .call_id
        == "c9"
    )
