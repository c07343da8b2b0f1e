"""The socket's actions beyond following a turn: creating and listing conversations,
reading a long history whole, and the ``run_alive`` frame of a running turn. Each
with its bad input: malformed, oversized, someone else's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sagents_django import protocol, services
from sagents_django.core.limits import MAX_STATE_DEPTH
from sagents_django.scope import Scope
from tests.fakes.openai_server import reply
from tests.runtime import follow as follow_module
from tests.runtime.follow import new_conversation
from tests.runtime.ws_client import connect

pytestmark = pytest.mark.django_db(transaction=True)

site = follow_module.site


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


async def test_a_conversation_created_over_the_socket_is_the_users_and_listed(
    site: Any,
) -> None:
    scope, _ = await new_conversation("alice")
    mallory, _ = await new_conversation("mallory")
    sock = await connect(scope.user)

    created = await sock.send(
        "create_conversation", title="Trip plans", metadata={"tag": "travel"}
    )
    cid = created["conversation"]["id"]
    subscribed = await sock.send("subscribe", conversation=cid)
    listed = await sock.send("list_conversations")
    await sock.disconnect()
    outsider = await connect(mallory.user)
    await outsider.communicator.send_json_to(
        {"action": "subscribe", "conversation": cid}
    )
    refused = await outsider.closed()

    assert created["ok"] is True
    assert created["conversation"]["title"] == "Trip plans"
    assert created["conversation"]["metadata"] == {"tag": "travel"}
    assert subscribed["ok"] is True
    assert subscribed["protocol"] == protocol.VERSION
    assert cid in [c["id"] for c in listed["conversations"]]
    assert len(listed["conversations"]) == 2  # alice's two, none of mallory's
    assert refused == protocol.CLOSE_NOT_FOUND


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"title": 42}, "title must be a string"),
        ({"title": "t" * 256}, "title"),
        ({"metadata": "tags"}, "metadata must be a dict"),
        ({"metadata": nested(MAX_STATE_DEPTH + 1)}, "nests deeper"),
    ],
)
async def test_a_bad_new_conversation_is_an_error_frame_and_creates_nothing(
    site: Any, fields: dict[str, Any], message: str
) -> None:
    scope, _ = await new_conversation()
    sock = await connect(scope.user)

    error = await sock.send("create_conversation", **fields)
    await sock.disconnect()

    assert error["ok"] is False and error["reply"] == "create_conversation"
    assert error["error"]["code"] == "invalid_input"
    assert message in error["error"]["message"]
    assert len(await sync_to_async(services.list_conversations)(scope)) == 1


async def test_an_oversized_new_conversation_is_refused_unread(site: Any) -> None:
    scope, _ = await new_conversation()
    sock = await connect(scope.user)
    blob = "x" * (protocol.MAX_FRAME_BYTES + 1)

    error = await sock.send_raw(
        json.dumps({"action": "create_conversation", "metadata": {"blob": blob}})
    )
    await sock.disconnect()

    assert error["ok"] is False and error["error"]["code"] == "too_large"
    assert len(await sync_to_async(services.list_conversations)(scope)) == 1


async def test_conversations_are_listed_a_page_at_a_time_with_a_cursor(
    site: Any,
) -> None:
    scope, _ = await new_conversation()
    for _ in range(4):
        await sync_to_async(services.create_conversation)(scope)
    sock = await connect(scope.user)

    pages = [await sock.send("list_conversations", limit=2)]
    while pages[-1]["next_cursor"] is not None:
        pages.append(
            await sock.send(
                "list_conversations", limit=2, cursor=pages[-1]["next_cursor"]
            )
        )
    await sock.disconnect()

    ids = [c["id"] for page in pages for c in page["conversations"]]
    owned = await sync_to_async(services.list_conversations)(scope)
    assert [len(p["conversations"]) for p in pages] == [2, 2, 1]
    assert ids == [str(c.pk) for c in owned]  # newest first, each once


async def test_a_cursor_made_from_another_users_conversation_lists_only_ones_own(
    site: Any,
) -> None:
    _, theirs = await new_conversation("alice")
    mallory, own = await new_conversation("mallory")
    cursor = await sync_to_async(services.conversation_cursor)(theirs)
    sock = await connect(mallory.user)

    page = await sock.send("list_conversations", cursor=cursor)
    everything = await sock.send("list_conversations")
    await sock.disconnect()

    shown = {c["id"] for c in page["conversations"] + everything["conversations"]}
    assert shown == {str(own.pk)}


@pytest.mark.parametrize(
    "fields",
    [
        {"limit": 0},
        {"limit": protocol.LIST_LIMIT + 1},
        {"limit": "10"},
        {"cursor": 7},
        {"cursor": "not-a-cursor"},
        {"cursor": "x" * 10_000},
    ],
)
async def test_a_bad_list_request_is_an_error_frame(
    site: Any, fields: dict[str, Any]
) -> None:
    scope, _ = await new_conversation()
    sock = await connect(scope.user)

    error = await sock.send("list_conversations", **fields)
    still_open = await sock.send("list_conversations")
    await sock.disconnect()

    assert error["ok"] is False and error["error"]["code"] == "invalid_input"
    assert still_open["ok"] is True


def _long_history(scope: Scope, conversation_id: Any, rows: int) -> None:
    services.append_display_messages(
        scope,
        conversation_id,
        [
            {
                "message_type": "user",
                "content_type": "text",
                "content": {"text": str(n)},
            }
            for n in range(rows)
        ],
    )


async def test_a_history_over_a_hundred_rows_is_read_whole_paging_backwards(
    site: Any,
) -> None:
    scope, conversation = await new_conversation()
    cid = str(conversation.pk)
    await sync_to_async(_long_history)(scope, cid, 250)
    sock = await connect(scope.user)

    pages = [await sock.send("history", conversation=cid)]
    while len(pages[-1]["messages"]) == protocol.HISTORY_LIMIT:
        oldest = pages[-1]["messages"][0]["id"]
        pages.append(await sock.send("history", conversation=cid, before=oldest))
    await sock.disconnect()

    texts = [m["content"]["text"] for page in reversed(pages) for m in page["messages"]]
    assert texts == [str(n) for n in range(250)]
    assert [len(p["messages"]) for p in pages] == [100, 100, 50]


@pytest.mark.parametrize(
    "fields",
    [
        {"before": "abc"},
        {"before": True},
        {"before": 1, "after": 1},
        {"before": 10**30},
        {"before": "foreign"},  # a row of another conversation
    ],
)
async def test_a_bad_history_cursor_is_an_error_frame(
    site: Any, fields: dict[str, Any]
) -> None:
    scope, conversation = await new_conversation()
    other = await sync_to_async(services.create_conversation)(scope)
    row = await sync_to_async(services.append_text_message)(
        scope, other.pk, "user", "elsewhere"
    )
    if fields.get("before") == "foreign":
        fields = {"before": row.pk}
    sock = await connect(scope.user)

    error = await sock.send("history", conversation=str(conversation.pk), **fields)
    await sock.disconnect()

    assert error["ok"] is False and error["error"]["code"] == "invalid_input"


async def test_history_of_another_users_conversation_closes_the_socket(
    site: Any,
) -> None:
    alice, conversation = await new_conversation("alice")
    row = await sync_to_async(services.append_text_message)(
        alice, conversation.pk, "user", "private"
    )
    mallory, _ = await new_conversation("mallory")
    sock = await connect(mallory.user)

    await sock.communicator.send_json_to(
        {"action": "history", "conversation": str(conversation.pk), "before": row.pk}
    )

    assert await sock.closed() == protocol.CLOSE_NOT_FOUND
    assert not [f for f in sock.frames if "messages" in f]


async def test_a_running_turn_is_announced_alive_until_it_ends(
    site: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(protocol, "RUN_ALIVE_SECONDS", 0.05)
    site.script(reply("slow " * 40, chunks=40, delay=0.05))
    scope, conversation = await new_conversation()
    cid = str(conversation.pk)
    sock = await connect(scope.user)
    await sock.send("subscribe", conversation=cid)

    sent = await sock.send("send", conversation=cid, text="Take your time")
    alive = await sock.until(
        lambda f: f.get("event") == "run_alive" and f["data"]["status"] == "running"
    )
    await sock.event("run_finished")
    await sock.disconnect()

    assert alive["conversation"] == cid
    assert alive["data"]["run_id"] == sent["run_id"]
    assert alive["data"]["heartbeat_at"] is not None
    assert "seq" not in alive  # not a numbered event: no gap for a client to see
    numbered = [f["seq"] for f in sock.events(cid) if f["event"] != "run_alive"]
    assert numbered == list(range(numbered[0], numbered[0] + len(numbered)))
