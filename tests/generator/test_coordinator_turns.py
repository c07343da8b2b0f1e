"""The generated coordinator's turns: nothing lost in silence, no lost updates.

The coordinator hands messages and decisions to ``agent_server`` and waits for the
runs; the turns run on the runtime's inline executor (its own thread) against the
fake OpenAI server. The executor takes a run once its transaction commits, so these
tests commit for real. The thread race at the end is PostgreSQL only (the SQLite
test database refuses concurrent writers instead of queueing them).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from project.agents import factory
from project.agents.coordinator import start_conversation_session
from sagents_django import services, signals
from sagents_django.core import InvalidResume
from sagents_django.core.limits import MAX_MESSAGE_BYTES
from sagents_django.exceptions import Conflict, InvalidInput, RunConflict
from sagents_django.models import (
    AgentRun,
    AgentState,
    DisplayMessage,
    PersistenceFailure,
)
from sagents_django.runtime.executors import wait_inline
from sagents_django.runtime.turn import NOT_SAVED
from sagents_django.scope import Scope
from tests.fakes.openai_server import FakeOpenAIServer, fault, reply, tool_call
from tests.generator.helpers import close_runtime_connections

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fake_model(
    settings: Any, fake_llm: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[FakeOpenAIServer]:
    settings.SAGENTS = {
        "MODEL": fake_llm.model,
        "MODEL_PARAMS": fake_llm.model_params,
        "FACTORY": "project.agents.factory.build_agent",
        "EXECUTOR": "inline",
    }
    # Titles off: a title call would take a reply scripted for the agent.
    monkeypatch.setattr(factory, "build_title_model", lambda: None)
    yield fake_llm
    # A turn still ending (its last writes) must not meet the database's flush.
    assert wait_inline(30)
    close_runtime_connections()


@pytest.fixture
def scope(db: None) -> Scope:
    return Scope.for_user(get_user_model().objects.create_user(username="alice"))


@pytest.fixture
def conversation(scope: Scope) -> Any:
    return services.create_conversation(scope, title="Offsite")


def stored_roles(scope: Scope, conversation: Any) -> list[str]:
    stored = services.load_agent_state(scope, conversation.pk)
    return [m["role"] for m in stored["state"]["messages"]] if stored else []


def stored_texts(scope: Scope, conversation: Any) -> list[str]:
    stored = services.load_agent_state(scope, conversation.pk)
    texts = []
    for message in stored["state"]["messages"]:
        for part in message.get("content") or []:
            if part.get("type") == "text":
                texts.append(part["content"])
    return texts


def transcript(conversation: Any) -> list[tuple[str, str, str]]:
    rows = DisplayMessage.objects.filter(conversation=conversation)
    return [(r.message_type, r.content_type, r.content.get("text", "")) for r in rows]


def sent_texts(request: Any) -> list[str]:
    """The user and assistant texts of one request to the model."""
    return [
        m["content"]
        for m in request["messages"]
        if m["role"] in ("user", "assistant") and isinstance(m.get("content"), str)
    ]


async def running(conversation: Any) -> None:
    """Until the conversation's turn has started (its model call is under way)."""
    runs = AgentRun.objects.filter(conversation=conversation, status="running")
    while not await runs.aexists():
        await asyncio.sleep(0.01)


def nothing_written(conversation: Any) -> bool:
    return not (
        DisplayMessage.objects.filter(conversation=conversation).exists()
        or AgentState.objects.filter(conversation=conversation).exists()
        or AgentRun.objects.filter(conversation=conversation).exists()
        or PersistenceFailure.objects.filter(conversation=conversation).exists()
    )


