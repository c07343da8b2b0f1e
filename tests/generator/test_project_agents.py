"""This project's generated agents package at work (user-owned conversations).

The fresh-project test covers the generated code for a team-owned site; here the
paths it leaves out run against the fake OpenAI server: a turn that pauses for
approval and is resumed in a new session, a message refused while the approval
waits, a failing model, and another user's scope. Turns run on the runtime's inline
executor (its own thread), which takes a run once its transaction commits: these
tests commit for real.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied

from project.agents import factory
from project.agents.coordinator import (
    astart_conversation_session,
    start_conversation_session,
)
from sagents_django import services
from sagents_django.core.testing import ScriptedModel
from sagents_django.exceptions import Conflict, NotFound
from sagents_django.models import StoredFile
from sagents_django.runtime import agent_server
from sagents_django.runtime.executors import wait_inline
from sagents_django.scope import Scope
from sagents_django.sharing import filesystems
from sagents_django.ui import files
from tests.fakes.openai_server import FakeOpenAIServer, fault, reply, tool_call
from tests.generator.helpers import close_runtime_connections

pytestmark = pytest.mark.django_db(transaction=True)

PLAN = tool_call(
    "write_todos",
    {"todos": [{"content": "Book a venue", "status": "pending"}]},
    id="call_plan",
)


@pytest.fixture
def fake_model(
    settings: Any, fake_llm: FakeOpenAIServer, title_model: ScriptedModel
) -> Iterator[FakeOpenAIServer]:
    """The factory's model is the fake server, through settings as a site sets it."""
    settings.SAGENTS = {
        "MODEL": fake_llm.model,
        "MODEL_PARAMS": fake_llm.model_params,
        "FACTORY": "project.agents.factory.build_agent",
        "EXECUTOR": "inline",
    }
    yield fake_llm
    # A turn still ending (its last writes) must not meet the database's flush.
    assert wait_inline(30)
    close_runtime_connections()


@pytest.fixture
def title_model(monkeypatch: pytest.MonkeyPatch) -> ScriptedModel:
    """Titles come from a model of their own, through the factory's override point:
    a title call runs beside the agent's first call and would otherwise take a reply
    scripted for the agent."""
    model = ScriptedModel(["Offsite planning"], repeat_last=True)
    monkeypatch.setattr(factory, "build_title_model", lambda: model)
    return model


@pytest.fixture
def scope(db: None) -> Scope:
    return Scope.for_user(get_user_model().objects.create_user(username="alice"))


@pytest.fixture
def conversation(scope: Scope) -> Any:
    return services.create_conversation(scope, title="Offsite")


def display(scope: Scope, conversation: Any) -> list[tuple[str, str, str]]:
    rows = services.load_display_messages(scope, conversation.pk)
    return [(r.message_type, r.content_type, r.status) for r in rows]


