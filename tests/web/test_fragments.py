"""The chat page's live fragments render from the event's own data: a row from the
row JSON the event carries, the status panels from ``status_changed``; the database
is read for the conversation once per socket and for what an event does not carry."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sagents_django import services
from sagents_django.runtime.publisher import display_message_json
from sagents_django.scope import Scope
from sagents_django.ui import fragments

pytestmark = pytest.mark.django_db

APPROVAL = {
    "type": "hitl",
    "action_requests": [
        {
            "tool_call_id": "call_1",
            "tool_name": "write_file",
            "arguments": {"file_path": "/a.txt", "content": "<b>hi</b>"},
            "allowed_decisions": ["approve", "reject"],
        }
    ],
}


def conversation_of(name: str = "alice") -> tuple[Scope, Any]:
    scope = Scope.for_user(get_user_model().objects.create_user(name))
    return scope, services.create_conversation(scope, title="Live")


def event(conversation: Any, name: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"conversation": str(conversation.pk), "event": name, "seq": 1, "data": data}


def test_a_live_row_is_drawn_from_the_event_without_reading_the_database() -> None:
    scope, conversation = conversation_of()
    live = fragments.Live()
    first = services.append_text_message(scope, conversation.pk, "user", "warm up")
    fragments.for_event(
        scope,
        event(
            conversation,
            "display_message_saved",
            {"display_message": display_message_json(first)},
        ),
        live,
    )
    row = services.append_text_message(
        scope, conversation.pk, "assistant", "Hello <script>x</script>"
    )
    saved = event(
        conversation,
        "display_message_saved",
        {"display_message": display_message_json(row)},
    )

    with CaptureQueriesContext(connection) as queries:
        html = fragments.for_event(scope, saved, live)

    assert len(queries) == 0
    assert f'id="msg-{row.pk}"' in html or str(row.pk) in html
    assert "Hello" in html and "<script>" not in html


def test_a_pause_draws_its_approval_form_from_the_event() -> None:
    scope, conversation = conversation_of()
    live = fragments.Live()
    paused = event(
        conversation,
        "status_changed",
        {"status": "interrupted", "run_id": "r", "data": APPROVAL},
    )

    with CaptureQueriesContext(connection) as queries:
        html = fragments.for_event(scope, paused, live)

    # The conversation once, and the inbox badge: no state or run read.
    tables = " ".join(q["sql"] for q in queries.captured_queries)
    assert "sagents_agent_states" not in tables.split("FROM")[0]
    assert "write_file" in html and "Waiting for your approval" in html
    assert "&lt;b&gt;hi&lt;/b&gt;" in html
    assert live.status == "interrupted"


def test_another_users_conversation_draws_nothing() -> None:
    _, conversation = conversation_of("alice")
    mallory, _ = conversation_of("mallory")
    row_event = event(
        conversation, "status_changed", {"status": "interrupted", "data": APPROVAL}
    )

    assert fragments.for_event(mallory, row_event, fragments.Live()) == ""
