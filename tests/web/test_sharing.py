"""Sharing through the pages: what a read share and a write share may post, the
owner's panel, "Shared with me", and the read-only link page (its XSS corpus
included)."""

from __future__ import annotations

import re
from datetime import timedelta
from html.parser import HTMLParser
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core import signing
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from sagents_django import services
from sagents_django.scope import Scope
from sagents_django.sharing import access, links
from sagents_django.sharing import services as sharing
from sagents_django.sharing.models import ConversationShare, FilesystemShare, ShareLink
from tests.django.factories import snapshot
from tests.web.test_browser_xss import PAYLOADS

pytestmark = pytest.mark.django_db


class Tags(HTMLParser):
    """The elements and attributes a browser would build from a page."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()
        self.attributes: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.names.add(tag)
        self.attributes += attrs


HTMX = {"HTTP_HX_REQUEST": "true"}


def url(name: str, conversation: Any, *args: Any) -> str:
    return reverse(f"sagents_django:{name}", args=[conversation.pk, *args])


@pytest.fixture
def transcript(alice: Any, conversation: Any) -> Any:
    scope = Scope.for_user(alice)
    services.append_text_message(scope, conversation.pk, "user", "Where to in May?")
    services.append_text_message(scope, conversation.pk, "assistant", "Try Lisbon.")
    return conversation


def shared(alice: Any, conversation: Any, bob: Any, access: str) -> None:
    sharing.share(Scope.for_user(alice), conversation.pk, bob, access)


def posts(conversation: Any) -> dict[str, tuple[str, dict[str, Any]]]:
    """Every form of the chat page that changes something, with a valid body."""
    return {
        "send": (url("send", conversation), {"text": "hello"}),
        "stop": (url("stop", conversation), {}),
        "retry": (url("retry", conversation), {}),
        "reset": (url("reset", conversation), {}),
        "decide": (url("decide", conversation), {"action": "dismiss"}),
        "rename": (url("rename", conversation), {"title": "Mine"}),
        "delete": (url("delete", conversation), {}),
        "fork": (url("fork", conversation), {}),
        "share": (url("share", conversation), {"name": "carol", "access": "write"}),
        "link": (url("share_link", conversation), {"expires": ""}),
    }


def test_a_read_share_reads_the_page_without_a_form_to_send(
    alice: Any, bob: Any, bob_client: Client, transcript: Any
) -> None:
    shared(alice, transcript, bob, "read")
    page = bob_client.get(url("conversation", transcript))
    html = page.content.decode()
    assert page.status_code == 200
    assert "Try Lisbon." in html and "read only" in html
    assert 'id="sg-send"' not in html and "sg-rename" not in html
    assert 'id="sg-share"' not in html and "sg-upload" not in html
    # No action that would start a turn or copy the conversation: only rating.
    assert "Regenerate" not in html and "sg-edit" not in html
    assert "Fork from here" not in html and "Good reply" in html
    assert '<span class="sg-who">The owner</span>' in html
    assert bob_client.get(url("files", transcript)).status_code == 200
    last = transcript.display_messages.order_by("-pk").first().pk
    assert (
        bob_client.get(url("older", transcript) + f"?before={last}").status_code == 200
    )


@pytest.mark.parametrize(
    "name",
    [
        "send",
        "stop",
        "retry",
        "reset",
        "decide",
        "rename",
        "delete",
        "fork",
        "share",
        "link",
    ],
)
def test_a_read_share_posting_any_form_gets_404_and_changes_nothing(
    name: str,
    alice: Any,
    bob: Any,
    bob_client: Client,
    transcript: Any,
    sent: list[Any],
) -> None:
    shared(alice, transcript, bob, "read")
    path, body = posts(transcript)[name]
    before = snapshot()
    for headers in ({}, HTMX):
        assert bob_client.post(path, body, **headers).status_code == 404
    assert snapshot() == before and sent == []
    assert ConversationShare.objects.count() == 1 and not ShareLink.objects.exists()


@pytest.mark.parametrize("name", ["reset", "rename", "delete", "fork", "share", "link"])
def test_a_write_share_may_not_manage_the_conversation(
    name: str,
    alice: Any,
    bob: Any,
    bob_client: Client,
    transcript: Any,
    sent: list[Any],
) -> None:
    shared(alice, transcript, bob, "write")
    path, body = posts(transcript)[name]
    before = snapshot()
    assert bob_client.post(path, body, **HTMX).status_code == 404
    assert snapshot() == before and sent == []


def test_a_write_share_sends_through_the_scope_its_share_lends(
    alice: Any, bob: Any, bob_client: Client, transcript: Any, sent: list[Any]
) -> None:
    from sagents_django.runtime import agent_server

    seen: list[Scope] = []
    original = agent_server.add_message

    def spy(scope: Scope, cid: Any, text: Any, **kw: Any) -> Any:
        seen.append(scope)
        return original(scope, cid, text, **kw)

    shared(alice, transcript, bob, "write")
    agent_server.add_message = spy  # type: ignore[assignment]
    try:
        response = bob_client.post(url("send", transcript), {"text": "hi"}, **HTMX)
    finally:
        agent_server.add_message = original  # type: ignore[assignment]
    assert response.status_code == 204
    assert seen[0].user == bob and seen[0].lent.access == "write"
    page = bob_client.get(url("conversation", transcript)).content.decode()
    assert 'id="sg-send"' in page and "sg-rename" not in page


def test_a_stranger_and_a_revoked_share_get_404(
    alice: Any, bob: Any, bob_client: Client, transcript: Any, sent: list[Any]
) -> None:
    assert bob_client.get(url("conversation", transcript)).status_code == 404
    shared(alice, transcript, bob, "write")
    assert bob_client.get(url("conversation", transcript)).status_code == 200
    sharing.revoke(Scope.for_user(alice), transcript.pk, bob)
    assert bob_client.get(url("conversation", transcript)).status_code == 404
    assert bob_client.post(url("send", transcript), {"text": "x"}).status_code == 404
    assert sent == []


def test_the_owner_shares_from_the_panel_and_stops_sharing(
    alice_client: Client, bob: Any, transcript: Any
) -> None:
    page = alice_client.get(url("conversation", transcript)).content.decode()
    assert 'id="sg-share"' in page and "Only you can see" in page
    response = alice_client.post(
        url("share", transcript), {"name": "BOB", "access": "write"}, **HTMX
    )
    assert response.status_code == 200
    assert (
        "bob" in response.content.decode()
        and "read and write" in response.content.decode()
    )
    share = ConversationShare.objects.get()
    assert (share.user, share.access) == (bob, "write")
    plain = alice_client.post(url("revoke_share", transcript, share.pk))
    assert plain.status_code == 302 and not ConversationShare.objects.exists()


@pytest.mark.parametrize(
    ("route", "model"),
    [("share", ConversationShare), ("share_files", FilesystemShare)],
)
def test_the_panel_refuses_an_unknown_or_forbidden_person_alike(
    route: str,
    model: Any,
    settings: Any,
    alice: Any,
    alice_client: Client,
    transcript: Any,
) -> None:
    """The Sharing panel, and the files panel's Share files (the same view)."""
    settings.SAGENTS = {"SHARE_WITH": "tests.sharing.tenants.share_with"}
    alice.email = "alice@acme.test"
    alice.save()
    get_user_model().objects.create_user(username="olga", email="olga@other.test")
    answers = [
        alice_client.post(url(route, transcript), {"name": name}, **HTMX)
        for name in ("olga", "olga@other.test", "nobody")
    ]
    assert {a.status_code for a in answers} == {422}
    errors = {
        re.findall(r'role="alert">([^<]+)<', a.content.decode())[0] for a in answers
    }
    assert errors == {"No one you may share with has that name."}
    assert not model.objects.exists()
    bad = alice_client.post(
        url(route, transcript), {"name": "x" * 5000, "access": "read"}, **HTMX
    )
    assert bad.status_code == 422 and not model.objects.exists()


