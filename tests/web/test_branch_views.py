"""The branch actions' views (regenerate, edit and resend, ``< n / m >``): without
JavaScript and with htmx, against other tenants, rows of other conversations, bad
values, a running turn; edited text is escaped like any message."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from sagents_django import services
from sagents_django.models import AgentRun, ConversationBranch
from sagents_django.scope import Scope
from tests.web.test_actions import turn

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
PAYLOAD = '<img src=x onerror="alert(1)"><script>alert(2)</script>'


def url(name: str, conversation: Any, row: Any) -> str:
    return reverse(f"sagents_django:{name}", args=[conversation.pk, row.pk])


def page(client: Client, conversation: Any) -> str:
    return client.get(
        reverse("sagents_django:conversation", args=[conversation.pk])
    ).content.decode()


def settle(conversation: Any) -> None:
    """The run a branch started ends (no executor runs in these tests)."""
    AgentRun.objects.filter(conversation=conversation, status="queued").update(
        status="completed"
    )


@pytest.fixture
def rows(alice: Any, conversation: Any) -> tuple[Any, Any]:
    """Two finished turns; the second's question and reply."""
    scope = Scope.for_user(alice)
    turn(scope, conversation, "Paris in May?", "Mild weather.")
    reply = turn(scope, conversation, "And Lyon?", "Lyon too.")
    question = services.load_display_messages(scope, conversation.pk)[-2]
    return question, reply


def test_the_page_offers_regenerate_on_replies_and_edit_on_the_person_s_messages(
    alice_client: Client, conversation: Any, rows: tuple[Any, Any]
) -> None:
    question, reply = rows
    html = page(alice_client, conversation)
    assert url("regenerate", conversation, reply) in html
    assert url("edit", conversation, question) in html
    assert url("regenerate", conversation, question) not in html
    assert "sg-branch-count" not in html  # no branch yet


def test_an_edit_without_javascript_branches_and_the_arrows_switch_back(
    alice_client: Client, conversation: Any, rows: tuple[Any, Any]
) -> None:
    question, _reply = rows
    response = alice_client.post(
        url("edit", conversation, question), {"text": "And Lyon? " + PAYLOAD}
    )
    assert response.status_code == 302
    assert response["Location"].endswith(f"#sg-msg-{question.pk}")
    settle(conversation)
    html = page(alice_client, conversation)
    assert "Lyon too." not in html and "Mild weather." in html
    assert "2 / 2" in html
    # The edited text is shown escaped, never as markup.
    assert "<script>alert(2)" not in html and "<img src=x" not in html
    assert "&lt;script&gt;" in html

    edited = services.load_display_messages(
        Scope.for_user(conversation.user), conversation.pk
    )[-1]
    response = alice_client.post(
        url("switch_branch", conversation, edited), {"index": "1"}
    )
    assert response.status_code == 302
    html = page(alice_client, conversation)
    assert "Lyon too." in html and "1 / 2" in html and "alert(2)" not in html


def test_regenerate_and_switch_with_htmx_answer_204(
    alice_client: Client, conversation: Any, rows: tuple[Any, Any]
) -> None:
    _, reply = rows
    response = alice_client.post(url("regenerate", conversation, reply), **HTMX)
    assert response.status_code == 204
    assert ConversationBranch.objects.filter(conversation=conversation).count() == 2
    # The regenerated reply's run has not ended: a switch waits for it.
    response = alice_client.post(
        url("switch_branch", conversation, reply), {"index": "1"}, **HTMX
    )
    assert response.status_code == 422
    assert "A turn is running" in response.content.decode()
    settle(conversation)
    # The old reply is in the branch no longer shown: the page is out of date.
    response = alice_client.post(
        url("switch_branch", conversation, reply), {"index": "1"}, **HTMX
    )
    assert response.status_code == 422
    assert "not in the branch shown" in response.content.decode()