# Refused before the turn ----------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param("x" * (25 * 1024 * 1024), "characters long", id="25 MB"),
        pytest.param(
            "é" * (MAX_MESSAGE_BYTES // 2 + 1), "bytes as JSON", id="over in UTF-8"
        ),
        pytest.param("", "is empty", id="empty"),
        pytest.param(" \n\t ", "is empty", id="blank"),
        pytest.param(None, "must be a string, not NoneType", id="None"),
        pytest.param(b"hello", "must be a string, not bytes", id="bytes"),
        pytest.param(["hello"], "must be a string, not list", id="a list"),
    ],
)
def test_a_message_that_cannot_be_taken_is_refused_before_any_model_call(
    fake_model: FakeOpenAIServer,
    scope: Scope,
    conversation: Any,
    text: Any,
    problem: str,
) -> None:
    fake_model.script(reply("never"))
    session = start_conversation_session(conversation.pk, scope=scope)

    with pytest.raises(InvalidInput, match=problem):
        session.run_turn(text)

    assert fake_model.requests == []
    assert nothing_written(conversation)
    assert session.state.messages == []


def test_a_bad_max_state_bytes_fails_the_turn_before_the_model_is_called(
    fake_model: FakeOpenAIServer, settings: Any, scope: Scope, conversation: Any
) -> None:
    settings.SAGENTS = {**settings.SAGENTS, "MAX_STATE_BYTES": "20MB"}
    fake_model.script(reply("never"))
    session = start_conversation_session(conversation.pk, scope=scope)

    with pytest.raises(ImproperlyConfigured, match="MAX_STATE_BYTES"):
        session.run_turn("Plan our offsite")

    assert fake_model.requests == []
    assert nothing_written(conversation)


def test_a_message_is_saved_with_its_state_before_the_model_answers(
    fake_model: FakeOpenAIServer, scope: Scope, conversation: Any
) -> None:
    fake_model.script(fault.http(400, message="The prompt is not allowed."))
    session = start_conversation_session(conversation.pk, scope=scope)

    result = session.run_turn("Plan our offsite")

    assert result.status == "error"
    assert stored_roles(scope, conversation) == ["user"]
    run = AgentRun.objects.get(conversation=conversation)
    assert (run.status, run.trigger) == ("error", "message")
    assert "The prompt is not allowed." in run.error


# A turn is the runtime's -------------------------------------------------------------
def test_a_turn_runs_through_the_runtime_with_its_run_rows_and_signals(
    fake_model: FakeOpenAIServer, scope: Scope, conversation: Any
) -> None:
    fake_model.script(reply("Hello from the runtime."))
    finished: list[dict[str, Any]] = []

    def on_finished(sender: Any, **kwargs: Any) -> None:
        finished.append(kwargs)

    signals.run_finished.connect(on_finished)
    try:
        session = start_conversation_session(conversation.pk, scope=scope)
        result = session.run_turn("Plan our offsite")
        # run_turn returns once the run's row has ended; the turn sends the signal
        # just after, on its own thread.
        deadline = time.monotonic() + 10
        while not finished and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        signals.run_finished.disconnect(on_finished)

    assert result.ok
    assert result.last_message is not None
    assert result.last_message.text == "Hello from the runtime."
    assert [m.text for m in session.state.messages] == stored_texts(scope, conversation)
    [run] = AgentRun.objects.filter(conversation=conversation)
    assert (run.status, run.trigger, run.attempts) == ("completed", "message", 1)
    assert session.last_run is not None and session.last_run.run_id == str(run.pk)
    assert [(f["run_id"], f["status"]) for f in finished] == [
        (str(run.pk), "completed")
    ]
    assert transcript(conversation) == [
        ("user", "text", "Plan our offsite"),
        ("assistant", "text", "Hello from the runtime."),
    ]


def test_a_site_without_the_factory_setting_is_told_before_anything_is_written(
    fake_model: FakeOpenAIServer, settings: Any, scope: Scope, conversation: Any
) -> None:
    settings.SAGENTS = {k: v for k, v in settings.SAGENTS.items() if k != "FACTORY"}

    with pytest.raises(
        ImproperlyConfigured, match=r"project\.agents\.factory\.build_agent"
    ):
        start_conversation_session(conversation.pk, scope=scope)

    assert nothing_written(conversation)


