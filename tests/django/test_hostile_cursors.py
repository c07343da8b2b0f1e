"""Crafted cursors and oversized numbers: the library's own InvalidInput, nothing else.

A conversation-list cursor is opaque to its reader but decodable by anyone, so a
client can send any bytes in its place; a display cursor is a row id a client may
send as any text. Before, a crafted list cursor raised RecursionError or a database
error, and a 5,000-digit number raised ValueError while building the message.
"""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import pytest

from sagents_django import services
from sagents_django.exceptions import InvalidInput
from sagents_django.scope import Scope

from .factories import snapshot

pytestmark = pytest.mark.django_db

ID = str(uuid.uuid4())


def encoded(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def crafted(*parts: Any) -> str:
    return encoded(json.dumps(list(parts)).encode())


# (cursor, order_by) pairs; each must be InvalidInput on every database.
CRAFTED = {
    "nested 1,500 deep": (encoded(b"[" * 1500), "-updated_at"),
    "nested objects": (encoded(b'{"a":' * 300), "-updated_at"),
    "NUL in a title": (crafted("title", "a\x00b", ID), "title"),
    "lone surrogate in a title": (crafted("title", "a\ud800b", ID), "title"),
    "title too long for the column": (crafted("title", "x" * 300, ID), "title"),
    "year 1 east of UTC": (
        crafted("-updated_at", "0001-01-01T00:00:00+23:59", ID),
        "-updated_at",
    ),
    "year 9999 west of UTC": (
        crafted("-updated_at", "9999-12-31T23:59:59-23:59", ID),
        "-updated_at",
    ),
    "naive time": (crafted("-updated_at", "2026-01-01T00:00:00", ID), "-updated_at"),
    "number as time": (crafted("-updated_at", 1767225600, ID), "-updated_at"),
    "NaN as time": (
        encoded(b'["-updated_at", NaN, "' + ID.encode() + b'"]'),
        "-updated_at",
    ),
    "list as time": (crafted("-updated_at", ["2026"], ID), "-updated_at"),
    "null as time": (crafted("-updated_at", None, ID), "-updated_at"),
    "number as title": (crafted("title", 5, ID), "title"),
    "int as id": (crafted("title", "a", 5), "title"),
    "list as id": (crafted("title", "a", [ID]), "title"),
    "junk id": (crafted("title", "a", "not-a-uuid"), "title"),
    "list as ordering": (crafted(["title"], "a", ID), "title"),
    "two parts": (crafted("title", "a"), "title"),
    "four parts": (crafted("title", "a", ID, "more"), "title"),
    "an object": (encoded(json.dumps({"title": 1, "a": 2, ID: 3}).encode()), "title"),
    "a string": (encoded(b'"title"'), "title"),
    "1,500 digits": (encoded(b'["title", ' + b"9" * 1500 + b"]"), "title"),
    "not UTF-8": (encoded(b"\xff\xfe\xfd"), "title"),
    "not base64": ("%%%", "title"),
    "padding inside": ("W1=0", "title"),
}


@pytest.mark.parametrize(("cursor", "order_by"), CRAFTED.values(), ids=CRAFTED)
def test_a_crafted_conversation_cursor_is_invalid_input(
    scope: Scope, conversation: Any, cursor: str, order_by: str
) -> None:
    before = snapshot()
    with pytest.raises(InvalidInput, match="cursor"):
        services.list_conversations(scope, order_by=order_by, cursor=cursor)
    assert snapshot() == before


@pytest.mark.parametrize(
    "cursor",
    [b"abc", ["abc"], 4.5, 10**5000],
    ids=["bytes", "list", "float", "5,001 digits"],
)
def test_a_cursor_that_is_not_text_is_invalid_input(scope: Scope, cursor: Any) -> None:
    with pytest.raises(InvalidInput, match="cursor"):
        services.list_conversations(scope, cursor=cursor)


def test_a_cursor_the_library_made_still_pages_after_the_checks(
    scope: Scope, conversation: Any
) -> None:
    other = services.create_conversation(scope, title="Another")
    for order_by in services.ORDERINGS:
        first, second = services.list_conversations(scope, order_by=order_by)
        cursor = services.conversation_cursor(first, order_by=order_by)
        assert services.list_conversations(scope, order_by=order_by, cursor=cursor) == [
            second
        ]
    assert {first.pk, second.pk} == {conversation.pk, other.pk}


def test_a_cursor_made_in_another_time_zone_reads_the_same_moment(
    scope: Scope, conversation: Any
) -> None:
    other = services.create_conversation(scope, title="Another")
    first, second = services.list_conversations(scope)
    made = services.conversation_cursor(first)
    ordering, value, pk = json.loads(base64.urlsafe_b64decode(made + "=="))
    from datetime import datetime, timedelta, timezone

    moment = datetime.fromisoformat(value).astimezone(timezone(timedelta(hours=-7)))
    cursor = crafted(ordering, moment.isoformat(), pk)
    assert services.list_conversations(scope, cursor=cursor) == [second]
    assert other.pk in {first.pk, second.pk}


@pytest.mark.parametrize(
    "value",
    ["9" * 5000, "1" + "0" * 19, 10**5000, 2**63, "-1", "\uff11\uff12", "12 ", "0x10"],
    ids=[
        "5,000 digits",
        "20 digits",
        "5,001-digit int",
        "2**63",
        "negative",
        "fullwidth digits",
        "trailing space",
        "hex",
    ],
)
@pytest.mark.parametrize("where", ["before", "after"])
def test_an_oversized_or_odd_display_cursor_is_invalid_input(
    scope: Scope, conversation: Any, where: str, value: Any
) -> None:
    with pytest.raises(InvalidInput, match=where):
        services.load_display_messages(scope, conversation.pk, **{where: value})


@pytest.mark.parametrize(
    "call",
    [
        lambda s: services.list_conversations(s, limit=10**5000),
        lambda s: services.list_conversations(s, offset=-(10**5000)),
        lambda s: services.search_messages(s, "x", limit=10**5000),
    ],
    ids=["limit", "offset", "search limit"],
)
def test_a_5000_digit_integer_option_is_invalid_input(scope: Scope, call: Any) -> None:
    with pytest.raises(InvalidInput, match="must be an integer"):
        call(scope)
