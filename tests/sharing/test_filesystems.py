"""A filesystem scope shared on its own: who owns it, what a share lets a call
name, the shared files page, a revoked share at once (calls, queued turns,
sockets), and tenancy (another tenant's scope, a share the site forbids)."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import PermissionDenied
from django.test import Client
from django.urls import reverse

from sagents_django import services
from sagents_django.exceptions import NotFound
from sagents_django.models import AgentRun, Filesystem
from sagents_django.runtime import admission, agent_server
from sagents_django.scope import Scope
from sagents_django.sharing import filesystems
from sagents_django.ui import files

pytestmark = pytest.mark.django_db

PROJECT = ("project", "7")


@pytest.fixture(autouse=True)
def no_executor(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs are begun, not run: what is checked is what a call may name."""
    monkeypatch.setattr(admission, "get_executor", lambda: _Nothing())


class _Nothing:
    def submit(self, run_id: str) -> None:
        pass


def own_key(scope: Scope, conversation: Any) -> tuple[str, str]:
    return filesystems.filesystem_of(scope, conversation.pk).key


def test_the_owner_of_a_conversation_owns_its_files(
    scope: Scope, conversation: Any
) -> None:
    row = filesystems.filesystem_of(scope, conversation.pk)

    assert row.key == ("agent", conversation.agent_id)
    assert row.owner_key == str(scope.user.pk)
    assert filesystems.access_to(scope, row) == "own"


def test_a_new_name_is_claimed_by_its_first_user_and_refused_to_others(
    scope: Scope, conversation: Any, other_scope: Scope, other_conversation: Any
) -> None:
    agent_server.add_message(scope, conversation.pk, "Hi", filesystem_scope=PROJECT)

    with pytest.raises(NotFound, match="not found"):
        agent_server.add_message(
            other_scope, other_conversation.pk, "Me too", filesystem_scope=PROJECT
        )
    assert Filesystem.objects.get(kind="project").owner_key == str(scope.user.pk)
    assert not AgentRun.objects.filter(conversation=other_conversation).exists()


def test_files_no_one_claimed_cannot_be_named_into(
    scope: Scope, conversation: Any, other_scope: Scope, other_conversation: Any
) -> None:
    files.upload(other_scope, other_conversation, "mine.md", b"Bob's")
    theirs = ("agent", other_conversation.agent_id)
    Filesystem.objects.all().delete()  # as before this app kept owners

    with pytest.raises(NotFound):
        agent_server.add_message(scope, conversation.pk, "Hi", filesystem_scope=theirs)


def test_a_write_share_lets_a_call_name_the_files_a_read_share_does_not(
    scope: Scope,
    conversation: Any,
    other_scope: Scope,
    other_user: Any,
    other_conversation: Any,
) -> None:
    key = own_key(scope, conversation)
    filesystems.share_files(scope, conversation.pk, other_user, "read")

    with pytest.raises(PermissionDenied, match="read-only"):
        agent_server.add_message(
            other_scope, other_conversation.pk, "Use it", filesystem_scope=key
        )
    filesystems.share_files(scope, conversation.pk, other_user, "write")
    submission = agent_server.add_message(
        other_scope, other_conversation.pk, "Use it", filesystem_scope=key
    )

    assert submission.run_id is not None
    assert [s.access for s in filesystems.files_shared_with_me(other_scope)] == [
        "write"
    ]


def test_a_revoked_share_refuses_the_next_call_and_the_queued_turn(
    scope: Scope,
    conversation: Any,
    other_scope: Scope,
    other_user: Any,
    other_conversation: Any,
) -> None:
    key = own_key(scope, conversation)
    filesystems.share_files(scope, conversation.pk, other_user, "write")
    queued = agent_server.add_message(
        other_scope, other_conversation.pk, "Use it", filesystem_scope=key
    )

    assert filesystems.revoke_files(scope, conversation.pk, other_user)
    with pytest.raises(NotFound):
        agent_server.add_message(
            other_scope, other_conversation.pk, "Again", filesystem_scope=key
        )
    # The turn queued before the revocation asks again when a worker opens it.
    from sagents_django.runtime.opening import open_turn

    turn = open_turn(AgentRun.objects.get(pk=queued.run_id))
    assert isinstance(turn.setup_error, NotFound)
    assert filesystems.files_shared_with_me(other_scope) == []


