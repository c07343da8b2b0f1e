"""Display messages: append (one or in bulk), validation, order, and cursors."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from sagents_django import services
from sagents_django.exceptions import InvalidInput
from sagents_django.models import DisplayMessage
from sagents_django.scope import Scope

from .factories import snapshot

pytestmark = pytest.mark.django_db


def text(value: str, **extra: Any) -> dict[str, Any]:
    return {
        "message_type": "user",
        "content_type": "text",
        "content": {"text": value},
        **extra,
    }


def test_append_display_message_saves_a_validated_row(
    scope: Scope, conversation: Any
) -> None:
    row = services.append_display_message(
        scope,
        conversation.pk,
        message_type="assistant",
        content_type="thinking",
        content={"text": "Hmm"},
        metadata={"usage": {"input": 3}},
        sequence=2,
    )
    row = DisplayMessage.objects.get(pk=row.pk)
    assert (row.message_type, row.content_type, row.status, row.sequence) == (
        "assistant",
        "thinking",
        "completed",
        2,
    )
    assert row.content == {"text": "Hmm"}
    assert row.metadata == {"usage": {"input": 3}}


def test_appending_marks_the_conversation_used(scope: Scope, conversation: Any) -> None:
    before = conversation.updated_at
    services.append_text_message(scope, conversation.pk, "user", "hi")
    conversation.refresh_from_db()
    assert conversation.updated_at > before


def test_tool_rows_take_their_call_id_and_status_from_the_content(
    scope: Scope, conversation: Any
) -> None:
    call, result, held = services.append_display_messages(
        scope,
        conversation.pk,
        [
            {
                "message_type": "assistant",
                "content_type": "tool_call",
                "content": {"call_id": "c1", "name": "f", "arguments": {}},
            },
            {
                "message_type": "tool",
                "content_type": "tool_result",
                "content": {"tool_call_id": "c1", "name": "f", "content": "ok"},
            },
            {
                "message_type": "tool",
                "content_type": "tool_result",
                "content": {"tool_call_id": "c2", "content": "", "is_interrupt": True},
            },
        ],
    )
    assert (call.tool_call_id, call.status) == ("c1", "pending")
    assert (result.tool_call_id, result.status) == ("c1", "completed")
    assert (held.tool_call_id, held.status) == ("c2", "interrupted")


def test_bulk_append_saves_every_row_in_order_with_ids(
    scope: Scope, conversation: Any
) -> None:
    items = [text(f"m{i}", sequence=i) for i in range(5)]
    with CaptureQueriesContext(connection) as queries:
        rows = services.append_display_messages(scope, conversation.pk, items)
    assert all(r.pk for r in rows)
    # On PostgreSQL the INSERT follows a WITH (the ownership check and touch).
    inserts = [q for q in queries if "INSERT INTO" in q["sql"]]
    assert len(inserts) == 1
    loaded = services.load_display_messages(scope, conversation.pk)
    assert [r.content["text"] for r in loaded] == [f"m{i}" for i in range(5)]


def test_append_text_message_is_a_text_row(scope: Scope, conversation: Any) -> None:
    row = services.append_text_message(
        scope, conversation.pk, "assistant", "Task complete.", metadata={"a": 1}
    )
    assert (row.message_type, row.content_type, row.content, row.metadata) == (
        "assistant",
        "text",
        {"text": "Task complete."},
        {"a": 1},
    )


def test_unicode_and_nul_in_content_round_trip_with_nul_replaced(
    scope: Scope, conversation: Any
) -> None:
    content = {
        "text": "🎉 مرحبا שלום 你好 \x00 end",
        "nested": {"list": [{"k\x00": ["\x00"]}], "n": 1.5},
    }
    services.append_display_message(
        scope,
        conversation.pk,
        message_type="tool",
        content_type="text",
        content=content,
    )
    [row] = services.load_display_messages(scope, conversation.pk)
    assert row.content == {
        "text": "🎉 مرحبا שלום 你好 \ufffd end",
        "nested": {"list": [{"k\ufffd": ["\ufffd"]}], "n": 1.5},
    }


def test_lone_surrogates_in_content_are_replaced(
    scope: Scope, conversation: Any
) -> None:
    row = services.append_text_message(scope, conversation.pk, "tool", "a\udcff b")
    row.refresh_from_db()
    assert row.content == {"text": "a\ufffd b"}


def test_rows_are_ordered_by_inserted_at_then_sequence_then_id(
    scope: Scope, conversation: Any
) -> None:
    rows = services.append_display_messages(
        scope, conversation.pk, [text(str(i)) for i in range(6)]
    )
    now = timezone.now()
    # Rewrite the keys: two rows share a time, two share time and sequence.
    keys = [(now, 1), (now, 0), (now + timedelta(seconds=1), 0), (now, 1)]
    keys += [(now - timedelta(seconds=1), 5), (now + timedelta(seconds=1), 0)]
    for row, (moment, sequence) in zip(rows, keys, strict=True):
        DisplayMessage.objects.filter(pk=row.pk).update(
            inserted_at=moment, sequence=sequence
        )
    expected = sorted(
        zip(keys, [r.pk for r in rows], strict=True),
        key=lambda pair: (pair[0][0], pair[0][1], pair[1]),
    )
    loaded = services.load_display_messages(scope, conversation.pk)
    assert [r.pk for r in loaded] == [pk for _, pk in expected]
    assert [
        r.pk for r in services.load_display_messages(scope, conversation.pk, limit=3)
    ] == [pk for _, pk in expected][-3:]


@pytest.fixture
def history(scope: Scope, conversation: Any) -> list[DisplayMessage]:
    return services.append_display_messages(
        scope, conversation.pk, [text(f"m{i}", sequence=i % 3) for i in range(20)]
    )


def ids(rows: list[DisplayMessage]) -> list[int]:
    return [r.pk for r in rows]


def test_limit_returns_the_latest_rows_in_display_order(
    scope: Scope, conversation: Any, history: list[DisplayMessage]
) -> None:
    assert ids(services.load_display_messages(scope, conversation.pk, limit=5)) == ids(
        history[-5:]
    )


def test_before_pages_backwards_through_the_whole_history(
    scope: Scope, conversation: Any, history: list[DisplayMessage]
) -> None:
    seen: list[DisplayMessage] = []
    page = services.load_display_messages(scope, conversation.pk, limit=6)
    while page:
        seen = page + seen
        cursor = services.display_message_cursor(page[0])
        page = services.load_display_messages(
            scope, conversation.pk, limit=6, before=cursor
        )
    assert ids(seen) == ids(history)


def test_after_returns_the_rows_that_follow_a_cursor(
    scope: Scope, conversation: Any, history: list[DisplayMessage]
) -> None:
    after = history[4].pk
    assert ids(
        services.load_display_messages(scope, conversation.pk, after=after, limit=3)
    ) == ids(history[5:8])
    assert ids(services.load_display_messages(scope, conversation.pk, after=after)) == (
        ids(history[5:])
    )


def test_before_and_after_together_select_a_window(
    scope: Scope, conversation: Any, history: list[DisplayMessage]
) -> None:
    rows = services.load_display_messages(
        scope, conversation.pk, after=history[2].pk, before=str(history[9].pk)
    )
    assert ids(rows) == ids(history[3:9])


def test_the_latest_page_is_one_query_and_a_cursor_page_two(
    scope: Scope, conversation: Any, history: list[DisplayMessage]
) -> None:
    with CaptureQueriesContext(connection) as queries:
        services.load_display_messages(scope, conversation.pk, limit=5)
    assert len(queries) == 1
    assert "LIMIT 5" in queries[0]["sql"]
    with CaptureQueriesContext(connection) as queries:
        services.load_display_messages(
            scope, conversation.pk, limit=5, before=history[10].pk
        )
    assert len(queries) == 2


def test_a_cursor_from_another_conversation_is_refused(
    scope: Scope,
    conversation: Any,
    other_scope: Scope,
    other_conversation: Any,
    history: list[DisplayMessage],
) -> None:
    theirs = services.append_text_message(
        other_scope, other_conversation.pk, "user", "secret"
    )
    with pytest.raises(InvalidInput, match="not a display message of this conv"):
        services.load_display_messages(scope, conversation.pk, before=theirs.pk)


@pytest.mark.parametrize(
    "options",
    [
        {"limit": 0},
        {"limit": 10_001},
        {"limit": "5"},
        {"limit": 2.0},
        {"before": "abc"},
        {"before": -1},
        {"before": 0},
        {"after": 1.5},
        {"after": True},
        {"after": "\uff11\uff12"},  # full-width digits
        {"before": 10**30},
    ],
)
def test_load_display_messages_refuses_bad_options(
    scope: Scope, conversation: Any, options: dict[str, Any]
) -> None:
    with pytest.raises(InvalidInput):
        services.load_display_messages(scope, conversation.pk, **options)


BAD_ITEMS = [
    pytest.param(text("x", message_type="robot"), id="unknown message_type"),
    pytest.param(text("x", content_type="video"), id="unknown content_type"),
    pytest.param(text("x", content="plain string"), id="content not a dict"),
    pytest.param(text("x", content={"x": object()}), id="content not JSON"),
    pytest.param(text("x", content={1: "x"}), id="content int key"),
    pytest.param(text("x", status="done"), id="unknown status"),
    pytest.param(text("x", sequence=-1), id="negative sequence"),
    pytest.param(text("x", sequence="1"), id="string sequence"),
    pytest.param(text("x", sequence=2**31), id="sequence too large"),
    pytest.param(text("x", metadata=[]), id="metadata not a dict"),
    pytest.param(text("x", tool_call_id=5), id="tool_call_id not a string"),
    pytest.param(text("x", tool_call_id="c" * 256), id="tool_call_id too long"),
    pytest.param(text("x", colour="red"), id="unknown attribute"),
    pytest.param({"message_type": "user", "content_type": "text"}, id="no content"),
    pytest.param("not a dict", id="item not a dict"),
]


@pytest.mark.parametrize("item", BAD_ITEMS)
def test_a_bad_item_is_refused_and_nothing_is_written(
    scope: Scope, conversation: Any, item: Any
) -> None:
    before = snapshot()
    with pytest.raises(InvalidInput):
        # A good item first: the bad one must stop the whole batch.
        services.append_display_messages(scope, conversation.pk, [text("ok"), item])
    assert snapshot() == before


@pytest.mark.parametrize("items", [{"not": "a list"}, "text", b"bytes"])
def test_items_must_be_a_list(scope: Scope, conversation: Any, items: Any) -> None:
    with pytest.raises(InvalidInput, match="list of attribute dicts"):
        services.append_display_messages(scope, conversation.pk, items)


def test_append_text_message_refuses_non_text(scope: Scope, conversation: Any) -> None:
    with pytest.raises(InvalidInput, match="text must be a string"):
        services.append_text_message(scope, conversation.pk, "user", {"text": "x"})
    with pytest.raises(InvalidInput, match="message_type must be one of"):
        services.append_text_message(scope, conversation.pk, "robot", "x")


def test_an_empty_batch_writes_nothing(scope: Scope, conversation: Any) -> None:
    assert services.append_display_messages(scope, conversation.pk, []) == []