def test_shared_with_me_lists_what_others_shared(
    alice: Any, bob: Any, bob_client: Client, transcript: Any
) -> None:
    home = bob_client.get(reverse("sagents_django:home")).content.decode()
    assert "Shared with me" not in home
    shared(alice, transcript, bob, "read")
    home = bob_client.get(reverse("sagents_django:home")).content.decode()
    assert "Shared with me" in home and url("conversation", transcript) in home
    mine = services.create_conversation(Scope.for_user(bob), title="Bob's own")
    sidebar = bob_client.get(url("conversation", mine)).content.decode()
    assert "Shared with me" in sidebar and "Alice&#x27;s" in sidebar


# The read-only link page ------------------------------------------------------------
def link_for(alice: Any, conversation: Any, **kw: Any) -> str:
    link = links.create_link(Scope.for_user(alice), conversation.pk, **kw)
    return reverse("sagents_django:shared_link", args=[links.token_of(link)])


def test_the_owner_makes_a_link_in_the_panel_and_anyone_reads_it(
    alice_client: Client, transcript: Any
) -> None:
    panel = alice_client.post(url("share_link", transcript), {"expires": "7"}, **HTMX)
    token = links.token_of(ShareLink.objects.get())
    assert reverse("sagents_django:shared_link", args=[token]) in panel.content.decode()
    page = Client().get(reverse("sagents_django:shared_link", args=[token]))
    html = page.content.decode()
    assert page.status_code == 200
    assert "Where to in May?" in html and "Try Lisbon." in html
    assert "<form" not in html and "<script" not in html and "ws-connect" not in html
    assert "Files" not in html and "Plan" not in html
    assert "script-src" not in page["Content-Security-Policy"]
    assert "default-src 'none'" in page["Content-Security-Policy"]
    assert page["Referrer-Policy"] == "no-referrer"
    bad = alice_client.post(url("share_link", transcript), {"expires": "9999"}, **HTMX)
    assert bad.status_code == 422 and ShareLink.objects.count() == 1


