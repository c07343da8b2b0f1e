"""Feedback on replies: the service (hostile input, scopes), the signal, the admin
(filters, the CSV export), and usage per user turn."""

from __future__ import annotations

import csv
import io
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.admin.sites import AdminSite
from django.test import Client
from django.urls import reverse

from sagents_django import services
from sagents_django.admin.feedback import ReplyFeedbackAdmin, csv_cell
from sagents_django.exceptions import InvalidInput, NotFound
from sagents_django.models import AgentRun, ReplyFeedback
from sagents_django.scope import Scope
from sagents_django.signals import feedback_given

pytestmark = pytest.mark.django_db


def a_turn(
    scope: Scope,
    conversation: Any,
    question: str,
    answer: str,
    *,
    model: str = "openai/gpt-4o-mini",
    trigger: str = "message",
    tokens: tuple[int, int] = (10, 5),
    cost: Decimal | None = Decimal("0.001"),
) -> Any:
    """A finished run of ``trigger`` that answered ``question``; its reply row."""
    run = services.begin_run(scope, conversation.pk, trigger=trigger)
    if question:
        services.append_text_message(scope, conversation.pk, "user", question)
    row = services.append_text_message(
        scope, conversation.pk, "assistant", answer, run_id=run.pk
    )
    from sagents_django.core import TokenUsage

    services.finish_run(
        scope,
        run.pk,
        status="completed",
        usage=TokenUsage(input=tokens[0], output=tokens[1]),
        cost=cost,
        model=model,
    )
    return row


@pytest.fixture
def answer(scope: Scope, conversation: Any) -> Any:
    return a_turn(scope, conversation, "Paris in May?", "Yes, mild weather.")


@pytest.fixture
def received(answer: Any) -> Any:
    calls: list[dict[str, Any]] = []

    def receiver(sender: Any, **kwargs: Any) -> None:
        calls.append(kwargs)

    feedback_given.connect(receiver)
    yield calls
    feedback_given.disconnect(receiver)


