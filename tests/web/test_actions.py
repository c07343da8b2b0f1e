"""The message actions' views (rate a reply, fork from a turn) and the My usage page,
against strangers, other tenants, forged posts and bad values; with htmx and
without JavaScript."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from sagents_django import services
from sagents_django.core import Message, State, TokenUsage
from sagents_django.core.serialization import serialize_server_state
from sagents_django.models import ReplyFeedback
from sagents_django.scope import Scope

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def rate_url(conversation: Any, row: Any) -> str:
    return reverse("sagents_django:rate", args=[conversation.pk, row.pk])


def fork_url(conversation: Any) -> str:
    return reverse("sagents_django:fork", args=[conversation.pk])


def turn(scope: Scope, conversation: Any, question: str, answer: str) -> Any:
    """A finished turn in both views; its reply row."""
    run = services.begin_run(scope, conversation.pk, trigger="message")
    services.append_text_message(
        scope, conversation.pk, "user", question, run_id=run.pk
    )
    row = services.append_text_message(
        scope, conversation.pk, "assistant", answer, run_id=run.pk
    )
    services.finish_run(
        scope,
        run.pk,
        status="completed",
        usage=TokenUsage(input=120, output=30),
        cost=Decimal("0.0025"),
        model="openai/gpt-4o-mini",
    )
    data = services.load_agent_state(scope, conversation.pk)
    state = State() if data is None else State.from_serialized(None, data)
    state = state.add_message(Message.user(question)).add_message(
        Message.assistant(answer)
    )
    services.save_agent_state(scope, conversation.pk, serialize_server_state(state))
    return row


@pytest.fixture
def reply(alice: Any, conversation: Any) -> Any:
    return turn(Scope.for_user(alice), conversation, "Paris in May?", "Mild weather.")


def test_a_rating_without_javascript_goes_back_to_the_reply(
    alice_client: Client, conversation: Any, reply: Any
) -> None:
    response = alice_client.post(
        rate_url(conversation, reply), {"rating": "up", "comment": "Helpful"}
    )
    assert response.status_code == 302
    assert response["Location"].endswith(f"#sg-msg-{reply.pk}")
    row = ReplyFeedback.objects.get()
    assert (row.rating, row.comment) == ("up", "Helpful")
    page = alice_client.get(response["Location"]).content.decode()
    assert 'aria-pressed="true"' in page and "Thanks: rated good." in page


def test_a_rating_with_htmx_answers_the_row_s_actions(
    alice_client: Client, conversation: Any, reply: Any
) -> None:
    response = alice_client.post(
        rate_url(conversation, reply), {"rating": "down"}, **HTMX
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith(
        f'<div class="sg-actions" id="sg-actions-{reply.pk}"'
    )
    assert "sg-thumb--on" in html and "rated bad" in html
    # The turn's usage stays on the reply.
    assert "120 in · 30 out · $0.0025" in html


def test_pressing_the_pressed_thumb_takes_the_rating_back(
    alice: Any, bob_client: Client, alice_client: Client, conversation: Any, reply: Any
) -> None:
    html = alice_client.post(
        rate_url(conversation, reply), {"rating": "up", "comment": "Nice"}, **HTMX
    ).content.decode()
    # The pressed thumb now sends "clear".
    assert 'name="rating" value="clear" class="sg-thumb sg-thumb--on"' in html
    assert (
        bob_client.post(rate_url(conversation, reply), {"rating": "clear"}).status_code
        == 404
    )
    assert ReplyFeedback.objects.filter(user=alice).count() == 1

    response = alice_client.post(
        rate_url(conversation, reply), {"rating": "clear"}, **HTMX
    )

    html = response.content.decode()
    assert response.status_code == 200 and "sg-thumb--on" not in html
    assert "rated" not in html and 'value="up"' in html and 'value="down"' in html
    assert ReplyFeedback.objects.filter(user=alice).count() == 0
    # Again: nothing to take back, still fine.
    again = alice_client.post(rate_url(conversation, reply), {"rating": "clear"})
    assert again.status_code == 302


def test_the_page_shows_the_usage_of_the_turn_on_its_reply(
    alice_client: Client, conversation: Any, reply: Any
) -> None:
    page = alice_client.get(
        reverse("sagents_django:conversation", args=[conversation.pk])
    ).content.decode()
    assert "120 in · 30 out · $0.0025" in page
    assert "Fork from here" in page


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"rating": "sideways"}, "rating must be one of up, down"),
        ({}, "rating must be one of up, down"),
        ({"rating": "up", "comment": "x" * 2001}, "A comment has at most 2000"),
    ],
)
def test_bad_ratings_are_clear_errors_and_store_nothing(
    alice_client: Client, conversation: Any, reply: Any, data: dict, error: str
) -> None:
    response = alice_client.post(rate_url(conversation, reply), data, **HTMX)
    assert response.status_code == 422
    assert error in response.content.decode()
    plain = alice_client.post(rate_url(conversation, reply), data, follow=True)
    assert error in plain.content.decode()
    assert not ReplyFeedback.objects.exists()


def test_a_person_s_own_message_cannot_be_rated(
    alice: Any, alice_client: Client, conversation: Any, reply: Any
) -> None:
    mine = services.load_display_messages(Scope.for_user(alice), conversation.pk)[0]
    response = alice_client.post(rate_url(conversation, mine), {"rating": "up"}, **HTMX)
    assert response.status_code == 422
    assert "Only the agent's replies" in response.content.decode()


def test_another_tenant_s_reply_or_conversation_is_not_found(
    bob: Any, bob_client: Client, alice_client: Client, conversation: Any, reply: Any
) -> None:
    bobs = services.create_conversation(Scope.for_user(bob), title="Bob's")
    theirs = turn(Scope.for_user(bob), bobs, "Taxes?", "Later.")
    # Bob rating Alice's reply, through her conversation or his own.
    assert (
        bob_client.post(rate_url(conversation, reply), {"rating": "up"}).status_code
        == 404
    )
    assert bob_client.post(rate_url(bobs, reply), {"rating": "up"}).status_code == 404
    # Alice naming Bob's reply under her own conversation.
    assert (
        alice_client.post(rate_url(conversation, theirs), {"rating": "up"}).status_code
        == 404
    )
    assert bob_client.post(fork_url(conversation)).status_code == 404
    assert (
        alice_client.post(fork_url(conversation), {"at_message": theirs.pk}).status_code
        == 404
    )
    assert not ReplyFeedback.objects.exists()
    assert services.conversation_model().objects.count() == 2


def test_strangers_and_forged_posts_are_refused(
    alice: Any, client: Client, conversation: Any, reply: Any
) -> None:
    for url in (rate_url(conversation, reply), fork_url(conversation)):
        response = client.post(url, {"rating": "up"})
        assert (
            response.status_code == 302 and "/accounts/login/" in response["Location"]
        )
        forged = Client(enforce_csrf_checks=True)
        forged.force_login(alice)
        assert forged.post(url, {"rating": "up"}).status_code == 403
        assert (
            forged.post(
                url, {"rating": "up", "csrfmiddlewaretoken": "x" * 64}
            ).status_code
            == 403
        )
    assert Client().get(rate_url(conversation, reply)).status_code == 302
    signed_in = Client()
    signed_in.force_login(alice)
    assert signed_in.get(rate_url(conversation, reply)).status_code == 405
    assert signed_in.get(fork_url(conversation)).status_code == 405
    assert not ReplyFeedback.objects.exists()
    assert services.conversation_model().objects.count() == 1


def test_a_fork_from_the_page_opens_the_new_conversation(
    alice: Any, alice_client: Client, conversation: Any, reply: Any
) -> None:
    scope = Scope.for_user(alice)
    later = turn(scope, conversation, "And Lyon?", "Also mild.")

    response = alice_client.post(fork_url(conversation), {"at_message": reply.pk})

    assert response.status_code == 302
    new = services.list_conversations(scope)[0]
    assert new.title == "Fork of Alice's"
    assert response["Location"] == reverse("sagents_django:conversation", args=[new.pk])
    page = alice_client.get(response["Location"]).content.decode()
    assert "Mild weather." in page and "Also mild." not in page
    assert "Forked from “Alice&#x27;s”" in page
    # With htmx: a redirect htmx follows.
    htmx = alice_client.post(fork_url(conversation), {"at_message": later.pk}, **HTMX)
    assert htmx.status_code == 204 and htmx["HX-Redirect"].startswith("/")


@pytest.mark.parametrize("bad", ["abc", "-1", "1" * 30, "1.5", " 1"])
def test_a_fork_point_must_be_a_message_id(
    alice_client: Client, conversation: Any, reply: Any, bad: str
) -> None:
    response = alice_client.post(fork_url(conversation), {"at_message": bad}, **HTMX)
    assert response.status_code == 422
    assert services.conversation_model().objects.count() == 1


def test_my_usage_shows_only_the_signed_in_person_s_totals(
    alice_client: Client, bob: Any, conversation: Any, reply: Any
) -> None:
    bobs = services.create_conversation(Scope.for_user(bob), title="<b>Bob's</b>")
    turn(Scope.for_user(bob), bobs, "Taxes?", "Later.")
    turn(Scope.for_user(bob), bobs, "Taxes?", "Later.")

    page = alice_client.get(reverse("sagents_django:my_usage")).content.decode()

    assert "Alice&#x27;s" in page and "Bob" not in page
    assert "120 / 30" in page and "$0.0025" in page
    assert "My usage</a>" in page
    assert Client().get(reverse("sagents_django:my_usage")).status_code == 302


def test_a_turn_s_end_redraws_its_reply_with_the_usage(
    alice: Any, conversation: Any, reply: Any
) -> None:
    from sagents_django.ui import fragments

    html = fragments.for_event(
        Scope.for_user(alice),
        {
            "conversation": str(conversation.pk),
            "event": "run_finished",
            "seq": 1,
            "data": {"status": "completed"},
        },
    )
    assert f'id="sg-msg-{reply.pk}"' in html and 'hx-swap-oob="true"' in html
    assert "120 in · 30 out · $0.0025" in html