def test_a_conversation_shared_with_someone_uses_its_own_files_only(
    scope: Scope, conversation: Any, other_scope: Scope, other_user: Any
) -> None:
    from sagents_django.sharing import services as sharing
    from sagents_django.sharing.access import scope_for

    sharing.share(scope, conversation.pk, other_user, "write")
    lent = scope_for(other_scope, conversation.pk, access="write")

    with pytest.raises(PermissionDenied, match="its own files"):
        agent_server.add_message(lent, conversation.pk, "Hi", filesystem_scope=PROJECT)
    with pytest.raises(NotFound):
        filesystems.share_files(lent, conversation.pk, other_user, "read")


def test_sharing_with_a_user_of_another_tenant_is_refused_when_the_site_says_so(
    settings: Any, django_user_model: Any
) -> None:
    settings.SAGENTS = {
        **settings.SAGENTS,
        "SHARE_WITH": "tests.sharing.tenants.share_with",
    }
    alice = django_user_model.objects.create_user("al", email="al@blue.example")
    mallory = django_user_model.objects.create_user("ma", email="ma@red.example")
    scope = Scope.for_user(alice)
    conversation = services.create_conversation(scope)

    with pytest.raises(PermissionDenied):
        filesystems.share_files(scope, conversation.pk, mallory, "read")
    assert filesystems.file_shares_of(scope, conversation.pk) == []


def test_the_owners_api_is_not_found_for_another_tenant(
    other_scope: Scope, conversation: Any, other_user: Any
) -> None:
    for call in (
        lambda: filesystems.filesystem_of(other_scope, conversation.pk),
        lambda: filesystems.share_files(other_scope, conversation.pk, other_user),
        lambda: filesystems.revoke_files(other_scope, conversation.pk, other_user),
        lambda: filesystems.file_shares_of(other_scope, conversation.pk),
    ):
        with pytest.raises(NotFound):
            call()


def test_the_shared_files_page_shows_a_read_share_its_files_without_a_form(
    scope: Scope, conversation: Any, other_user: Any, django_user_model: Any
) -> None:
    files.upload(scope, conversation, "plan.md", b"# Plan")
    row = filesystems.filesystem_of(scope, conversation.pk)
    filesystems.share_files(scope, conversation.pk, other_user, "read")
    client = Client()
    client.force_login(other_user)
    url = reverse("sagents_django:shared_files", args=[row.pk])

    listed = client.get(url)
    opened = client.get(url, {"path": "/uploads/plan.md"})
    filesystems.revoke_files(scope, conversation.pk, other_user)
    after = client.get(url)
    stranger = Client()
    stranger.force_login(django_user_model.objects.create_user("eve"))

    assert listed.status_code == 200 and b"plan.md" in listed.content
    assert b"<h1>Files shared with you</h1>" in listed.content
    assert b"read only" in listed.content and b'type="file"' not in listed.content
    assert opened.status_code == 200 and b"<h1>Plan</h1>" in opened.content
    assert after.status_code == 404
    assert stranger.get(url).status_code == 404


@pytest.mark.django_db(transaction=True)
async def test_a_socket_following_shared_files_stops_when_the_share_is_revoked(
    settings: Any,
) -> None:
    from tests.runtime.follow import new_conversation
    from tests.runtime.ws_client import SocketClosed, connect

    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}
    }
    scope, conversation = await new_conversation("alice")
    bob, _ = await new_conversation("bob")
    row = await sync_to_async(filesystems.filesystem_of)(scope, conversation.pk)
    await sync_to_async(filesystems.share_files)(scope, conversation.pk, bob.user)
    sock = await connect(bob.user)

    reply = await sock.send("follow_files", filesystem=row.pk)
    await sync_to_async(files.upload)(scope, conversation, "a.md", b"one")
    seen = await sock.until(lambda f: f.get("event") == "file_updated")
    await sync_to_async(filesystems.revoke_files)(scope, conversation.pk, bob.user)
    revoked = await sock.until(lambda f: f.get("event") == "filesystem_revoked")
    await sync_to_async(files.upload)(scope, conversation, "b.md", b"two")
    with pytest.raises(SocketClosed) as closed:  # asked again: not found, 4404
        await sock.send("follow_files", filesystem=row.pk)
    await sock.disconnect()

    assert reply["filesystem"] == row.pk and reply["access"] == "read"
    assert seen["data"]["path"] == "/uploads/a.md"
    assert revoked["filesystem"] == row.pk
    assert not any(
        f.get("data", {}).get("path") == "/uploads/b.md" for f in sock.frames
    )
    assert closed.value.code == 4404
