"""Conversations sharing a filesystem scope (``SAGENTS["FILESYSTEM_SCOPE"]``): a
file one conversation's turn writes, or a person uploads to it, appears in the file
panel of every open page of the others, without a reload; pages of conversations
with other files hear nothing. Real turns on both stacks (the production one in
the PostgreSQL pass: a Celery worker, the Redis layer), pages as their sockets see
them."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from sagents_django import services
from sagents_django.models import AgentRun, StoredFile
from sagents_django.routing import websocket_urlpatterns
from sagents_django.runtime import agent_server, groups, layer
from sagents_django.runtime.file_scopes import owner_files
from sagents_django.runtime.publisher import publish_file_event
from sagents_django.scope import Scope
from sagents_django.ui import files
from tests.fakes.openai_server import FakeOpenAIServer, reply, tool_call
from tests.runtime import stacks
from tests.runtime.follow import EMBEDDED, turns_ended, use_stack

pytestmark = pytest.mark.django_db(transaction=True)

SHARED = "sagents_django.runtime.file_scopes.owner_files"
SITE = {"FACTORY": "tests.runtime.file_agents.build_agent", "FILESYSTEM_SCOPE": SHARED}
QUEUE = f"{stacks.QUEUE}-shared-files"


@pytest.fixture(scope="module")
def files_worker(
    django_db_setup: Any, django_db_blocker: Any, production_llm: FakeOpenAIServer
) -> Iterator[stacks.Worker]:
    """The production stack's worker, with this site's factory and shared files."""
    with stacks.own_worker(production_llm, queue=QUEUE, overrides=SITE) as worker:
        yield worker


@pytest.fixture(params=stacks.names())
async def site(request: Any, settings: Any) -> AsyncIterator[FakeOpenAIServer]:
    """The fake provider of a site sharing each user's files, on both stacks: on the
    production one the turn runs in a worker process and file events cross Redis."""
    llm: FakeOpenAIServer = use_stack(request, settings)
    settings.SAGENTS = {**settings.SAGENTS, **SITE}
    production = request.param == "production"
    if production:
        request.getfixturevalue("files_worker")
    with stacks.turns_to(QUEUE) if production else contextlib.nullcontext():
        yield llm
        await turns_ended()


@pytest.fixture
async def embedded(
    settings: Any, fake_llm: FakeOpenAIServer
) -> AsyncIterator[FakeOpenAIServer]:
    """The embedded stack alone, for tests that change the site's settings (a
    worker process keeps the ones it started with)."""
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}
    }
    settings.SAGENTS = {
        **EMBEDDED,
        **SITE,
        "MODEL": fake_llm.model,
        "MODEL_PARAMS": dict(fake_llm.model_params),
    }
    yield fake_llm
    await turns_ended()


@sync_to_async
def person(name: str, conversations: int = 2) -> tuple[Any, Scope, list[Any]]:
    user = get_user_model().objects.create_user(username=name)
    scope = Scope.for_user(user)
    made = [
        services.create_conversation(scope, title=f"{name} {i}")
        for i in range(conversations)
    ]
    return user, scope, made


async def open_page(user: Any, conversation: Any) -> WebsocketCommunicator:
    """A chat page's socket, connected and resynced as the page does."""
    path = f"/ws/sagents/html/{conversation.pk}/"
    socket = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
    socket.scope["user"] = user
    connected, _ = await socket.connect()
    assert connected
    await socket.send_to(text_data=json.dumps({"action": "resync", "after": None}))
    await socket.receive_from(5)
    return socket


async def frame_where(
    socket: WebsocketCommunicator, found: Callable[[str], bool], timeout: float = 30
) -> tuple[str, list[str]]:
    """The first frame ``found`` accepts, and every frame before it."""
    seen: list[str] = []
    async with asyncio.timeout(timeout):
        while True:
            frame = await socket.receive_from(timeout)
            if found(frame):
                return frame, seen
            seen.append(frame)


def file_tree_with(name: str) -> Callable[[str], bool]:
    return lambda html: 'id="sg-files"' in html and name in html


def write_turn(llm: FakeOpenAIServer, path: str, content: str) -> None:
    llm.script(
        reply(
            tool_calls=[
                tool_call("write_file", {"file_path": path, "content": content})
            ]
        ),
        reply("Written."),
    )


async def test_a_file_one_conversations_turn_writes_appears_in_the_others_panel(
    site: FakeOpenAIServer,
) -> None:
    alice, scope, (writer, reader) = await person("alice")
    reading = await open_page(alice, reader)
    writing = await open_page(alice, writer)
    write_turn(site, "/plan.md", "# The plan")

    await agent_server.aadd_message(scope, writer.pk, "Write the plan")

    panel, before = await frame_where(reading, file_tree_with("plan.md"))
    assert 'hx-swap-oob="true"' in panel
    # Only the panel: nothing of the writer's transcript reached the reader's page.
    assert not any("Write the plan" in frame for frame in [panel, *before])
    await frame_where(writing, lambda html: "Written." in html)
    stored = await StoredFile.objects.aget(path="/plan.md")
    assert (stored.scope_kind, stored.scope_id) == ("user", str(alice.pk))
    for socket in (reading, writing):
        await socket.disconnect()


