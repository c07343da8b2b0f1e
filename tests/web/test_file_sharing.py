"""Sharing a conversation's files from its page: the files panel's "Share files"
(the owner's alone, with and without htmx, the site's rule and its errors), "Shared
with me" listing them, the shared files page's upload for a write share (refused to
a read share, a revoked share, another user and another tenant) and its socket
(the list live, closed when the share goes)."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser, Group
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from sagents_django import services
from sagents_django.core.limits import MAX_FILE_BYTES
from sagents_django.models import StoredFile
from sagents_django.routing import websocket_urlpatterns
from sagents_django.scope import Scope
from sagents_django.sharing import filesystems
from sagents_django.sharing import services as sharing
from sagents_django.sharing.models import FilesystemShare
from sagents_django.ui import files

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
NOBODY = "No one you may share with has that name."


def url(name: str, *args: Any) -> str:
    return reverse(f"sagents_django:{name}", args=list(args))


def filesystem(alice: Any, conversation: Any) -> Any:
    return filesystems.filesystem_of(Scope.for_user(alice), conversation.pk)


def shared_files(alice: Any, conversation: Any, who: Any, access: str) -> Any:
    """Alice's files shared with ``who``; the filesystem's page."""
    filesystems.share_files(Scope.for_user(alice), conversation.pk, who, access)
    return url("shared_files", filesystem(alice, conversation).pk)


def upload(client: Client, page: str, name: str, data: bytes, **extra: Any) -> Any:
    body = {"file": SimpleUploadedFile(name, data, content_type="text/plain")}
    return client.post(page + "upload/", body, **extra)


def stored(alice: Any, conversation: Any) -> list[str]:
    kind, ident = filesystem(alice, conversation).key
    rows = StoredFile.objects.filter(scope_kind=kind, scope_id=ident)
    return sorted(rows.values_list("path", flat=True))


# The owner's "Share files" ---------------------------------------------------------
def test_the_owners_files_panel_has_share_files_and_a_share_holders_has_none(
    alice: Any, bob: Any, alice_client: Client, bob_client: Client, conversation: Any
) -> None:
    sharing.share(Scope.for_user(alice), conversation.pk, bob, "write")

    owners = alice_client.get(url("conversation", conversation.pk)).content.decode()
    bobs = bob_client.get(url("conversation", conversation.pk)).content.decode()

    assert 'id="sg-file-share"' in owners and "Share files" in owners
    assert 'id="sg-file-share-name"' in owners and 'id="sg-share-name"' in owners
    assert 'id="sg-file-share"' not in bobs and 'id="sg-share"' not in bobs


def test_sharing_files_with_htmx_draws_the_panel_again_with_the_share(
    alice: Any, bob: Any, alice_client: Client, conversation: Any
) -> None:
    response = alice_client.post(
        url("share_files", conversation.pk),
        {"name": "BOB", "access": "write"},
        **HTMX,
    )

    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith("<section") and 'id="sg-file-share"' in html
    assert "bob" in html and "read and write" in html and "Stop sharing" in html
    share = FilesystemShare.objects.get()
    assert (share.user, share.access) == (bob, "write")
    # The conversation itself is not shared.
    assert sharing.shares_of(Scope.for_user(alice), conversation.pk) == []


def test_without_javascript_sharing_and_stopping_redirect_back_to_the_page(
    alice: Any, bob: Any, alice_client: Client, conversation: Any
) -> None:
    page = url("conversation", conversation.pk)
    Group.objects.create(name="Travel")

    by_email = alice_client.post(
        url("share_files", conversation.pk), {"name": "carol@x.example"}
    )
    flashed = alice_client.get(page).content.decode()
    get_user_model().objects.create_user("carol", email="carol@x.example")
    again = alice_client.post(
        url("share_files", conversation.pk), {"name": "carol@x.example"}
    )
    group = alice_client.post(
        url("share_files", conversation.pk), {"name": "travel", "access": "read"}
    )
    shares = filesystems.file_shares_of(Scope.for_user(alice), conversation.pk)
    stop = alice_client.post(
        url("revoke_file_share", conversation.pk, shares[0].pk), follow=True
    )

    assert by_email.status_code == 302 and by_email["Location"] == page
    assert again.status_code == 302 and group.status_code == 302
    assert [(s.user and s.user.username, s.group and s.group.name) for s in shares] == [
        ("carol", None),
        (None, "Travel"),
    ]
    assert stop.redirect_chain == [(page, 302)]
    left = filesystems.file_shares_of(Scope.for_user(alice), conversation.pk)
    assert [s.group.name for s in left] == ["Travel"]
    assert NOBODY in flashed  # the first post's error, on the page it came back to


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("nobody", NOBODY),
        ("alice", "That user already owns these files"),
        ("", "Give a username, an email address or a group name"),
    ],
)
def test_a_share_that_cannot_be_made_says_why_and_writes_nothing(
    name: str, error: str, alice: Any, alice_client: Client, conversation: Any
) -> None:
    response = alice_client.post(
        url("share_files", conversation.pk), {"name": name, "access": "read"}, **HTMX
    )
    plain = alice_client.post(url("share_files", conversation.pk), {"name": name})

    assert response.status_code == 422
    assert error in response.content.decode()
    assert 'id="sg-file-share"' in response.content.decode()
    assert plain.status_code == 302
    assert error in alice_client.get(plain["Location"]).content.decode()
    assert not FilesystemShare.objects.exists()


def test_only_the_owner_may_share_or_stop_sharing_the_files(
    alice: Any, bob: Any, bob_client: Client, conversation: Any
) -> None:
    """Someone else (and a write share of the conversation) gets 404 for both."""
    sharing.share(Scope.for_user(alice), conversation.pk, bob, "write")
    carol = get_user_model().objects.create_user("carol")
    filesystems.share_files(Scope.for_user(alice), conversation.pk, carol, "read")
    share = FilesystemShare.objects.get()

    made = bob_client.post(
        url("share_files", conversation.pk), {"name": "bob", "access": "write"}
    )
    stopped = bob_client.post(url("revoke_file_share", conversation.pk, share.pk))
    stranger = Client()
    stranger.force_login(get_user_model().objects.create_user("eve"))
    other = stranger.post(url("share_files", conversation.pk), {"name": "eve"}, **HTMX)

    assert made.status_code == stopped.status_code == other.status_code == 404
    assert list(FilesystemShare.objects.values_list("user__username", "access")) == [
        ("carol", "read")
    ]


def test_stopping_a_share_of_other_files_by_its_id_changes_nothing(
    alice: Any, bob: Any, alice_client: Client, conversation: Any
) -> None:
    """A share row of someone else's files, posted to one's own conversation."""
    other = get_user_model().objects.create_user("olga")
    olgas = services.create_conversation(Scope.for_user(other))
    filesystems.share_files(Scope.for_user(other), olgas.pk, bob, "read")
    share = FilesystemShare.objects.get()

    response = alice_client.post(
        url("revoke_file_share", conversation.pk, share.pk), **HTMX
    )

    assert response.status_code == 200
    assert FilesystemShare.objects.filter(pk=share.pk).exists()


# Shared with me ----------------------------------------------------------------------
def test_shared_with_me_lists_the_files_shared_with_the_user(
    alice: Any, bob: Any, bob_client: Client, conversation: Any
) -> None:
    page = shared_files(alice, conversation, bob, "read")
    mine = services.create_conversation(Scope.for_user(bob), title="Bob's")

    listed = bob_client.get(url("home")).content.decode()
    sidebar = bob_client.get(url("conversation", mine.pk)).content.decode()
    stranger = Client()
    stranger.force_login(get_user_model().objects.create_user("eve"))
    others = stranger.get(url("home")).content.decode()

    for html in (listed, sidebar):
        assert "Shared with me" in html and f'href="{page}"' in html
        assert "read only" in html
    assert "Shared with me" not in others


# The shared files page ---------------------------------------------------------------
@pytest.mark.parametrize(("access", "answer"), [("write", 302), ("read", 404)])
def test_a_write_share_uploads_there_and_a_read_share_gets_no_form_and_404(
    access: str,
    answer: int,
    alice: Any,
    bob: Any,
    bob_client: Client,
    conversation: Any,
) -> None:
    page = shared_files(alice, conversation, bob, access)

    html = bob_client.get(page).content.decode()
    response = upload(bob_client, page, "notes.txt", b"Tea\n")

    assert response.status_code == answer
    if access == "write":
        assert 'type="file"' in html and f'action="{page}upload/"' in html
        assert response["Location"] == page
        assert stored(alice, conversation) == ["/uploads/notes.txt"]
        assert "notes.txt" in bob_client.get(page).content.decode()
    else:
        assert 'type="file"' not in html and "read only" in html
        assert stored(alice, conversation) == []


def test_an_upload_there_follows_the_chat_pages_rules(
    alice: Any, bob: Any, bob_client: Client, conversation: Any
) -> None:
    page = shared_files(alice, conversation, bob, "write")

    big = upload(bob_client, page, "big.txt", b"x" * (MAX_FILE_BYTES + 1), **HTMX)
    binary = upload(bob_client, page, "a.bin", b"\xff\xfe", **HTMX)
    nothing = bob_client.post(page + "upload/", {}, **HTMX)
    plain = upload(bob_client, page, "a.bin", b"\xff\xfe")

    assert big.status_code == 422 and big.content == b"That file is too large."
    assert binary.status_code == 422
    assert binary.content == b"Only UTF-8 text files can be uploaded."
    assert nothing.content == b"Choose a file to upload."
    assert plain.status_code == 302
    assert "Only UTF-8" in bob_client.get(page).content.decode()
    assert stored(alice, conversation) == []


def test_a_revoked_share_another_user_and_another_tenant_get_404(
    settings: Any, alice: Any, bob: Any, bob_client: Client, conversation: Any
) -> None:
    page = shared_files(alice, conversation, bob, "write")
    filesystems.revoke_files(Scope.for_user(alice), conversation.pk, bob)
    eve = Client()
    eve.force_login(get_user_model().objects.create_user("eve"))

    answers = [
        bob_client.get(page).status_code,
        upload(bob_client, page, "x.txt", b"x").status_code,
        eve.get(page).status_code,
        upload(eve, page, "x.txt", b"x").status_code,
        upload(eve, url("shared_files", 999_999), "x.txt", b"x").status_code,
    ]

    assert answers == [404] * 5
    assert stored(alice, conversation) == []


def test_the_owner_uploads_on_the_page_of_their_own_files(
    alice: Any, alice_client: Client, conversation: Any
) -> None:
    page = url("shared_files", filesystem(alice, conversation).pk)

    response = upload(alice_client, page, "mine.txt", b"Mine", **HTMX)

    assert response.status_code == 204
    assert stored(alice, conversation) == ["/uploads/mine.txt"]


# Its socket --------------------------------------------------------------------------
async def page_socket(user: Any, filesystem_id: int) -> WebsocketCommunicator:
    socket = WebsocketCommunicator(
        URLRouter(websocket_urlpatterns), f"/ws/sagents/html/files/{filesystem_id}/"
    )
    socket.scope["user"] = user
    connected, _ = await socket.connect()
    assert connected
    return socket


async def close_code(socket: WebsocketCommunicator) -> Any:
    output = await socket.receive_output(5)
    assert output["type"] == "websocket.close"
    return output.get("code")


@pytest.mark.django_db(transaction=True)
async def test_the_pages_socket_draws_the_list_live_and_closes_when_revoked(
    settings: Any,
) -> None:
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}
    }
    make = sync_to_async(get_user_model().objects.create_user)
    alice, bob, eve = await make("alice"), await make("bob"), await make("eve")
    scope = Scope.for_user(alice)
    conversation = await sync_to_async(services.create_conversation)(scope)
    row = await sync_to_async(filesystems.filesystem_of)(scope, conversation.pk)
    await sync_to_async(filesystems.share_files)(scope, conversation.pk, bob, "write")

    socket = await page_socket(bob, row.pk)
    first = await socket.receive_from(5)
    await sync_to_async(files.upload)(scope, conversation, "a.md", b"one")
    after_owner = await socket.receive_from(5)
    await sync_to_async(files.upload_to)(row.key, "b.md", b"two")
    after_bob = await socket.receive_from(5)
    await sync_to_async(filesystems.revoke_files)(scope, conversation.pk, bob)
    revoked = await close_code(socket)
    strangers = [
        await close_code(await page_socket(eve, row.pk)),
        await close_code(await page_socket(AnonymousUser(), row.pk)),
        await close_code(await page_socket(bob, row.pk)),
    ]

    assert 'id="sg-files" hx-swap-oob="true"' in first and "No files yet" in first
    assert "a.md" in after_owner and "b.md" not in after_owner
    assert "a.md" in after_bob and "b.md" in after_bob
    assert f'href="{url("shared_files", row.pk)}?path=/uploads/b.md"' in after_bob
    assert revoked == 4404
    assert strangers == [4404, 4401, 4404]