# A save that fails is never a success -----------------------------------------------
def test_an_oversized_result_is_an_error_recorded_and_the_next_turn_keeps_history(
    fake_model: FakeOpenAIServer,
    settings: Any,
    scope: Scope,
    conversation: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("CRITICAL", logger="sagents_django")
    caplog.set_level("CRITICAL", logger="project")
    settings.SAGENTS = {**settings.SAGENTS, "MAX_STATE_BYTES": 3_000}
    fake_model.script(reply("y" * 5_000), reply("Short answer."))
    session = start_conversation_session(conversation.pk, scope=scope)

    first = session.run_turn("Write me an essay")

    assert first.status == "error"
    assert not first.ok
    assert first.error == NOT_SAVED
    assert [m.role for m in first.state.messages] == ["user"]
    failures = PersistenceFailure.objects.filter(conversation=conversation)
    state_failure = failures.get(kind="state")
    assert state_failure.operation == "on_completion"
    assert state_failure.error_type == "sagents_django.exceptions.InvalidInput"
    assert state_failure.run is not None and state_failure.run.status == "error"
    assert stored_texts(scope, conversation) == ["Write me an essay"]
    # The transcript says so: the reply's row failed too (recorded), a note stands.
    assert failures.filter(kind="display", operation="save_message").exists()
    assert transcript(conversation) == [
        ("user", "text", "Write me an essay"),
        ("system", "error", NOT_SAVED),
    ]

    second = session.run_turn("Then a haiku")

    assert second.status == "completed"
    assert sent_texts(fake_model.requests[1]) == ["Write me an essay", "Then a haiku"]
    assert stored_texts(scope, conversation) == [
        "Write me an essay",
        "Then a haiku",
        "Short answer.",
    ]
    # Another process opening the conversation sees the same history.
    again = start_conversation_session(conversation.pk, scope=scope)
    assert [m.text for m in again.state.messages] == stored_texts(scope, conversation)


def deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": True}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def test_a_turn_that_reports_success_was_saved_even_with_arguments_95_deep(
    fake_model: FakeOpenAIServer,
    scope: Scope,
    conversation: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Whether the core refuses such arguments (a tool error) or the store refuses
    # the state, turn 1 must not claim success unsaved, and turn 2 must not start
    # from an empty history.
    caplog.set_level("CRITICAL", logger="sagents_django")
    caplog.set_level("CRITICAL", logger="project")
    fake_model.script(
        reply(tool_calls=[tool_call("write_todos", deep(95), id="call_deep")]),
        reply("Planned."),
        reply("Still here."),
    )
    session = start_conversation_session(conversation.pk, scope=scope)

    first = session.run_turn("Plan our offsite")

    failures = PersistenceFailure.objects.filter(
        conversation=conversation, kind="state"
    )
    if first.status == "completed":
        assert not failures.exists()
        assert stored_texts(scope, conversation)[-1] == "Planned."
    else:
        assert first.error == NOT_SAVED
        assert failures.exists()

    later = start_conversation_session(conversation.pk, scope=scope)
    later.run_turn("Are you there?")

    assert sent_texts(fake_model.requests[-1])[0] == "Plan our offsite"
    assert stored_texts(scope, conversation)[0] == "Plan our offsite"
    assert stored_texts(scope, conversation)[-1] == "Still here."


# No lost updates ------------------------------------------------------------------
postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="threads writing at once need a server database (see the module doc)",
)


@postgresql_only
def test_a_message_sent_during_another_sessions_turn_is_answered_right_after_it(
    fake_model: FakeOpenAIServer, scope: Scope, conversation: Any
) -> None:
    fake_model.script(
        fault.slow_first_byte(0.5, then=reply("Hello from A.")), reply("Hello B.")
    )
    a = start_conversation_session(conversation.pk, scope=scope)
    b = start_conversation_session(conversation.pk, scope=scope)

    async def both() -> list[Any]:
        turn_a = asyncio.ensure_future(a.arun_turn("Message A"))
        await running(conversation)
        return await asyncio.gather(turn_a, b.arun_turn("Message B"))

    first, second = async_to_sync(both)()

    # Each caller gets the answer to its own message.
    assert (first.status, first.last_message.text) == ("completed", "Hello from A.")
    assert (second.status, second.last_message.text) == ("completed", "Hello B.")
    assert sent_texts(fake_model.requests[1]) == [
        "Message A",
        "Hello from A.",
        "Message B",
    ]
    runs = AgentRun.objects.filter(conversation=conversation).order_by("created_at")
    assert [(r.trigger, r.status) for r in runs] == [
        ("message", "completed"),
        ("queued", "completed"),
    ]