async def test_pages_of_conversations_with_other_files_hear_nothing(
    site: FakeOpenAIServer,
) -> None:
    _, scope, (writer,) = await person("alice", 1)
    bob, _, (bobs,) = await person("bob", 1)
    watching = await open_page(bob, bobs)
    write_turn(site, "/secret.md", "alice only")

    run = await agent_server.aadd_message(scope, writer.pk, "Write it")
    await turns_ended()

    assert run.run_id is not None
    assert await watching.receive_nothing(0.3)
    await watching.disconnect()


async def test_without_a_site_scope_each_conversation_keeps_its_own_files(
    embedded: FakeOpenAIServer, settings: Any
) -> None:
    settings.SAGENTS = {**settings.SAGENTS, "FILESYSTEM_SCOPE": None}
    alice, scope, (writer, reader) = await person("alice")
    reading = await open_page(alice, reader)
    write_turn(embedded, "/mine.md", "private")

    await agent_server.aadd_message(scope, writer.pk, "Write it")
    await turns_ended()

    assert await reading.receive_nothing(0.3)
    stored = await StoredFile.objects.aget(path="/mine.md")
    assert (stored.scope_kind, stored.scope_id) == ("agent", str(writer.agent_id))
    await reading.disconnect()


async def test_an_upload_to_one_conversation_appears_in_the_others_panel(
    site: Any,
) -> None:
    alice, scope, (target, other) = await person("alice")
    reading = await open_page(alice, other)

    await sync_to_async(files.upload)(scope, target, "notes.txt", b"shared notes")

    await frame_where(reading, file_tree_with("notes.txt"))
    tree = await sync_to_async(files.tree)(scope, other)
    assert [row.path for row in tree] == ["/uploads", "/uploads/notes.txt"]
    await reading.disconnect()


async def test_a_pages_own_file_events_are_drawn_once_a_sub_agents_too(
    site: Any,
) -> None:
    alice, _, (mine,) = await person("alice", 1)
    page = await open_page(alice, mine)
    data = {"path": "/a.md", "scope": ["user", alice.pk]}

    # Its own event comes through the conversation's group: the copy to the files
    # group is not drawn again.
    await publish_file_event(mine.pk, "file_updated", data)
    assert await page.receive_nothing(0.3)
    # A sub-agent's is drawn only from the files group.
    tag = {"name": "researcher", "task_call_id": "call-1"}
    await publish_file_event(mine.pk, "file_updated", data, subagent=tag)
    frame = await page.receive_from(5)
    assert 'id="sg-files"' in frame
    await page.disconnect()


async def test_a_page_leaves_its_files_group_when_it_closes(site: Any) -> None:
    alice, _, (mine,) = await person("alice", 1)
    page = await open_page(alice, mine)
    group = groups.files_group(["user", alice.pk])
    await page.disconnect()

    await layer.group_send(
        group,
        {
            "type": "agent.event",
            "files": True,
            "conversation": "x",
            "event": "file_updated",
            "seq": 1,
            "data": {},
        },
    )
    assert await page.receive_nothing(0.3)


def test_the_panel_of_every_conversation_of_the_scope_shows_the_shared_files(
    settings: Any, alice_client: Client, alice: Any
) -> None:
    settings.SAGENTS = {**settings.SAGENTS, "FILESYSTEM_SCOPE": SHARED}
    scope = Scope.for_user(alice)
    first = services.create_conversation(scope, title="one")
    second = services.create_conversation(scope, title="two")
    files.upload(scope, first, "brief.md", b"# Brief")

    page = alice_client.get(reverse("sagents_django:conversation", args=[second.pk]))
    opened = alice_client.get(
        reverse("sagents_django:file", args=[second.pk]), {"path": "/uploads/brief.md"}
    )

    assert b"brief.md" in page.content
    assert opened.status_code == 200 and b"<h1>Brief</h1>" in opened.content


async def test_a_scope_the_call_names_wins_over_the_sites(
    site: FakeOpenAIServer,
) -> None:
    _, scope, (mine,) = await person("alice", 1)
    write_turn(site, "/report.md", "for the project")

    await agent_server.aadd_message(
        scope, mine.pk, "Write it", filesystem_scope=("project", 7)
    )
    await turns_ended()

    stored = await StoredFile.objects.aget(path="/report.md")
    assert (stored.scope_kind, stored.scope_id) == ("project", "7")


async def test_a_site_function_that_gives_no_scope_ends_the_turn_with_an_error(
    embedded: FakeOpenAIServer, settings: Any
) -> None:
    settings.SAGENTS = {
        **settings.SAGENTS,
        "FILESYSTEM_SCOPE": "tests.runtime.file_agents.not_a_scope",
    }
    _, scope, (mine,) = await person("alice", 1)
    write_turn(embedded, "/never.md", "x")

    submission = await agent_server.aadd_message(scope, mine.pk, "Write it")
    await turns_ended()

    run = await AgentRun.objects.aget(pk=submission.run_id)
    assert run.status == "error"
    assert "A filesystem scope is made of strings and integers" in run.error
    assert not await StoredFile.objects.aexists()


def test_owner_files_names_the_conversations_owner(
    alice: Any, conversation: Any
) -> None:
    assert owner_files(Scope.for_user(alice), conversation) == ("user", alice.pk)