def test_a_rating_is_stored_per_user_and_reply_with_the_reply_s_model(
    scope: Scope, answer: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        first = services.rate_reply(scope, answer.pk, rating="up", comment=" Good ")
        second = services.rate_reply(scope, answer.pk, rating="down", comment="Wrong")

    assert first.pk == second.pk
    row = ReplyFeedback.objects.get()
    assert (row.rating, row.comment, row.model) == (
        "down",
        "Wrong",
        "openai/gpt-4o-mini",
    )
    assert row.conversation_id == answer.conversation_id and row.user == scope.user
    assert services.feedback_for(scope, answer.conversation_id) == {answer.pk: row}


def test_each_rating_sends_the_signal_after_commit(
    scope: Scope,
    answer: Any,
    received: list[dict[str, Any]],
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        services.rate_reply(scope, answer.pk, rating="up")
    assert received == []  # not before the commit
    for callback in callbacks:
        callback()
    with django_capture_on_commit_callbacks(execute=True):
        services.rate_reply(scope, answer.pk, rating="down", comment="no")

    assert [(c["created"], c["feedback"].rating) for c in received] == [
        (True, "up"),
        (False, "down"),
    ]
    assert received[1]["feedback"].comment == "no"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rating": "meh"}, "rating must be one of up, down"),
        ({"rating": None}, "rating must be one of"),
        ({"rating": ["up"]}, "rating must be one of"),
        ({"rating": "up", "comment": "x" * 2001}, "the limit is 2000"),
        ({"rating": "up", "comment": 5}, "comment must be a string"),
    ],
)
def test_bad_ratings_and_comments_are_refused_and_store_nothing(
    scope: Scope, answer: Any, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        services.rate_reply(scope, answer.pk, **kwargs)
    assert not ReplyFeedback.objects.exists()


@pytest.mark.parametrize("bad_id", ["1", 1.0, True, None, -1, 0, 2**64])
def test_a_message_id_must_be_a_positive_integer(
    scope: Scope, answer: Any, bad_id: Any
) -> None:
    with pytest.raises(InvalidInput, match="message_id"):
        services.rate_reply(scope, bad_id, rating="up")


def test_only_the_agent_s_replies_can_be_rated(scope: Scope, conversation: Any) -> None:
    mine = services.append_text_message(scope, conversation.pk, "user", "hi")
    with pytest.raises(InvalidInput, match="Only the agent's replies"):
        services.rate_reply(scope, mine.pk, rating="up")


def test_another_tenant_s_reply_is_not_found(
    answer: Any, other_scope: Scope, anonymous_scope: Scope
) -> None:
    for stranger in (other_scope, anonymous_scope):
        with pytest.raises(NotFound, match="not found"):
            services.rate_reply(stranger, answer.pk, rating="up")
        with pytest.raises(NotFound):
            services.feedback_for(stranger, answer.conversation_id)
    with pytest.raises(NotFound):
        services.rate_reply(other_scope, 10**12, rating="up")
    assert not ReplyFeedback.objects.exists()


def test_a_rating_is_private_to_its_author(
    scope: Scope, answer: Any, conversation: Any
) -> None:
    services.rate_reply(scope, answer.pk, rating="up")
    assert services.feedback_for(scope, conversation.pk)


# Usage per user turn -----------------------------------------------------------
def test_a_user_turn_sums_the_runs_that_carried_its_answer_on(
    scope: Scope, conversation: Any, other_scope: Scope
) -> None:
    a_turn(scope, conversation, "one", "First.", tokens=(10, 1))
    paused = a_turn(scope, conversation, "two", "Let me check.", tokens=(20, 2))
    resumed = a_turn(
        scope, conversation, "", "Checked.", trigger="resume", tokens=(30, 3), cost=None
    )
    services.begin_run(scope, conversation.pk, trigger="reset")  # no model: left out
    AgentRun.objects.filter(trigger="reset").update(status="completed")
    a_turn(scope, conversation, "three", "Third.", trigger="queued", tokens=(1, 1))

    turns = services.usage_by_turn(scope, conversation.pk)

    assert [t.usage.runs for t in turns] == [1, 2, 1]
    second = turns[1]
    assert (second.usage.input_tokens, second.usage.output_tokens) == (50, 5)
    assert second.usage.cost == Decimal("0.001") and second.usage.unpriced_runs == 1
    # Shown on the turn's last reply, not on the reply before the approval.
    assert second.reply_id == resumed.pk != paused.pk
    assert not any(t.active for t in turns)
    assert second.to_dict()["input_tokens"] == 50
    with pytest.raises(NotFound):
        services.usage_by_turn(other_scope, conversation.pk)


# The admin -------------------------------------------------------------------------
@pytest.fixture
def rated(
    scope: Scope, conversation: Any, other_scope: Scope, other_conversation: Any
) -> Any:
    mine = a_turn(scope, conversation, "q", '=HYPERLINK("http://x")')
    theirs = a_turn(
        other_scope, other_conversation, "q", "Taxes.", model="anthropic/claude"
    )
    services.rate_reply(
        scope, mine.pk, rating="up", comment="<script>alert(1)</script>"
    )
    services.rate_reply(other_scope, theirs.pk, rating="down", comment="-2+3")
    return mine, theirs


def changelist(client: Client, **query: Any) -> str:
    url = reverse("admin:sagents_django_replyfeedback_changelist")
    response = client.get(url, query)
    assert response.status_code == 200
    return response.content.decode()


def test_the_admin_lists_feedback_escaped_and_filters_it(
    admin_client: Client, rated: Any, conversation: Any
) -> None:
    page = changelist(admin_client)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert(1)" not in page
    assert "Bob&#x27;s taxes" in page or "Bob's taxes" in page

    by_model = changelist(admin_client, model="anthropic/claude")
    assert "-2+3" in by_model and "alert(1)" not in by_model
    by_conversation = changelist(admin_client, conversation__id__exact=conversation.pk)
    assert "alert(1)" in by_conversation and "-2+3" not in by_conversation
    by_rating = changelist(admin_client, rating="down")
    assert "-2+3" in by_rating and "alert(1)" not in by_rating
    today = changelist(admin_client, **{"created_at__gte": "2000-01-01 00:00:00+00:00"})
    assert "-2+3" in today
    none = changelist(admin_client, **{"created_at__lt": "2000-01-01 00:00:00+00:00"})
    assert "-2+3" not in none


def test_the_admin_exports_the_selection_as_csv_safe_for_spreadsheets(
    admin_client: Client, rated: Any
) -> None:
    url = reverse("admin:sagents_django_replyfeedback_changelist")
    ids = list(ReplyFeedback.objects.values_list("pk", flat=True))
    response = admin_client.post(url, {"action": "export_csv", "_selected_action": ids})

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    lines = list(csv.reader(io.StringIO(response.content.decode())))
    header, *rows = lines
    assert header[:3] == ["id", "created_at", "updated_at"]
    by_rating = {row[header.index("rating")]: row for row in rows}
    up, down = by_rating["up"], by_rating["down"]
    assert up[header.index("user")] == "alice"
    assert up[header.index("comment")] == "<script>alert(1)</script>"
    assert up[header.index("reply")] == '\'=HYPERLINK("http://x")'
    assert down[header.index("comment")] == "'-2+3"
    assert down[header.index("model")] == "anthropic/claude"
    assert down[header.index("conversation_title")] == "Bob's taxes"


def test_nobody_edits_feedback_in_the_admin(admin_client: Client, rated: Any) -> None:
    admin = ReplyFeedbackAdmin(ReplyFeedback, AdminSite())

    class Request:
        user = type("U", (), {"is_superuser": False})()

    assert not admin.has_add_permission(Request())  # type: ignore[arg-type]
    assert not admin.has_change_permission(Request())  # type: ignore[arg-type]
    row = ReplyFeedback.objects.first()
    assert row is not None
    url = reverse("admin:sagents_django_replyfeedback_change", args=[row.pk])
    response = admin_client.post(url, {"rating": "down", "comment": "changed"})
    assert response.status_code == 403
    row.refresh_from_db()
    assert row.comment != "changed"


@pytest.mark.parametrize(
    ("value", "cell"),
    [("=1+1", "'=1+1"), ("@x", "'@x"), ("plain", "plain"), (None, ""), (3, "3")],
)
def test_csv_cells_never_start_a_formula(value: Any, cell: str) -> None:
    assert csv_cell(value) == cell
