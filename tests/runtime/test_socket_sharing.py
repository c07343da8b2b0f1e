"""A share's sockets, on both stacks: a shared user follows the conversation, a read
share's socket sends nothing, and revoking the share closes their open sockets at
once (the owner's stay)."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Group

from sagents_django import protocol
from sagents_django.models import AgentRun, DisplayMessage
from sagents_django.scope import Scope
from sagents_django.sharing import services as sharing
from tests.fakes.openai_server import reply
from tests.runtime.test_socket_sign_out import (
    browser,
    close_code,
    open_socket,
    paths,
    person,
    site,
)

pytestmark = pytest.mark.django_db(transaction=True)

__all__ = ["site"]


@sync_to_async
def share(owner: Any, cid: str, target: Any, access: str) -> None:
    sharing.share(Scope.for_user(owner), cid, target, access)


@sync_to_async
def revoke(owner: Any, cid: str, target: Any) -> None:
    assert sharing.revoke(Scope.for_user(owner), cid, target)


async def subscribed(communicator: WebsocketCommunicator, cid: str) -> None:
    await communicator.send_json_to({"action": "subscribe", "conversation": cid})
    reply = await communicator.receive_json_from(10)
    assert reply.get("ok", True) and reply.get("error") is None, reply


async def opened(client: Any, socket: str, cid: str) -> WebsocketCommunicator:
    communicator = await open_socket(client, paths(cid)[socket])
    if socket == "json":
        await subscribed(communicator, cid)
    return communicator


@pytest.mark.parametrize("socket", ["json", "html"])
async def test_revoking_a_share_closes_the_shared_users_socket_at_once(
    site: Any, socket: str
) -> None:
    alice, cid = await person("alice")
    bob, _ = await person("bob")
    await share(alice, cid, bob, "read")
    theirs = await opened(await browser(bob), socket, cid)
    owners = await opened(await browser(alice), socket, cid)
    assert await theirs.receive_nothing(0.2) or socket == "json"

    await revoke(alice, cid, bob)

    assert await close_code(theirs) == protocol.CLOSE_NOT_FOUND
    assert await owners.receive_nothing(0.3) or socket == "json"
    await owners.disconnect()
    # And a new socket is refused.
    again = await open_socket(await browser(bob), paths(cid)[socket])
    if socket == "json":
        await again.send_json_to({"action": "subscribe", "conversation": cid})
    assert await close_code(again) == protocol.CLOSE_NOT_FOUND


async def test_leaving_the_group_a_conversation_is_shared_with_closes_on_revoke(
    site: Any,
) -> None:
    alice, cid = await person("alice")
    bob, _ = await person("bob")
    team = await Group.objects.acreate(name="travel")
    await sync_to_async(team.user_set.add)(bob)
    await share(alice, cid, team, "write")
    theirs = await opened(await browser(bob), "html", cid)
    await revoke(alice, cid, team)
    assert await close_code(theirs) == protocol.CLOSE_NOT_FOUND


async def test_narrowing_a_share_to_read_keeps_the_socket_open(site: Any) -> None:
    alice, cid = await person("alice")
    bob, _ = await person("bob")
    await share(alice, cid, bob, "write")
    theirs = await opened(await browser(bob), "html", cid)
    await share(alice, cid, bob, "read")
    assert await theirs.receive_nothing(0.5)
    await theirs.disconnect()


@pytest.mark.parametrize("action", ["send", "resume", "dismiss", "cancel"])
async def test_a_read_share_acting_over_the_socket_is_closed_and_changes_nothing(
    site: Any, action: str
) -> None:
    alice, cid = await person("alice")
    bob, _ = await person("bob")
    await share(alice, cid, bob, "read")
    theirs = await opened(await browser(bob), "json", cid)
    frame = {"action": action, "conversation": cid, "text": "hi", "decisions": []}
    await theirs.send_json_to(frame)
    assert await close_code(theirs) == protocol.CLOSE_NOT_FOUND
    assert not await DisplayMessage.objects.filter(conversation_id=cid).aexists()
    assert not await AgentRun.objects.filter(conversation_id=cid).aexists()


async def test_a_stranger_cannot_follow_or_send(site: Any) -> None:
    _, cid = await person("alice")
    bob, _ = await person("bob")
    html = await open_socket(await browser(bob), paths(cid)["html"])
    assert await close_code(html) == protocol.CLOSE_NOT_FOUND
    json_socket = await open_socket(await browser(bob), "/ws/sagents/")
    await json_socket.send_json_to({"action": "send", "conversation": cid, "text": "x"})
    assert await close_code(json_socket) == protocol.CLOSE_NOT_FOUND
    assert not await DisplayMessage.objects.filter(conversation_id=cid).aexists()


async def test_a_write_share_sends_over_the_socket_and_the_turn_is_the_owners(
    site: Any,
) -> None:
    from tests.runtime.follow import turns_ended

    alice, cid = await person("alice")
    bob, _ = await person("bob")
    site.script(reply("Answered for Bob, in Alice's conversation."))
    await share(alice, cid, bob, "write")
    theirs = await opened(await browser(bob), "json", cid)
    await theirs.send_json_to({"action": "send", "conversation": cid, "text": "hi"})
    while (await theirs.receive_json_from(30)).get("event") != "run_finished":
        pass
    await turns_ended()
    run = await AgentRun.objects.filter(conversation_id=cid).afirst()
    assert run is not None and run.status == "completed", run
    scope = run.metadata["scope"]
    assert scope["user_id"] == bob.pk and scope["lent"]["access"] == "write"
    texts = [
        row.content.get("text")
        async for row in DisplayMessage.objects.filter(conversation_id=cid)
    ]
    assert "Answered for Bob, in Alice's conversation." in texts
    await theirs.disconnect()