def test_an_approval_pause_is_stored_and_resumed_in_a_new_session(
    fake_model: FakeOpenAIServer,
    scope: Scope,
    conversation: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(factory, "INTERRUPT_ON", {"write_todos": True})
    fake_model.script(reply(tool_calls=[PLAN]), reply("Planned."))

    paused = start_conversation_session(conversation.pk, scope=scope)
    first = paused.run_turn("Plan our offsite")
    assert first.status == "interrupted"
    assert first.interrupt_data is not None
    assert first.interrupt_data["action_requests"][0]["tool_name"] == "write_todos"

    # Another process, later: the interrupt comes back from the database, claimed
    # by the HumanInTheLoop middleware of the rebuilt agent.
    later = start_conversation_session(str(conversation.pk), scope=scope)
    assert later.state.interrupt_data == first.interrupt_data
    result = async_to_sync(later.aresume)([{"type": "approve"}])

    assert result.status == "completed"
    assert result.last_message is not None
    assert result.last_message.text == "Planned."
    assert [t.content for t in services.load_todos(scope, conversation.pk)] == [
        "Book a venue"
    ]
    stored = services.load_agent_state(scope, conversation.pk)
    assert stored is not None
    assert stored["state"]["interrupt_data"] is None
    assert display(scope, conversation) == [
        ("user", "text", "completed"),
        ("assistant", "tool_call", "completed"),
        ("tool", "tool_result", "completed"),
        ("assistant", "text", "completed"),
    ]


def test_a_message_while_an_approval_waits_is_held_and_answered_after_it(
    fake_model: FakeOpenAIServer,
    scope: Scope,
    conversation: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(factory, "INTERRUPT_ON", {"write_todos": True})
    fake_model.script(reply(tool_calls=[PLAN]), reply("Planned."), reply("Hello!"))
    session = start_conversation_session(conversation.pk, scope=scope)
    session.run_turn("Plan our offsite")
    before = services.load_agent_state(scope, conversation.pk)

    held = session.run_turn("Hello?")

    # Held on the pause: the state and its approval are untouched, nothing ran.
    assert held.status == "interrupted"
    assert services.load_agent_state(scope, conversation.pk) == before
    assert len(fake_model.requests) == 1
    result = session.resume([{"type": "approve"}])
    assert result.status == "completed"
    session.wait_run(agent_server.get_info(scope, conversation.pk)["run_id"])
    assert [m["content"] for m in fake_model.requests[2].messages][-1] == "Hello?"


def test_dismiss_abandons_the_approval_and_answers_what_was_held(
    fake_model: FakeOpenAIServer,
    scope: Scope,
    conversation: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(factory, "INTERRUPT_ON", {"write_todos": True})
    fake_model.script(reply(tool_calls=[PLAN]), reply("No plan then."))
    session = start_conversation_session(conversation.pk, scope=scope)
    session.run_turn("Plan our offsite")
    session.run_turn("Actually, skip it")

    result = session.dismiss()

    assert result is not None and result.status == "completed"
    assert result.last_message is not None
    assert result.last_message.text == "No plan then."
    assert services.load_todos(scope, conversation.pk) == []
    with pytest.raises(Conflict, match="no approval is pending"):
        session.dismiss()


def test_a_failing_model_ends_the_turn_with_its_error_and_keeps_the_message(
    fake_model: FakeOpenAIServer, scope: Scope, conversation: Any
) -> None:
    fake_model.script(fault.http(400, message="The prompt is not allowed."))
    session = start_conversation_session(conversation.pk, scope=scope)

    result = session.run_turn("Plan our offsite")

    assert result.status == "error"
    assert "The prompt is not allowed." in (result.error or "")
    stored = services.load_agent_state(scope, conversation.pk)
    assert stored is not None
    assert [m["role"] for m in stored["state"]["messages"]] == ["user"]
    # The runtime's typed row says what went wrong, under the kept message.
    assert display(scope, conversation) == [
        ("user", "text", "completed"),
        ("system", "error", "completed"),
    ]


def test_another_users_scope_cannot_open_the_session(
    fake_model: FakeOpenAIServer, conversation: Any
) -> None:
    mallory = get_user_model().objects.create_user(username="mallory")

    with pytest.raises(NotFound, match="was not found"):
        start_conversation_session(conversation.pk, scope=Scope.for_user(mallory))
    assert fake_model.requests == []


def test_a_session_naming_files_the_scope_may_not_write_is_refused(
    fake_model: FakeOpenAIServer, scope: Scope, conversation: Any
) -> None:
    """Checked as every turn checks it (``sharing.filesystems.check_named``),
    before a session is handed out: someone else's files are not found, files
    shared to read are refused, files shared to write open it."""
    bob = Scope.for_user(get_user_model().objects.create_user(username="bob"))
    bobs = services.create_conversation(bob)
    files.upload(bob, bobs, "plan.md", b"# Plan")
    key = filesystems.filesystem_of(bob, bobs.pk).key

    with pytest.raises(NotFound):
        start_conversation_session(conversation.pk, scope=scope, filesystem_scope=key)
    filesystems.share_files(bob, bobs.pk, scope.user, "read")
    with pytest.raises(PermissionDenied, match="read-only"):
        start_conversation_session(conversation.pk, scope=scope, filesystem_scope=key)
    filesystems.share_files(bob, bobs.pk, scope.user, "write")
    session = start_conversation_session(
        conversation.pk, scope=scope, filesystem_scope=key
    )

    assert session.filesystem_scope == key
    assert fake_model.requests == []


def test_an_async_caller_opens_the_same_session(
    fake_model: FakeOpenAIServer, scope: Scope, conversation: Any
) -> None:
    session = async_to_sync(astart_conversation_session)(
        conversation.pk, scope=scope, filesystem_scope=("user", scope.owner_pk())
    )

    assert session.conversation == conversation
    assert session.agent_id == conversation.agent_id
    assert session.filesystem_scope == ("user", scope.owner_pk())
    assert session.state.messages == []


def test_the_first_turn_names_the_conversation(
    fake_model: FakeOpenAIServer, scope: Scope, conversation: Any
) -> None:
    fake_model.script(reply("Let us plan."), reply("More plans."))
    session = start_conversation_session(conversation.pk, scope=scope)
    session.run_turn("Plan our offsite")
    session.run_turn("And the budget?")

    stored = services.load_agent_state(scope, conversation.pk)
    assert stored is not None
    assert stored["state"]["metadata"]["conversation_title"] == "Offsite planning"
    # Only the first request is named; the agent's own calls were all the server's.
    assert len(fake_model.requests) == 2


def test_a_generated_title_names_an_untitled_conversation_row(
    fake_model: FakeOpenAIServer, scope: Scope
) -> None:
    untitled = services.create_conversation(scope)
    fake_model.script(reply("Let us plan."))
    start_conversation_session(untitled.pk, scope=scope).run_turn("Plan our offsite")

    untitled.refresh_from_db()
    assert untitled.title == "Offsite planning"


def test_the_agents_files_are_stored_in_the_database_for_every_process(
    fake_model: FakeOpenAIServer, scope: Scope, conversation: Any
) -> None:
    note = tool_call(
        "write_file",
        {"file_path": "/notes/venue.md", "content": "Lakeside hall"},
        id="call_note",
    )
    fake_model.script(reply(tool_calls=[note]), reply("Noted."))
    filesystem_scope = ("user", scope.owner_pk())
    session = start_conversation_session(
        conversation.pk, scope=scope, filesystem_scope=filesystem_scope
    )

    result = session.run_turn("Note the venue")

    assert result.status == "completed"
    stored = StoredFile.objects.get(path="/notes/venue.md")
    assert (stored.scope_kind, stored.scope_id) == ("user", str(scope.owner_pk()))
    assert stored.content == "Lakeside hall"