@postgresql_only
def test_with_the_reject_policy_a_second_session_gets_a_run_conflict(
    fake_model: FakeOpenAIServer, settings: Any, scope: Scope, conversation: Any
) -> None:
    settings.SAGENTS = {**settings.SAGENTS, "DOUBLE_TEXT": "reject"}
    fake_model.script(fault.slow_first_byte(0.5, then=reply("Hello from A.")))
    a = start_conversation_session(conversation.pk, scope=scope)
    b = start_conversation_session(conversation.pk, scope=scope)

    async def both() -> list[Any]:
        turn_a = asyncio.ensure_future(a.arun_turn("Message A"))
        await running(conversation)
        return await asyncio.gather(
            turn_a, b.arun_turn("Message B"), return_exceptions=True
        )

    first, second = async_to_sync(both)()

    assert first.status == "completed"
    assert isinstance(second, RunConflict)
    assert len(fake_model.requests) == 1
    assert transcript(conversation) == [
        ("user", "text", "Message A"),
        ("assistant", "text", "Hello from A."),
    ]
    # The loser's session may go on once the other turn ended, from its history.
    fake_model.script(reply("Hello B."))
    assert b.run_turn("Message B").status == "completed"
    assert stored_texts(scope, conversation) == [
        "Message A",
        "Hello from A.",
        "Message B",
        "Hello B.",
    ]


def test_a_session_that_fell_behind_goes_on_from_what_the_other_saved(
    fake_model: FakeOpenAIServer, scope: Scope, conversation: Any
) -> None:
    fake_model.script(reply("Hello A."), reply("Hello B."))
    a = start_conversation_session(conversation.pk, scope=scope)
    b = start_conversation_session(conversation.pk, scope=scope)
    a.run_turn("Message A")

    result = b.run_turn("Message B")

    # The turn starts from the stored state, never from a session's stale copy.
    assert result.status == "completed"
    assert sent_texts(fake_model.requests[1]) == ["Message A", "Hello A.", "Message B"]
    assert [m.text for m in b.state.messages] == [
        "Message A",
        "Hello A.",
        "Message B",
        "Hello B.",
    ]