def test_a_revoked_expired_or_forged_link_is_404(
    alice: Any, alice_client: Client, transcript: Any
) -> None:
    path = link_for(alice, transcript)
    link = ShareLink.objects.get()
    assert Client().get(path).status_code == 200
    alice_client.post(url("revoke_link", transcript, link.pk))
    assert Client().get(path).status_code == 404
    expiring = link_for(alice, transcript, expires_in=timedelta(days=1))
    ShareLink.objects.filter(revoked_at__isnull=True).update(
        expires_at=timezone.now() - timedelta(minutes=1)
    )
    assert Client().get(expiring).status_code == 404
    forged = signing.dumps(str(link.pk), salt="not.the.salt")
    for token in (forged, str(link.pk), "x" * 300, "%00"):
        response = Client().get(f"/s/{token}/")
        assert response.status_code == 404


def test_another_owners_link_cannot_be_revoked_from_my_conversation(
    alice: Any, bob_client: Client, bob: Any, transcript: Any
) -> None:
    path = link_for(alice, transcript)
    link = ShareLink.objects.get()
    mine = services.create_conversation(Scope.for_user(bob))
    assert bob_client.post(url("revoke_link", mine, link.pk)).status_code == 302
    assert bob_client.post(url("revoke_link", transcript, link.pk)).status_code == 404
    assert Client().get(path).status_code == 200


def test_no_payload_of_the_xss_corpus_survives_on_the_link_page(
    alice: Any, conversation: Any
) -> None:
    scope = Scope.for_user(alice)
    services.update_conversation(
        scope, conversation.pk, title=PAYLOADS[0] + PAYLOADS[1]
    )
    for n, payload in enumerate(PAYLOADS):
        services.append_text_message(scope, conversation.pk, "user", payload)
        services.append_text_message(scope, conversation.pk, "assistant", payload)
        services.append_display_message(
            scope,
            conversation.pk,
            message_type="assistant",
            content_type="tool_call",
            content={"call_id": f"c{n}", "name": payload, "arguments": {"x": payload}},
        )
        services.append_display_message(
            scope,
            conversation.pk,
            message_type="system",
            content_type="notification",
            content={"text": payload, "reason": "x"},
        )
    html = Client().get(link_for(alice, conversation)).content.decode()
    tags = Tags()
    tags.feed(html)
    assert tags.names & {"script", "iframe", "svg", "img", "object", "embed"} == set()
    assert [a for a in tags.attributes if a[0].startswith("on")] == []
    assert [a for a in tags.attributes if "javascript:" in (a[1] or "").lower()] == []
    # The arguments of a tool call never show: only its name, escaped.
    assert "&lt;script&gt;" in html


def test_a_read_share_rates_a_reply_as_their_own_word(
    alice: Any, bob: Any, bob_client: Client, transcript: Any
) -> None:
    from sagents_django.models import ReplyFeedback

    shared(alice, transcript, bob, "read")
    reply = transcript.display_messages.get(message_type="assistant")
    response = bob_client.post(
        url("rate", transcript, reply.pk), {"rating": "up"}, **HTMX
    )
    assert response.status_code == 200
    feedback = ReplyFeedback.objects.get()
    assert (feedback.user, feedback.rating) == (bob, "up")


@pytest.mark.parametrize(
    "name",
    [
        "send",
        "stop",
        "retry",
        "reset",
        "decide",
        "rename",
        "delete",
        "fork",
        "share",
        "link",
    ],
)
def test_another_tenant_posting_any_form_gets_404_and_changes_nothing(
    name: str, bob_client: Client, transcript: Any, sent: list[Any]
) -> None:
    path, body = posts(transcript)[name]
    before = snapshot()
    assert bob_client.post(path, body, **HTMX).status_code == 404
    assert snapshot() == before and sent == []
    assert not ConversationShare.objects.exists() and not ShareLink.objects.exists()


def test_each_reader_sees_who_wrote_a_message_sent_through_a_write_share(
    alice: Any,
    bob: Any,
    alice_client: Client,
    bob_client: Client,
    transcript: Any,
) -> None:
    shared(alice, transcript, bob, "write")
    lent = access.scope_for(Scope.for_user(bob), transcript.pk, access="write")
    services.append_text_message(
        lent,
        transcript.pk,
        "user",
        "And in June?",
        metadata={"sent_by": {"id": bob.pk, "name": "bob"}},
    )

    owners = alice_client.get(url("conversation", transcript)).content.decode()
    bobs = bob_client.get(url("conversation", transcript)).content.decode()

    who = re.compile(r'<span class="sg-who">([^<]*)</span>')
    assert who.findall(owners)[:3] == ["You", "Agent", "bob"]
    assert who.findall(bobs)[:3] == ["The owner", "Agent", "You"]
    # A write share may branch the conversation, not fork (copy) it.
    assert "Regenerate" in bobs and "Fork from here" not in bobs
    assert "Fork from here" in owners
