"""Signed links to one approval request: a page that shows it (GET never decides),
a POST with CSRF by a signed-in person who may decide; single use, expiring, and
refused when forged or opened by someone else."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from django.core import signing
from django.test import Client
from django.urls import reverse

from sagents_django.approvals import links
from sagents_django.approvals.models import ApprovalRequest, ApprovalVote
from sagents_django.signals import approval_requested
from tests.web.approval_helpers import allow, pause, routed

pytestmark = pytest.mark.django_db


def link(row: ApprovalRequest) -> str:
    return links.path_for(row)


def test_get_shows_the_request_and_decides_nothing(
    alice_client: Client, conversation: Any, sent: list
) -> None:
    row = pause(conversation, "write_file")[0]
    page = alice_client.get(link(row))
    assert page.status_code == 200
    html = page.content.decode()
    assert "write_file" in html and "/notes.md" in html
    assert f'name="hash" value="{row.arguments_hash}"' in html
    assert sent == [] and not ApprovalVote.objects.exists()
    row.refresh_from_db()
    assert row.status == "pending"


def test_post_decides_once_and_the_link_cannot_be_replayed(
    alice_client: Client, conversation: Any, sent: list
) -> None:
    row = pause(conversation, "write_file")[0]
    url = link(row)
    post = {"decision": "reject", "message": "not now", "hash": row.arguments_hash}
    done = alice_client.post(url, post)
    assert done.status_code == 200 and b"Decision recorded" in done.content
    assert sent == [("resume", [{"type": "reject", "message": "not now"}])]
    vote = ApprovalVote.objects.get()
    assert vote.via == "link" and vote.reason == "not now"

    again = alice_client.post(url, post)
    assert again.status_code == 410 and b"already used" in again.content
    assert alice_client.get(url).status_code == 410
    assert len(sent) == 1


def test_an_expired_link_is_refused(
    alice_client: Client, conversation: Any, sent: list
) -> None:
    row = pause(conversation, "write_file")[0]
    past = links.max_age() + 60
    with mock.patch("django.core.signing.time.time", return_value=1e9 - past):
        token = links.token_for(row)
    with mock.patch("django.core.signing.time.time", return_value=1e9):
        url = reverse("sagents_django:approval_link", args=[token])
        response = alice_client.post(
            url, {"decision": "approve", "hash": row.arguments_hash}
        )
    assert response.status_code == 410 and b"expired" in response.content
    assert sent == []


@pytest.mark.parametrize(
    "token",
    [
        "x",
        "eyJyIjoiMSJ9:forged:signature",
        "a" * 600,
        signing.dumps({"r": "not-a-uuid", "n": "x"}, salt=links.SALT),
        signing.dumps(["r", "n"], salt=links.SALT),
    ],
    # Fixed ids: a signed token differs per process (its timestamp).
    ids=["short", "forged", "oversized", "not-a-uuid", "not-a-dict"],
)
def test_a_forged_or_malformed_link_is_refused(
    alice_client: Client, conversation: Any, sent: list, token: str
) -> None:
    pause(conversation, "write_file")
    url = reverse("sagents_django:approval_link", args=[token])
    response = alice_client.post(url, {"decision": "approve"})
    assert response.status_code == 410 and b"not valid" in response.content
    assert sent == []


def test_a_link_signed_with_another_salt_is_refused(
    alice_client: Client, conversation: Any, sent: list
) -> None:
    row = pause(conversation, "write_file")[0]
    token = signing.dumps({"r": str(row.pk), "n": row.link_nonce or "n"})
    url = reverse("sagents_django:approval_link", args=[token])
    assert alice_client.get(url).status_code == 410


def test_a_link_opened_by_another_signed_in_person_shows_nothing(
    bob_client: Client, conversation: Any, sent: list
) -> None:
    row = pause(conversation, "write_file")[0]
    page = bob_client.get(link(row))
    assert page.status_code == 403 and b"/notes.md" not in page.content
    post = bob_client.post(
        link(row), {"decision": "approve", "hash": row.arguments_hash}
    )
    assert post.status_code == 403 and sent == []


def test_a_link_signs_in_first(client: Client, conversation: Any) -> None:
    row = pause(conversation, "write_file")[0]
    response = client.get(link(row))
    assert response.status_code == 302 and "login" in response["Location"]


def test_a_post_without_csrf_is_refused(
    alice: Any, conversation: Any, sent: list
) -> None:
    row = pause(conversation, "write_file")[0]
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    response = client.post(
        link(row), {"decision": "approve", "hash": row.arguments_hash}
    )
    assert response.status_code == 403 and sent == []


def test_a_tampered_hash_through_a_link_is_refused(
    alice_client: Client, conversation: Any, sent: list
) -> None:
    row = pause(conversation, "write_file")[0]
    response = alice_client.post(link(row), {"decision": "approve", "hash": "f" * 64})
    assert response.status_code == 422
    assert b"not the ones this decision was made on" in response.content
    assert sent == []


def test_the_signal_carries_a_working_link_to_each_new_request(
    settings: Any, bob: Any, conversation: Any, django_capture_on_commit_callbacks: Any
) -> None:
    routed(settings)
    allow(bob)
    received: list[dict[str, Any]] = []

    def receiver(sender: Any, **kwargs: Any) -> None:
        received.append(kwargs)

    approval_requested.connect(receiver)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            row = pause(conversation, "write_file")[0]
    finally:
        approval_requested.disconnect(receiver)
    assert len(received) == 1
    assert received[0]["request"].pk == row.pk and received[0]["still_needed"] == 1
    client = Client()
    client.force_login(bob)
    assert client.get(received[0]["link"]).status_code == 200
    from sagents_django.approvals.signals import deciders

    assert {u.username for u in deciders(row)} == {"alice", "bob"}
