"""Runs started by the site: a trigger on ``Shop`` saves (``tests.shop``) and a
schedule, on both stacks. The trigger is armed only inside these tests (other
modules save shops too)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.admin.sites import AdminSite
from django.db import transaction
from django.db.models.signals import post_save
from django.test import RequestFactory

from sagents_django import services
from sagents_django.admin.triggers import TriggerEventAdmin
from sagents_django.models import AgentRun, DisplayMessage
from sagents_django.runtime import sweeper
from sagents_django.scope import Scope
from sagents_django.triggers import (
    Start,
    beat_schedule,
    drain,
    on_signal,
    run_schedule,
    schedule,
)
from sagents_django.triggers.models import TriggerEvent
from sagents_django.triggers.schedules import slot_of
from tests.fakes.openai_server import reply
from tests.runtime import follow as follow_module
from tests.runtime.follow import make_scope, turns_ended
from tests.shop.models import Shop

pytestmark = pytest.mark.django_db(transaction=True)

site = follow_module.site

ARMED: dict[str, Any] = {}
"""What the shop trigger does in the running test (empty: nothing)."""


@on_signal(
    post_save,
    sender=Shop,
    when=lambda shop, **kwargs: bool(ARMED),
    name="tests.shop-opened",
    rate=3,
)
def shop_opened(shop: Shop, created: bool, **kwargs: Any) -> Start | None:
    how = ARMED["how"]
    if how == "raise":
        raise RuntimeError("the site's trigger has a bug")
    if how == "not a start":
        return "Check the shop"  # type: ignore[return-value]
    scope = ARMED.get("scope") or Scope.for_user(shop.owner)
    return Start(
        scope=scope,
        message=f"Look at the shop {shop.name}.",
        title=f"Shop {shop.name}",
        conversation=ARMED.get("conversation"),
    )


@schedule(every=timedelta(hours=1), name="tests.hourly")
def hourly(slot: datetime) -> Start | None:
    if not ARMED:
        return None
    return Start(
        scope=ARMED["scope"], message=f"The hour from {slot:%H:%M}.", title="Hourly"
    )


@pytest.fixture
def armed() -> Any:
    ARMED.update(how="start")
    yield ARMED
    ARMED.clear()


def open_shop(name: str, owner: Any) -> Shop:
    return Shop.objects.create(name=name, owner=owner)


def events() -> list[TriggerEvent]:
    return list(TriggerEvent.objects.order_by("id"))


async def test_a_saved_model_starts_a_turn_after_commit_in_a_new_conversation(
    site: Any, armed: Any
) -> None:
    site.script(reply("The shop looks fine."))
    scope = await sync_to_async(make_scope)("alice")

    def save() -> Shop:
        with transaction.atomic():
            shop = open_shop("Corner", scope.user)
            # Inside the save's transaction: recorded, not started.
            [event] = events()
            assert event.status == TriggerEvent.PENDING and not event.run_id
        return shop

    shop = await sync_to_async(save)()
    await turns_ended()

    [event] = await sync_to_async(events)()
    assert event.status == TriggerEvent.STARTED, event.error
    assert event.object == f"shop.shop:{shop.pk}"
    assert event.label == f"Shop #{shop.pk} created"
    run = await AgentRun.objects.aget(pk=event.run_id)
    assert run.status == "completed"
    conversation = await sync_to_async(services.get_conversation)(
        scope, event.conversation_id
    )
    assert conversation is not None and conversation.title == "Shop Corner"
    rows = await sync_to_async(list)(
        DisplayMessage.objects.filter(conversation=conversation.pk).order_by("pk")
    )
    assert [(r.message_type, r.content.get("text")) for r in rows] == [
        ("user", "Look at the shop Corner."),
        ("assistant", "The shop looks fine."),
    ]
    assert rows[0].metadata["started_by"] == {
        "trigger": "tests.shop-opened",
        "label": f"Shop #{shop.pk} created",
    }


async def test_the_chat_page_says_what_started_the_conversation(
    site: Any, armed: Any
) -> None:
    site.script(reply("Done."))
    scope = await sync_to_async(make_scope)("alice")
    shop = await sync_to_async(open_shop)("<b>Bold</b>", scope.user)
    await turns_ended()
    [event] = await sync_to_async(events)()

    conversation = await sync_to_async(services.get_conversation)(
        scope, event.conversation_id
    )
    page = await sync_to_async(follow_module.client_page)(scope, conversation)

    assert f"Started by: Shop #{shop.pk} created" in page
    assert "<b>Bold</b>" not in page  # the title and message are escaped


async def test_a_rolled_back_save_starts_nothing(site: Any, armed: Any) -> None:
    scope = await sync_to_async(make_scope)("alice")

    def save_and_fail() -> None:
        with pytest.raises(ZeroDivisionError), transaction.atomic():
            open_shop("Gone", scope.user)
            1 / 0  # noqa: B018

    await sync_to_async(save_and_fail)()
    await turns_ended()

    assert await sync_to_async(events)() == []
    assert not await AgentRun.objects.aexists()


async def test_a_save_of_the_same_values_starts_nothing_again(
    site: Any, armed: Any
) -> None:
    site.script(reply("One."), reply("Two."))
    scope = await sync_to_async(make_scope)("alice")

    def saves() -> None:
        shop = open_shop("Corner", scope.user)
        shop.save()  # a retried save: the same values
        shop.save()
        shop.name = "Corner 2"
        shop.save()  # a change: a run of its own

    await sync_to_async(saves)()
    await turns_ended()

    found = await sync_to_async(events)()
    assert [e.status for e in found] == [TriggerEvent.STARTED] * 3
    assert [e.label.rsplit(" ", 1)[-1] for e in found] == ["created", "saved", "saved"]
    # The first save() is another change than the create (created=False); the
    # second repeats the first and was skipped.
    assert await AgentRun.objects.acount() == 3


async def test_a_storm_is_held_to_the_triggers_rate_and_drained_later(
    site: Any, armed: Any
) -> None:
    site.script(*[reply(f"Reply {i}.") for i in range(6)])
    scope = await sync_to_async(make_scope)("alice")

    await sync_to_async(lambda: [open_shop(f"S{i}", scope.user) for i in range(6)])()
    await turns_ended()
    found = await sync_to_async(events)()
    assert [e.status for e in found] == ["started"] * 3 + ["pending"] * 3
    assert await sync_to_async(drain)() == 0  # the same minute: still full

    # A minute later (the rate counts the last minute's starts).
    minute_ago = datetime.now(UTC) - timedelta(seconds=61)
    await TriggerEvent.objects.filter(status="started").aupdate(started_at=minute_ago)
    await sweeper.sweep_once()  # every sweeper drains the queue
    await turns_ended()

    found = await sync_to_async(events)()
    assert [e.status for e in found] == ["started"] * 6
    assert await AgentRun.objects.acount() == 6


async def test_a_trigger_that_raises_is_a_failed_row_and_the_save_stands(
    site: Any, armed: Any
) -> None:
    armed["how"] = "raise"
    scope = await sync_to_async(make_scope)("alice")

    shop = await sync_to_async(open_shop)("Corner", scope.user)

    assert await Shop.objects.filter(pk=shop.pk).aexists()
    [event] = await sync_to_async(events)()
    assert event.status == TriggerEvent.FAILED
    assert event.error == "RuntimeError: the site's trigger has a bug"
    assert not await AgentRun.objects.aexists()


async def test_a_trigger_returning_something_else_says_what_it_must_return(
    site: Any, armed: Any
) -> None:
    armed["how"] = "not a start"
    scope = await sync_to_async(make_scope)("alice")

    await sync_to_async(open_shop)("Corner", scope.user)

    [event] = await sync_to_async(events)()
    assert event.status == TriggerEvent.FAILED
    assert "returns a sagents_django.triggers.Start or None, not str" in event.error


async def test_another_tenants_conversation_fails_as_not_found_and_is_untouched(
    site: Any, armed: Any
) -> None:
    alice = await sync_to_async(make_scope)("alice")
    bob = await sync_to_async(make_scope)("bob")
    bobs = await sync_to_async(services.create_conversation)(bob)
    armed.update(scope=alice, conversation=bobs.pk)

    await sync_to_async(open_shop)("Corner", alice.user)
    await turns_ended()

    [event] = await sync_to_async(events)()
    assert event.status == TriggerEvent.FAILED
    assert event.error.startswith("NotFound"), event.error
    assert not await DisplayMessage.objects.filter(conversation=bobs.pk).aexists()


async def test_an_owner_that_owns_nothing_fails_and_can_be_started_again(
    site: Any, armed: Any
) -> None:
    site.script(reply("Now it runs."))
    alice = await sync_to_async(make_scope)("alice")
    armed.update(scope=Scope.for_user(None))

    await sync_to_async(open_shop)("Corner", alice.user)
    [event] = await sync_to_async(events)()
    assert event.status == TriggerEvent.FAILED
    assert "cannot create conversations" in event.error
    assert not await AgentRun.objects.aexists()

    # The operator fixes the owner and starts it again from the admin.
    await TriggerEvent.objects.filter(pk=event.pk).aupdate(scope=alice.to_dict())
    admin = TriggerEventAdmin(TriggerEvent, AdminSite())
    request = RequestFactory().post("/")
    request.user = await sync_to_async(make_superuser)()
    request._messages = Messages()  # type: ignore[attr-defined]
    await sync_to_async(admin.start_again)(request, TriggerEvent.objects.all())
    await turns_ended()

    event = await TriggerEvent.objects.aget(pk=event.pk)
    assert event.status == TriggerEvent.STARTED and event.attempts == 2
    assert "1 of 1 started" in request._messages.said[0]  # type: ignore[attr-defined]


async def test_fixtures_loaded_with_raw_saves_start_nothing(
    site: Any, armed: Any
) -> None:
    scope = await sync_to_async(make_scope)("alice")

    def raw_save() -> None:
        shop = Shop(name="Loaded", owner=scope.user)
        shop.save_base(raw=True)

    await sync_to_async(raw_save)()

    assert await sync_to_async(events)() == []


async def test_a_schedule_starts_once_per_slot_however_often_beat_sends_it(
    site: Any, armed: Any
) -> None:
    site.script(reply("First hour."), reply("Second hour."))
    armed["scope"] = await sync_to_async(make_scope)("ops")
    ten = datetime(2026, 11, 27, 10, 5, tzinfo=UTC)

    first = await sync_to_async(run_schedule)("tests.hourly", ten)
    again = await sync_to_async(run_schedule)(
        "tests.hourly", ten + timedelta(minutes=50)
    )
    later = await sync_to_async(run_schedule)("tests.hourly", ten + timedelta(hours=1))
    await turns_ended()

    assert first is not None and later is not None and again is None
    found = await sync_to_async(events)()
    assert [(e.object, e.status) for e in found] == [
        ("schedule:tests.hourly", "started"),
        ("schedule:tests.hourly", "started"),
    ]
    assert found[0].label == "Schedule tests.hourly at 2026-11-27 10:00 UTC"
    assert await sync_to_async(run_schedule)("no.such.schedule") is None


def test_beat_schedule_names_each_schedule_for_celery_beat() -> None:
    entries = beat_schedule()
    assert entries["sagents:tests.hourly"] == {
        "task": "sagents_django.tasks.run_schedule",
        "schedule": timedelta(hours=1),
        "args": ("tests.hourly",),
    }
    from sagents_django.tasks import run_schedule as task

    assert task.name == "sagents_django.tasks.run_schedule"


def test_slots_are_multiples_of_the_interval_or_minutes_for_a_crontab() -> None:
    now = datetime(2026, 11, 27, 10, 47, 31, tzinfo=UTC)
    assert slot_of(timedelta(minutes=15), now) == now.replace(minute=45, second=0)
    assert slot_of("a crontab", now) == now.replace(second=0)


def test_a_bad_rate_or_a_schedule_faster_than_a_minute_is_refused() -> None:
    with pytest.raises(ValueError, match="rate is runs a minute"):
        on_signal(post_save, sender=Shop, name="tests.bad", rate=0)(shop_opened)
    with pytest.raises(ValueError, match="at most once a minute"):
        schedule(every=timedelta(seconds=5))


# Helpers ----------------------------------------------------------------------------


class Messages:
    """The admin's message storage, recording what the action said."""

    def __init__(self) -> None:
        self.said: list[str] = []

    def add(self, level: int, message: str, extra_tags: str = "") -> None:
        self.said.append(str(message))


def make_superuser() -> Any:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_superuser("root", password="x")