@pytest.mark.parametrize("index", ["", "0", "3", "x", "-1", "9" * 30])
def test_a_bad_index_is_an_error_beside_the_form(
    alice_client: Client, conversation: Any, rows: tuple[Any, Any], index: str
) -> None:
    question, _ = rows
    alice_client.post(url("edit", conversation, question), {"text": "Lyon?"})
    settle(conversation)
    edited = services.load_display_messages(
        Scope.for_user(conversation.user), conversation.pk
    )[-1]
    response = alice_client.post(
        url("switch_branch", conversation, edited), {"index": index}, **HTMX
    )
    assert response.status_code == 422
    assert (
        ConversationBranch.objects.get(conversation=conversation, active=True).number
        == 1
    )


def test_another_tenant_and_rows_of_other_conversations_are_not_found(
    alice_client: Client,
    bob_client: Client,
    alice: Any,
    conversation: Any,
    rows: tuple[Any, Any],
) -> None:
    question, reply = rows
    for name, row, data in (
        ("regenerate", reply, {}),
        ("edit", question, {"text": "mine now"}),
        ("switch_branch", reply, {"index": "1"}),
    ):
        assert bob_client.post(url(name, conversation, row), data).status_code == 404
    other = services.create_conversation(Scope.for_user(alice))
    for name, row, data in (
        ("regenerate", reply, {}),
        ("edit", question, {"text": "x"}),
        ("switch_branch", reply, {"index": "1"}),
    ):
        assert alice_client.post(url(name, other, row), data).status_code == 404
    assert alice_client.get(url("regenerate", conversation, reply)).status_code == 405
    assert not ConversationBranch.objects.exists()


def test_an_empty_or_oversized_edit_is_refused(
    alice_client: Client, conversation: Any, rows: tuple[Any, Any], settings: Any
) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = None  # the view's own limit answers
    question, _ = rows
    for text in ("", "   ", "x" * (8 * 1024 * 1024 + 1)):
        response = alice_client.post(
            url("edit", conversation, question), {"text": text}, **HTMX
        )
        assert response.status_code == 422
    assert not ConversationBranch.objects.exists()


def test_the_socket_redraws_on_a_switch_and_live_rows_show_their_branch_point(
    alice: Any, conversation: Any, rows: tuple[Any, Any]
) -> None:
    from sagents_django.runtime import agent_server
    from sagents_django.runtime.publisher import display_message_json
    from sagents_django.ui import fragments

    scope = Scope.for_user(alice)
    _, reply = rows
    live = fragments.Live()

    def event(name: str, data: dict[str, Any]) -> str:
        message = {"conversation": str(conversation.pk), "event": name, "data": data}
        return fragments.for_event(scope, message, live)

    event("display_message_saved", {"display_message": display_message_json(reply)})
    agent_server.regenerate(scope, conversation.pk, reply.pk)
    settle(conversation)
    html = event("branch_switched", {"reason": "regenerate", "message_id": reply.pk})
    # The whole transcript again, of the branch shown (no reply there yet).
    assert 'id="sg-messages"' in html and "Lyon too." not in html
    new = services.append_text_message(scope, conversation.pk, "assistant", "Lyon!")
    html = event(
        "display_message_saved", {"display_message": display_message_json(new)}
    )
    assert "2 / 2" in html and "Lyon!" in html


def test_a_read_only_link_and_a_read_share_show_the_branch_shown_only(
    alice: Any,
    alice_client: Client,
    bob: Any,
    bob_client: Client,
    client: Client,
    conversation: Any,
    rows: tuple[Any, Any],
) -> None:
    from sagents_django.sharing import links
    from sagents_django.sharing import services as sharing

    question, _reply = rows
    alice_client.post(url("edit", conversation, question), {"text": "Edited away"})
    settle(conversation)
    edited = services.load_display_messages(Scope.for_user(alice), conversation.pk)[-1]
    alice_client.post(url("switch_branch", conversation, edited), {"index": "1"})
    owner = Scope.for_user(alice)
    link = links.create_link(owner, conversation.pk)
    sharing.share(owner, conversation.pk, bob, "read")

    shown = client.get(
        reverse("sagents_django:shared_link", args=[links.token_of(link)])
    ).content.decode()
    assert "Lyon too." in shown and "Edited away" not in shown
    bobs = page(bob_client, conversation)
    assert "Lyon too." in bobs and "Edited away" not in bobs
    # A read share sees how many versions there are, and cannot switch them.
    assert "1 / 2" in bobs
    assert url("switch_branch", conversation, question) not in bobs
