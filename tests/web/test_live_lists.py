"""Conversation lists follow the owner's other tabs: a conversation created,
renamed or deleted anywhere redraws every list socket of its owner (the list page
and the sidebar), and no one else's (``ui.live_lists``)."""

from __future__ import annotations

import html as markup
import re
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from sagents_django import services
from sagents_django.runtime import groups, layer
from sagents_django.scope import Scope

from .test_html_socket import connect, memory_layer, person  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def titles(html: str, list_id: str) -> list[str]:
    """The titles of the list ``list_id`` in a frame, in order."""
    match = re.search(rf'<ul[^>]*id="{list_id}"[^>]*>(.*?)</ul>', html, re.S)
    assert match is not None, html
    found = re.findall(r'<span id="sg-title-[^"]+"\s*>([^<]*)</span>', match.group(1))
    return [markup.unescape(title) for title in found]


async def next_frame(socket: WebsocketCommunicator) -> str:
    return await socket.receive_from(5)


async def test_a_conversation_created_in_another_tab_appears_in_the_list_page() -> None:
    alice, scope, _first = await person("alice")
    socket, connected = await connect(alice, "/ws/sagents/html/?list=page")
    assert connected

    await sync_to_async(services.create_conversation)(scope, title="Second")
    html = await next_frame(socket)

    assert 'hx-swap-oob="true"' in html
    assert titles(html, "sg-conversations") == ["Second", "alice's"]

    # The new one is followed too: its generated title reaches the list.
    created = (await sync_to_async(services.list_conversations)(scope))[0]
    await layer.group_send(
        groups.conversation_group(created.pk),
        {
            "type": "agent.event",
            "conversation": str(created.pk),
            "event": "conversation_title_generated",
            "seq": 1,
            "data": {"title": "Second"},
        },
    )
    assert f'id="sg-title-{created.pk}"' in await next_frame(socket)
    await socket.disconnect()


async def test_the_sidebar_follows_a_rename_and_a_delete_and_keeps_its_mark() -> None:
    alice, scope, shown = await person("alice")
    other = await sync_to_async(services.create_conversation)(scope, title="Other")
    path = f"/ws/sagents/html/?list=nav&current={shown.pk}"
    socket, connected = await connect(alice, path)
    assert connected

    await sync_to_async(services.update_conversation)(scope, shown.pk, title="Lake")
    html = await next_frame(socket)
    assert titles(html, "sg-nav-list") == ["Lake", "Other"]
    assert html.count('aria-current="page"') == 1
    assert re.search(rf'href="[^"]*{shown.pk}/"\s+aria-current="page"', html)
    # The page's title bar, renamed in another tab.
    assert '<span id="sg-title-text" hx-swap-oob="true">Lake</span>' in html

    await sync_to_async(services.delete_conversation)(scope, other.pk)
    html = await next_frame(socket)
    assert titles(html, "sg-nav-list") == ["Lake"]
    assert "sg-title-text" not in html  # another conversation's change
    await socket.disconnect()


async def test_a_rename_of_another_conversation_leaves_the_title_bar_alone() -> None:
    alice, scope, shown = await person("alice")
    other = await sync_to_async(services.create_conversation)(scope, title="Other")
    socket, _ = await connect(alice, f"/ws/sagents/html/?list=nav&current={shown.pk}")

    await sync_to_async(services.update_conversation)(scope, other.pk, title="Pond")
    html = await next_frame(socket)

    assert titles(html, "sg-nav-list") == ["Pond", "alice's"]
    assert "sg-title-text" not in html
    await socket.disconnect()


async def test_another_owners_changes_never_reach_the_list() -> None:
    _alice, alice_scope, _ = await person("alice")
    bob, bob_scope, _ = await person("bob")
    socket, _ = await connect(bob, "/ws/sagents/html/?list=nav")

    created = await sync_to_async(services.create_conversation)(
        alice_scope, title="Alice's secret"
    )
    await sync_to_async(services.update_conversation)(
        alice_scope, created.pk, title="Still secret"
    )
    assert await socket.receive_nothing(0.5)

    # Bob's own change does come, without Alice's.
    await sync_to_async(services.create_conversation)(bob_scope, title="Bob's new")
    html = await next_frame(socket)
    assert titles(html, "sg-nav-list") == ["Bob's new", "bob's"]
    assert "secret" not in html
    await socket.disconnect()


@pytest.mark.parametrize(
    "query",
    [
        "list=nav&current=not-a-uuid",
        "list=nav&current=",
        "list=everything&current=" + "9" * 500,
        "list=%ff%fe&current=%00",
    ],
)
async def test_a_malformed_list_query_is_a_plain_list_socket(query: str) -> None:
    alice, scope, _ = await person("alice")
    socket, connected = await connect(alice, f"/ws/sagents/html/?{query}")
    assert connected

    await sync_to_async(services.create_conversation)(scope, title="New")
    html = await next_frame(socket)

    assert "aria-current" not in html  # no conversation marked
    assert (
        titles(html, "sg-nav-list" if "nav" in query else "sg-conversations")[0]
        == "New"
    )
    await socket.disconnect()


async def test_a_receiver_of_conversation_changed_sees_each_change() -> None:
    from sagents_django.signals import conversation_changed

    seen: list[tuple[str, str]] = []

    def receiver(sender: Any, conversation: Any, change: str, **kwargs: Any) -> None:
        seen.append((conversation.title, change))

    conversation_changed.connect(receiver)
    try:
        _alice, scope, _ = await person("alice")
        created = await sync_to_async(services.create_conversation)(scope, title="A")
        await sync_to_async(services.update_conversation)(scope, created.pk, title="B")
        await sync_to_async(services.update_conversation)(
            scope, created.pk, metadata={"k": 1}
        )
        await sync_to_async(services.delete_conversation)(scope, created.pk)
    finally:
        conversation_changed.disconnect(receiver)

    assert seen == [
        ("alice's", "created"),
        ("A", "created"),
        ("B", "renamed"),
        ("B", "deleted"),
    ]


def test_a_scope_that_owns_nothing_has_no_owner_group() -> None:
    from sagents_django.ui.live_lists import scope_owner_key

    assert scope_owner_key(Scope(user=None, owner=None)) is None