def test_a_state_written_by_someone_else_during_a_turn_is_not_overwritten(
    fake_model: FakeOpenAIServer,
    scope: Scope,
    conversation: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("CRITICAL", logger="sagents_django")
    caplog.set_level("CRITICAL", logger="project")
    fake_model.script(fault.slow_first_byte(0.5, then=reply("Too late.")))
    session = start_conversation_session(conversation.pk, scope=scope)

    async def turn_and_import() -> Any:
        turn = asyncio.ensure_future(session.arun_turn("Message A"))
        while not fake_model.requests:  # the user's message is saved by then
            await asyncio.sleep(0.01)
        stored = await sync_to_async(services.load_agent_state)(scope, conversation.pk)
        stored["state"]["metadata"] = {"imported": True}
        await sync_to_async(services.save_agent_state)(scope, conversation.pk, stored)
        return await turn

    result = async_to_sync(turn_and_import)()

    assert result.status == "error"
    assert result.error == NOT_SAVED
    state = services.load_agent_state(scope, conversation.pk)["state"]
    assert state["metadata"] == {"imported": True}
    assert session.state.metadata == {"imported": True}  # reloaded
    assert PersistenceFailure.objects.get(conversation=conversation).error_type == (
        "sagents_django.exceptions.StateConflict"
    )


# Cancel -----------------------------------------------------------------------------
def test_a_turn_cancelled_from_another_thread_keeps_its_message_and_frees_the_conversation(
    fake_model: FakeOpenAIServer, scope: Scope, conversation: Any
) -> None:
    fake_model.script(
        reply("word " * 200, chunks=200, delay=0.02), reply("Second time lucky.")
    )
    session = start_conversation_session(conversation.pk, scope=scope)
    other = start_conversation_session(conversation.pk, scope=scope)
    assert not other.cancel()  # nothing runs yet

    def cancel_once_streaming() -> None:
        try:
            while not fake_model.requests:
                time.sleep(0.01)
            time.sleep(0.1)
            assert other.cancel()
        finally:
            connection.close()

    canceller = threading.Thread(target=cancel_once_streaming)
    canceller.start()
    result = session.run_turn("Talk")
    canceller.join()

    assert result.status == "cancelled"
    assert AgentRun.objects.get(conversation=conversation).status == "cancelled"
    assert transcript(conversation)[0] == ("user", "text", "Talk")
    assert transcript(conversation)[-1] == (
        "system",
        "notification",
        "Agent execution cancelled.",
    )
    assert session.run_turn("Message B").status == "completed"


@postgresql_only
def test_cancelling_the_callers_task_stops_the_turn(
    fake_model: FakeOpenAIServer, scope: Scope, conversation: Any
) -> None:
    fake_model.script(fault.stall(), reply("Second time lucky."))
    session = start_conversation_session(conversation.pk, scope=scope)

    async def cancel_mid_turn() -> None:
        turn = asyncio.ensure_future(session.arun_turn("Message A"))
        while not fake_model.requests:
            await asyncio.sleep(0.01)
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await turn

    async_to_sync(cancel_mid_turn)()
    assert wait_inline(10)

    run = AgentRun.objects.get(conversation=conversation)
    assert run.status == "cancelled"
    assert session.run_turn("Message B").status == "completed"


# Approvals --------------------------------------------------------------------------
def test_bad_decisions_on_resume_leave_no_run_behind(
    fake_model: FakeOpenAIServer,
    scope: Scope,
    conversation: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(factory, "INTERRUPT_ON", {"write_todos": True})
    plan = tool_call("write_todos", {"todos": [{"content": "x"}]}, id="call_plan")
    fake_model.script(reply(tool_calls=[plan]), reply("Planned."))
    session = start_conversation_session(conversation.pk, scope=scope)
    assert session.run_turn("Plan").status == "interrupted"
    runs = AgentRun.objects.filter(conversation=conversation)
    assert [r.status for r in runs] == ["interrupted"]
    rows = transcript(conversation)

    with pytest.raises(InvalidResume, match="Expected 1 decision"):
        async_to_sync(session.aresume)([{"type": "approve"}, {"type": "approve"}])
    with pytest.raises(InvalidInput):
        session.resume([{"type": "maybe"}])

    assert [r.status for r in runs.all()] == ["interrupted"]
    assert transcript(conversation) == rows
    result = session.resume([{"type": "approve"}])
    assert (result.status, result.last_message.text) == ("completed", "Planned.")
    with pytest.raises(Conflict, match="Nothing to resume"):
        session.resume([{"type": "approve"}])


@postgresql_only
def test_two_sessions_in_threads_one_turn_wins_and_the_transcript_agrees(
    fake_model: FakeOpenAIServer, settings: Any, scope: Scope, conversation: Any
) -> None:
    settings.SAGENTS = {**settings.SAGENTS, "DOUBLE_TEXT": "reject"}
    fake_model.script(
        fault.slow_first_byte(1.0, then=reply("The winner speaks.")),
        default=reply("The winner speaks."),
    )
    sessions = [start_conversation_session(conversation.pk, scope=scope) for _ in "ab"]
    start = threading.Barrier(2)
    outcomes: dict[str, Any] = {}

    def turn(name: str, session: Any) -> None:
        try:
            start.wait()
            outcomes[name] = session.run_turn(f"Message {name}")
        except Exception as exc:
            outcomes[name] = exc
        finally:
            connection.close()

    threads = [
        threading.Thread(target=turn, args=(name, s))
        for name, s in zip("ab", sessions, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    [winner] = [n for n, o in outcomes.items() if not isinstance(o, Exception)]
    [loser] = [o for o in outcomes.values() if isinstance(o, Exception)]
    assert isinstance(loser, RunConflict)
    assert outcomes[winner].status == "completed"
    assert len(fake_model.requests) == 1
    expected = [f"Message {winner}", "The winner speaks."]
    assert stored_texts(scope, conversation) == expected
    assert [t for _, _, t in transcript(conversation)] == expected
