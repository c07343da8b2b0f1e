"""Retention: idle conversations removed in bounded, resumable batches, per owner;
never one with an active run; a message arriving meanwhile is never lost."""

from __future__ import annotations

import io
import json
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.db import connection
from django.db.models.signals import pre_delete
from django.utils import timezone

from sagents_django import services
from sagents_django.exceptions import NotFound
from sagents_django.lifecycle import retention
from sagents_django.lifecycle.retention import RetentionReport, apply_retention
from sagents_django.models import (
    AgentRun,
    AgentState,
    ConversationBranch,
    DisplayMessage,
)
from sagents_django.runtime import agent_server
from sagents_django.scope import Scope
from sagents_django.tasks import apply_retention as retention_task
from tests.fakes.openai_server import reply
from tests.lifecycle import agents, plans
from tests.runtime import follow as follow_module
from tests.runtime.follow import make_scope, turns_ended

site = follow_module.site


def idle(scope: Scope, days: int, *, text: str = "old") -> Any:
    """A conversation with a message, last used ``days`` ago."""
    conversation = services.create_conversation(scope)
    services.append_text_message(scope, conversation.pk, "user", text)
    services.conversation_model().objects.filter(pk=conversation.pk).update(
        updated_at=timezone.now() - timedelta(days=days)
    )
    return conversation


def exists(conversation: Any) -> bool:
    return services.conversation_model().objects.filter(pk=conversation.pk).exists()


@pytest.fixture
def retained(lifecycle_settings: Any) -> Any:
    lifecycle_settings.SAGENTS = {**lifecycle_settings.SAGENTS, "RETENTION_DAYS": 30}
    plans.DAYS.clear()
    yield lifecycle_settings
    plans.DAYS.clear()


@pytest.mark.django_db
def test_conversations_idle_past_the_limit_go_and_the_others_stay(
    retained: Any,
) -> None:
    alice = make_scope("alice")
    old, recent = idle(alice, 40), idle(alice, 10)
    agents.seed_files(("agent", str(old.agent_id)), "old file")

    report = apply_retention()

    assert not exists(old) and exists(recent)
    assert report.conversations == 1 and report.batches == 1
    assert report.removed["sagents_django.DisplayMessage"] == 1
    assert report.removed["stored_files"] == 1
    assert agents.stored_paths(("agent", str(old.agent_id))) == []
    # Resumable: a second pass finds nothing more.
    assert apply_retention().conversations == 0


@pytest.mark.django_db
def test_a_conversation_with_an_active_run_is_never_removed(retained: Any) -> None:
    alice = make_scope("alice")
    busy = idle(alice, 400)
    services.begin_run(alice, busy.pk, trigger="message", queued=True)
    assert apply_retention().conversations == 0
    assert exists(busy)


@pytest.mark.django_db
def test_a_dry_run_counts_and_changes_nothing(retained: Any) -> None:
    alice = make_scope("alice")
    old = idle(alice, 40)
    out = io.StringIO()
    call_command("sagents_retention", "--dry-run", stdout=out)
    assert out.getvalue().startswith("Would remove 1 conversation(s) of 1 owner(s)")
    assert exists(old)
    out = io.StringIO()
    call_command("sagents_retention", "--json", stdout=out)
    assert json.loads(out.getvalue())["conversations"] == 1
    assert not exists(old)


@pytest.mark.django_db
def test_batches_are_bounded_and_every_idle_conversation_is_reached(
    retained: Any,
) -> None:
    retained.SAGENTS = {**retained.SAGENTS, "LIFECYCLE_BATCH": 2}
    alice = make_scope("alice")
    olds = [idle(alice, 31 + n) for n in range(5)]
    report = apply_retention()
    assert report.batches == 3 and report.conversations == 5
    assert not any(exists(c) for c in olds)


@pytest.mark.django_db
def test_each_owner_gets_the_limit_the_site_s_hook_answers(retained: Any) -> None:
    retained.SAGENTS = {
        **retained.SAGENTS,
        "RETENTION_FOR": "tests.lifecycle.plans.retention_for",
    }
    alice, bob, carol = make_scope("alice"), make_scope("bob"), make_scope("carol")
    plans.DAYS[alice.user.pk] = None  # kept for ever
    plans.DAYS[bob.user.pk] = 5
    alices, bobs, carols = idle(alice, 400), idle(bob, 6), idle(carol, 20)
    report = apply_retention()
    assert exists(alices) and not exists(bobs) and exists(carols)
    assert report.owners == 3 and report.conversations == 1


