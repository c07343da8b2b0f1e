"""Agent state: upsert, load, todos, and what a stored document may contain."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from sagents_django import services
from sagents_django.core.serialization import MAX_DEPTH
from sagents_django.core.todo import Todo
from sagents_django.exceptions import InvalidInput
from sagents_django.models import AgentState
from sagents_django.scope import Scope

from .factories import envelope, snapshot

pytestmark = pytest.mark.django_db

UNICODE = "emoji 🎉👩‍👩‍👧, RTL مرحبا بالعالم שלום, CJK 你好, combining é, ZWJ a\u200db"


def test_save_then_load_returns_the_envelope(scope: Scope, conversation: Any) -> None:
    data = envelope(metadata={"conversation_title": "Trip"})
    row = services.save_agent_state(scope, conversation.pk, data)
    assert row.conversation_id == conversation.pk
    assert row.version == 1
    assert services.load_agent_state(scope, conversation.pk) == data


def test_saving_again_replaces_the_one_row(scope: Scope, conversation: Any) -> None:
    services.save_agent_state(scope, conversation.pk, envelope(metadata={"n": 1}))
    second = services.save_agent_state(
        scope, conversation.pk, envelope(metadata={"n": 2})
    )
    assert AgentState.objects.filter(conversation=conversation).count() == 1
    assert AgentState.objects.get(conversation=conversation).pk == second.pk
    assert services.load_agent_state(scope, conversation.pk)["state"]["metadata"] == {
        "n": 2
    }


def test_the_row_version_is_the_envelope_format_version(
    scope: Scope, conversation: Any
) -> None:
    data = {**envelope(), "version": 3}
    assert services.save_agent_state(scope, conversation.pk, data).version == 3


def test_load_agent_state_is_none_before_the_first_save(
    scope: Scope, conversation: Any
) -> None:
    assert services.load_agent_state(scope, conversation.pk) is None


def test_the_first_state_save_marks_the_conversation_used(
    scope: Scope, conversation: Any
) -> None:
    before = conversation.updated_at
    services.save_agent_state(scope, conversation.pk, envelope())
    conversation.refresh_from_db()
    assert conversation.updated_at > before


def test_a_checkpoint_is_one_select_and_one_update_of_the_state_row(
    scope: Scope, conversation: Any
) -> None:
    services.save_agent_state(scope, conversation.pk, envelope())
    conversation.refresh_from_db()
    with CaptureQueriesContext(connection) as queries:
        services.save_agent_state(scope, conversation.pk, envelope(todos=[]))
    statements = [q["sql"].split()[0] for q in queries]
    # SQLite and PostgreSQL log the transaction's edges differently.
    assert [s for s in statements if s in ("SELECT", "UPDATE", "INSERT")] == [
        "SELECT",
        "UPDATE",
    ]
    assert "sagents_conversations" not in queries[-1]["sql"].split("WHERE")[0]
    updated_at = conversation.updated_at
    conversation.refresh_from_db()
    assert conversation.updated_at == updated_at


def test_load_todos_reads_only_the_todos(scope: Scope, conversation: Any) -> None:
    todos = [
        {"id": "t1", "content": "Book hotel", "status": "completed"},
        {"id": "t2", "content": "Pack", "status": "in_progress"},
    ]
    big = [{"role": "user", "content": [{"type": "text", "content": "x" * 10_000}]}]
    services.save_agent_state(
        scope, conversation.pk, envelope(todos=todos, messages=big * 20)
    )
    with CaptureQueriesContext(connection) as queries:
        loaded = services.load_todos(scope, conversation.pk)
    assert loaded == [
        Todo(id="t1", content="Book hotel", status="completed"),
        Todo(id="t2", content="Pack", status="in_progress"),
    ]
    # The messages (200 kB) never left the database.
    assert len(queries) == 1
    assert "state_data" in queries[0]["sql"]


def test_load_todos_skips_malformed_items_and_survives_odd_shapes(
    scope: Scope, conversation: Any
) -> None:
    todos = [{"content": "Good"}, {"content": ""}, "junk", {"status": "nope"}]
    services.save_agent_state(scope, conversation.pk, envelope(todos=todos))
    assert [t.content for t in services.load_todos(scope, conversation.pk)] == ["Good"]
    services.save_agent_state(scope, conversation.pk, envelope(todos="not a list"))
    assert services.load_todos(scope, conversation.pk) == []
    services.save_agent_state(scope, conversation.pk, {"version": 1, "state": {}})
    assert services.load_todos(scope, conversation.pk) == []


def test_load_todos_is_empty_without_state(scope: Scope, conversation: Any) -> None:
    assert services.load_todos(scope, conversation.pk) == []


def test_unicode_and_nested_structures_round_trip(
    scope: Scope, conversation: Any
) -> None:
    nested: Any = {"leaf": UNICODE}
    for depth in range(MAX_DEPTH - 5):
        nested = {"level": depth, "child": nested, "list": [1, 2.5, None, True]}
    data = envelope(metadata={"text": UNICODE, "nested": nested, "big_int": 2**53})
    services.save_agent_state(scope, conversation.pk, data)
    assert services.load_agent_state(scope, conversation.pk) == data


def test_a_five_megabyte_state_round_trips(scope: Scope, conversation: Any) -> None:
    messages = [
        {
            "role": "assistant" if i % 2 else "user",
            "content": [{"type": "text", "content": f"{i} " + "lorem ipsum " * 400}],
        }
        for i in range(1100)
    ]
    data = envelope(messages=messages)
    services.save_agent_state(scope, conversation.pk, data)
    assert services.load_agent_state(scope, conversation.pk) == data


def test_nul_characters_are_replaced_and_never_break_the_write(
    scope: Scope, conversation: Any
) -> None:
    data = envelope(
        metadata={"out\x00put": "binary\x00junk", "list": ["\x00", 1]},
        messages=[{"role": "tool", "content": [{"type": "text", "content": "a\x00b"}]}],
    )
    # Saved over an existing row: the update path (server-bound on PostgreSQL).
    services.save_agent_state(scope, conversation.pk, envelope())
    services.save_agent_state(scope, conversation.pk, data)
    loaded = services.load_agent_state(scope, conversation.pk)
    assert loaded["state"]["metadata"] == {
        "out\ufffdput": "binary\ufffdjunk",
        "list": ["\ufffd", 1],
    }
    assert loaded["state"]["messages"][0]["content"][0]["content"] == "a\ufffdb"
    # The caller's document is left as it was.
    assert data["state"]["metadata"]["list"] == ["\x00", 1]


def test_lone_surrogates_are_replaced_and_never_break_the_write(
    scope: Scope, conversation: Any
) -> None:
    # What bytes.decode(errors="surrogateescape") leaves of undecodable input.
    undecodable = b"caf\xe9 \xff".decode("utf-8", "surrogateescape")
    data = envelope(metadata={"raw": undecodable, "emoji": "🎉", undecodable: 1})
    services.save_agent_state(scope, conversation.pk, data)
    metadata = services.load_agent_state(scope, conversation.pk)["state"]["metadata"]
    assert metadata == {"raw": "caf\ufffd \ufffd", "emoji": "🎉", "caf\ufffd \ufffd": 1}


def deep(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = [value]
    return value


BAD_STATES = [
    pytest.param([], id="not a dict"),
    pytest.param({"state": {}}, id="no version"),
    pytest.param({"version": "1", "state": {}}, id="string version"),
    pytest.param({"version": True, "state": {}}, id="bool version"),
    pytest.param({"version": 0, "state": {}}, id="zero version"),
    pytest.param({"version": 1}, id="no state"),
    pytest.param({"version": 1, "state": []}, id="state not a dict"),
    pytest.param({"version": 1, "state": {"x": object()}}, id="not JSON"),
    pytest.param({"version": 1, "state": {"x": {1, 2}}}, id="a set"),
    pytest.param({"version": 1, "state": {"x": b"bytes"}}, id="bytes"),
    pytest.param({"version": 1, "state": {"x": float("inf")}}, id="infinity"),
    pytest.param({"version": 1, "state": {"x": float("nan")}}, id="NaN"),
    pytest.param({"version": 1, "state": {2: "x"}}, id="int key"),
    pytest.param({"version": 1, "state": {"x": {None: 1}}}, id="None key"),
    pytest.param({"version": 1, "state": {"x": deep(MAX_DEPTH)}}, id="too deep"),
]


@pytest.mark.parametrize("data", BAD_STATES)
def test_a_bad_envelope_is_refused_and_nothing_changes(
    scope: Scope, conversation: Any, data: Any
) -> None:
    services.save_agent_state(scope, conversation.pk, envelope(metadata={"keep": 1}))
    before = snapshot()
    with pytest.raises(InvalidInput):
        services.save_agent_state(scope, conversation.pk, data)
    assert snapshot() == before


def test_the_size_limit_is_configurable_and_counts_utf8_bytes(
    scope: Scope, conversation: Any
) -> None:
    small = envelope(metadata={"x": "é" * 300})  # ~600 bytes, 300 characters
    with override_settings(SAGENTS={"MAX_STATE_BYTES": 500}):
        with pytest.raises(InvalidInput, match=r"bytes as JSON; the limit is 500"):
            services.save_agent_state(scope, conversation.pk, small)
        assert services.load_agent_state(scope, conversation.pk) is None
    with override_settings(SAGENTS={"MAX_STATE_BYTES": 5000}):
        services.save_agent_state(scope, conversation.pk, small)


def test_the_default_size_limit_is_twenty_megabytes(
    scope: Scope, conversation: Any
) -> None:
    oversized = envelope(metadata={"x": "y" * (20 * 1024 * 1024)})
    with pytest.raises(InvalidInput, match="the limit is 20971520 bytes"):
        services.save_agent_state(scope, conversation.pk, oversized)
