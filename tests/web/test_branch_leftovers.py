"""What a person sees of branches besides the transcript: search finds the rows of
the branch shown only, the status says how the branch shown's latest run ended,
the usage panels tell a regenerated reply (a model call) from a turn of theirs,
and Regenerate is offered once per turn, on its last reply."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from sagents_django import services
from sagents_django.core import Message, TokenUsage
from sagents_django.core.serialization import (
    deserialize_server_state,
    serialize_server_state,
)
from sagents_django.models import AgentRun
from sagents_django.runtime import agent_server
from sagents_django.scope import Scope
from sagents_django.ui import fragments
from sagents_django.ui.context import Chat
from tests.web.test_actions import turn

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def regenerated(
    scope: Scope, conversation: Any, reply: Any, text: str, *, status: str = "completed"
) -> Any:
    """``reply`` made again: the new branch's run writes ``text`` and ends with
    ``status``. The new reply's row."""
    submission = agent_server.regenerate(scope, conversation.pk, reply.pk)
    row = services.append_text_message(
        scope, conversation.pk, "assistant", text, run_id=submission.run_id
    )
    services.finish_run(
        scope,
        submission.run_id,
        status=status,
        usage=TokenUsage(input=200, output=40),
        cost=Decimal("0.004"),
    )
    data = services.load_agent_state(scope, conversation.pk)
    state = deserialize_server_state(None, data).add_message(Message.assistant(text))
    services.save_agent_state(scope, conversation.pk, serialize_server_state(state))
    return row


@pytest.fixture
def scope(alice: Any) -> Scope:
    return Scope.for_user(alice)


@pytest.fixture
def replies(scope: Scope, conversation: Any) -> tuple[Any, Any]:
    """Two finished turns: their replies."""
    first = turn(scope, conversation, "Paris in May?", "Mild weather.")
    second = turn(scope, conversation, "And Lyon?", "Lyon too, by the river.")
    return first, second


def found(scope: Scope, query: str) -> list[tuple[Any, str | None]]:
    return [
        (r.conversation.pk, None if r.message is None else r.message.content["text"])
        for r in services.search_messages(scope, query)
    ]


def test_search_finds_the_rows_of_the_branch_shown_only(
    scope: Scope,
    alice_client: Client,
    conversation: Any,
    replies: tuple[Any, Any],
) -> None:
    # Another conversation, never branched, says the same: it is always found.
    other = services.create_conversation(scope, title="Elsewhere")
    turn(scope, other, "Rivers?", "Lyon too, by the river.")
    _, lyon = replies
    new = regenerated(scope, conversation, lyon, "Lyon is lovely in June.")

    # The old reply is in the branch a regenerate left: not found there.
    assert found(scope, "by the river") == [(other.pk, "Lyon too, by the river.")]
    assert found(scope, "lovely") == [(conversation.pk, "Lyon is lovely in June.")]
    # Rows both branches share are found.
    assert found(scope, "Mild") == [(conversation.pk, "Mild weather.")]
    page = alice_client.get(reverse("sagents_django:home"), {"q": "by the river"})
    assert "Elsewhere" in page.content.decode()
    assert "Alice&#x27;s" not in page.content.decode()

    # Switched back: the old reply is shown, and found; the new one is not.
    agent_server.switch_branch(scope, conversation.pk, new.pk, 1)
    assert sorted(found(scope, "by the river"), key=str) == sorted(
        [
            (conversation.pk, "Lyon too, by the river."),
            (other.pk, "Lyon too, by the river."),
        ],
        key=str,
    )
    assert found(scope, "lovely") == []


def test_the_status_is_the_branch_shown_s_latest_run(
    scope: Scope,
    alice_client: Client,
    conversation: Any,
    replies: tuple[Any, Any],
) -> None:
    _, lyon = replies
    new = regenerated(scope, conversation, lyon, "Lyon is", status="error")
    page = reverse("sagents_django:conversation", args=[conversation.pk])
    assert agent_server.get_status(scope, conversation.pk) == "error"
    assert "The last turn failed" in alice_client.get(page).content.decode()

    # Back to the branch whose last run completed: it is ready, whatever
    # happened later in the other branch.
    live = fragments.Live()
    message = {"conversation": str(conversation.pk), "data": {"status": "error"}}
    fragments.for_event(scope, {**message, "event": "status_changed"}, live)
    agent_server.switch_branch(scope, conversation.pk, new.pk, 1)
    assert agent_server.get_status(scope, conversation.pk) == "idle"
    html = alice_client.get(page).content.decode()
    assert "The last turn failed" not in html and "sg-status--idle" in html
    # A page following by socket hears the switch and reads the status again.
    html = fragments.for_event(
        scope,
        {**message, "event": "branch_switched", "data": {"reason": "switch"}},
        live,
    )
    assert "sg-status--idle" in html
    fragments.for_event(scope, {**message, "event": "todos_updated"}, live)
    assert live.status == "idle"  # not the "error" it was told before the switch

    # And to the failed branch again: its failure is its own.
    agent_server.switch_branch(scope, conversation.pk, lyon.pk, 2)
    assert agent_server.get_status(scope, conversation.pk) == "error"