@pytest.mark.django_db
@pytest.mark.parametrize("answer", [0, -1, "30", 2.5])
def test_a_hook_answering_nonsense_is_a_clear_error(retained: Any, answer: Any) -> None:
    retained.SAGENTS = {
        **retained.SAGENTS,
        "RETENTION_FOR": "tests.lifecycle.plans.retention_for",
    }
    alice = make_scope("alice")
    plans.DAYS[alice.user.pk] = answer
    old = idle(alice, 400)
    with pytest.raises(ValueError, match="positive number of days or None"):
        apply_retention()
    assert exists(old)


@pytest.mark.django_db
def test_contents_mode_keeps_the_conversation_and_its_title(retained: Any) -> None:
    retained.SAGENTS = {**retained.SAGENTS, "RETENTION_DELETES": "contents"}
    alice = make_scope("alice")
    old = idle(alice, 40)
    services.update_conversation(alice, old.pk, title="Keep me")
    services.save_agent_state(alice, old.pk, {"version": 1, "state": {}})
    # A branch keeps an agent state of its own: emptied too.
    ConversationBranch.objects.create(
        conversation_id=old.pk,
        number=0,
        state_data={"version": 1, "state": {"messages": []}},
        activated_at=timezone.now(),
    )
    services.conversation_model().objects.filter(pk=old.pk).update(
        updated_at=timezone.now() - timedelta(days=40)
    )

    report = apply_retention()

    assert report.conversations == 1
    assert services.get_conversation(alice, old.pk).title == "Keep me"
    assert not DisplayMessage.objects.filter(conversation=old.pk).exists()
    assert not AgentState.objects.filter(conversation=old.pk).exists()
    assert not ConversationBranch.objects.filter(conversation=old.pk).exists()
    # Emptied ones are not chosen again.
    assert apply_retention().conversations == 0


@pytest.mark.django_db
def test_the_beat_task_runs_one_pass(retained: Any) -> None:
    alice = make_scope("alice")
    old = idle(alice, 40)
    assert retention_task()["conversations"] == 1
    assert not exists(old)


# Racing a new message -----------------------------------------------------------
@pytest.mark.django_db(transaction=True)
async def test_a_message_arriving_after_the_batch_was_chosen_is_kept(
    site: Any, retained: Any
) -> None:
    site.script(reply("Welcome back."))
    alice = await sync_to_async(make_scope)("alice")
    old = await sync_to_async(idle)(alice, 40)
    cutoff = timezone.now() - timedelta(days=30)
    [batch] = await sync_to_async(
        lambda: list(retention._batches(alice.user.pk, cutoff))
    )()
    assert batch == [old.pk]

    # The message comes between the choice and the removal.
    submission = await agent_server.aadd_message(alice, old.pk, "Still here?")
    report = RetentionReport()
    await sync_to_async(retention._remove_batch)(batch, cutoff, report)

    assert report.conversations == 0 and report.kept == 1
    await turns_ended()
    assert await sync_to_async(exists)(old)
    texts = [
        r.content.get("text")
        async for r in DisplayMessage.objects.filter(conversation=old.pk)
    ]
    assert "Still here?" in texts and "Welcome back." in texts
    assert await AgentRun.objects.filter(pk=submission.run_id).aexists()


@pytest.mark.django_db(transaction=True)
async def test_a_message_arriving_after_the_removal_is_refused_not_lost(
    site: Any, retained: Any
) -> None:
    alice = await sync_to_async(make_scope)("alice")
    old = await sync_to_async(idle)(alice, 40)
    await sync_to_async(apply_retention)()
    with pytest.raises(NotFound):
        await agent_server.aadd_message(alice, old.pk, "Still here?")
    assert not await DisplayMessage.objects.filter(conversation=old.pk).aexists()


@pytest.mark.django_db(transaction=True)
def test_a_message_waiting_on_the_removal_s_row_lock_is_refused_not_lost(
    retained: Any,
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("row locks that make a writer wait: the PostgreSQL pass")
    alice = make_scope("alice")
    old = idle(alice, 40)
    outcome: dict[str, Any] = {}

    def send() -> None:
        try:
            agent_server.add_message(alice, old.pk, "late")
        except Exception as exc:
            outcome["error"] = exc
        finally:
            connection.close()

    sender = threading.Thread(target=send)

    def during_removal(**_kwargs: Any) -> None:
        # Inside retention's transaction, its row locks held: the message comes.
        if not sender.is_alive() and "error" not in outcome:
            sender.start()
            time.sleep(0.3)  # let it reach the lock (earlier or later: same end)

    model = services.conversation_model()
    pre_delete.connect(during_removal, sender=model, weak=False)
    try:
        report = apply_retention()
    finally:
        pre_delete.disconnect(during_removal, sender=model)
    sender.join(30)

    assert report.conversations == 1
    assert isinstance(outcome.get("error"), NotFound)
    assert not DisplayMessage.objects.filter(conversation=old.pk).exists()