def test_the_usage_panels_tell_a_regenerated_reply_from_a_turn(
    scope: Scope,
    alice_client: Client,
    conversation: Any,
    replies: tuple[Any, Any],
) -> None:
    _, lyon = replies
    regenerated(scope, conversation, lyon, "Lyon is lovely in June.")
    question = services.load_display_messages(scope, conversation.pk)[2]
    submission = agent_server.edit_and_resend(
        scope, conversation.pk, question.pk, "And Rome?"
    )
    assert AgentRun.objects.get(pk=submission.run_id).trigger == "edit"
    services.finish_run(scope, submission.run_id, status="completed")

    chat = Chat(scope, conversation)
    assert [row.label for row in chat.turns] == [
        "1",
        "2",
        "Regenerated reply",
        "3 (edited)",
    ]
    html = alice_client.get(
        reverse("sagents_django:conversation", args=[conversation.pk])
    ).content.decode()
    assert "<td>Regenerated reply</td>" in html and "Every branch counts" in html

    totals = services.usage_totals(scope, conversation_id=conversation.pk)
    assert (totals.runs, totals.turns, totals.regenerations) == (4, 3, 1)
    assert totals.to_dict()["regenerations"] == 1
    # A verb that calls no model is neither a turn nor a regeneration.
    services.finish_run(
        scope,
        services.begin_run(scope, conversation.pk, trigger="reset").pk,
        status="completed",
    )
    totals = services.usage_totals(scope)
    assert (totals.runs, totals.turns, totals.regenerations) == (5, 3, 1)
    mine = alice_client.get(reverse("sagents_django:my_usage")).content.decode()
    assert (
        '<th scope="col">Your turns</th><th scope="col">Regen&shy;erated</th>' in mine
    )
    assert "<td>3</td><td>1</td>" in mine and '<th scope="col">Runs</th>' not in mine


def tool_turn(scope: Scope, conversation: Any) -> list[Any]:
    """A finished turn whose agent spoke, called a tool, then answered; and a
    second plain turn. Its rows."""
    run = services.begin_run(scope, conversation.pk, trigger="message")
    rows = [
        services.append_text_message(
            scope, conversation.pk, "user", "Plan a picnic", run_id=run.pk
        ),
        services.append_text_message(
            scope, conversation.pk, "assistant", "Let me note it.", run_id=run.pk
        ),
        services.append_display_message(
            scope,
            conversation.pk,
            message_type="assistant",
            content_type="tool_call",
            content={"call_id": "c1", "name": "write_todos", "arguments": {}},
            run_id=run.pk,
        ),
        services.append_display_message(
            scope,
            conversation.pk,
            message_type="tool",
            content_type="tool_result",
            content={"tool_call_id": "c1", "name": "write_todos", "content": "ok"},
            run_id=run.pk,
        ),
        services.append_text_message(
            scope, conversation.pk, "assistant", "Noted: bread.", run_id=run.pk
        ),
    ]
    services.finish_run(scope, run.pk, status="completed")
    second = turn(scope, conversation, "Thanks", "Welcome.")
    return [
        *rows,
        *services.load_display_messages(scope, conversation.pk)[-2:-1],
        second,
    ]


def regenerate_url(conversation: Any, row: Any) -> str:
    return reverse("sagents_django:regenerate", args=[conversation.pk, row.pk])


def test_regenerate_is_offered_once_per_turn_on_its_last_reply(
    scope: Scope, alice_client: Client, conversation: Any
) -> None:
    _, spoke, call, _result, answered, thanks, welcome = tool_turn(scope, conversation)
    html = alice_client.get(
        reverse("sagents_django:conversation", args=[conversation.pk])
    ).content.decode()
    assert html.count('class="sg-form sg-regenerate"') == 2
    assert regenerate_url(conversation, answered) in html
    assert regenerate_url(conversation, welcome) in html
    assert regenerate_url(conversation, spoke) not in html

    # A rating redraws a reply's actions alone: the same rule.
    rate = "sagents_django:rate"
    for reply, offered in ((spoke, False), (answered, True), (welcome, True)):
        actions = alice_client.post(
            reverse(rate, args=[conversation.pk, reply.pk]), {"rating": "up"}, **HTMX
        ).content.decode()
        assert (regenerate_url(conversation, reply) in actions) is offered

    # Pages of history cut inside a turn know where it ends.
    def page(before: Any, size: int) -> dict[int, bool]:
        chat = Chat(scope, conversation, before=before.pk, page_size=size)
        return {e.pk: e.turn_end for e in chat.entries if e.kind == "text"}

    assert page(thanks, 2) == {answered.pk: True}
    assert page(answered, 3) == {spoke.pk: False}
    assert page(call, 1) == {spoke.pk: False}
    assert page(thanks, 5)[spoke.pk] is False

    # The turn's end redraws the replies with the rule, not only the last.
    html = fragments.for_event(
        scope,
        {
            "conversation": str(conversation.pk),
            "event": "run_finished",
            "data": {"status": "completed"},
        },
    )
    assert f'id="sg-msg-{spoke.pk}"' in html
    assert regenerate_url(conversation, spoke) not in html
    assert regenerate_url(conversation, welcome) in html


def test_a_running_turn_offers_no_regenerate_until_it_ends(
    scope: Scope, alice_client: Client, conversation: Any
) -> None:
    *_, welcome = tool_turn(scope, conversation)
    run = services.begin_run(scope, conversation.pk, trigger="message")
    services.append_text_message(scope, conversation.pk, "user", "More?", run_id=run.pk)
    more = services.append_text_message(
        scope, conversation.pk, "assistant", "Working on it.", run_id=run.pk
    )
    page = reverse("sagents_django:conversation", args=[conversation.pk])
    html = alice_client.get(page).content.decode()
    assert regenerate_url(conversation, welcome) in html
    assert regenerate_url(conversation, more) not in html
    services.finish_run(scope, run.pk, status="completed")
    assert regenerate_url(conversation, more) in alice_client.get(page).content.decode()
