"""Runs on a schedule: Celery beat calls ``run_schedule(name)``; each slot of the
schedule starts once, however often beat delivers it.

::

    from datetime import timedelta
    from sagents_django.triggers import Start, schedule

    @schedule(every=timedelta(hours=24))
    def morning_report(slot):
        return Start(scope=Scope.for_user(User.objects.get(username="ops")),
                     message="Summarise yesterday's orders.", title=f"Report {slot:%Y-%m-%d}")

    # settings.py (Celery reads it through the CELERY_ namespace):
    CELERY_BEAT_SCHEDULE = {**beat_schedule()}   # after the triggers are imported

``every`` is a ``timedelta`` (slots are multiples of it since the epoch, so two
beats in one slot start one run) or any Celery schedule such as ``crontab(...)``
(slots are minutes: a crontab fires at most once a minute).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils import timezone

from .registry import RATE, Start, Trigger, get_trigger, register

TASK = "sagents_django.tasks.run_schedule"
_every: dict[str, Any] = {}


def schedule(
    *, every: Any, name: str = "", rate: int = RATE
) -> Callable[[Callable[[datetime], Start | None]], Callable[[datetime], Start | None]]:
    """Decorate ``build(slot) -> Start | None`` to run it on ``every`` (a timedelta
    or a Celery schedule); ``slot`` is the start of the slot being run."""
    if isinstance(every, timedelta) and every < timedelta(minutes=1):
        raise ValueError("A schedule runs at most once a minute")

    def add(
        build: Callable[[datetime], Start | None],
    ) -> Callable[[datetime], Start | None]:
        trigger_name = name or f"{build.__module__}.{build.__qualname__}"

        def from_slot(
            _instance: Any, *, slot: datetime, **_kwargs: Any
        ) -> Start | None:
            start = build(slot)
            if start is None or start.key:
                return start
            label = (
                start.label or f"Schedule {trigger_name} at {slot:%Y-%m-%d %H:%M} UTC"
            )
            return Start(
                scope=start.scope,
                message=start.message,
                conversation=start.conversation,
                title=start.title,
                label=label,
                key=slot.isoformat(),
            )

        register(Trigger(trigger_name, from_slot, rate))
        _every[trigger_name] = every
        return build

    return add


def beat_schedule() -> dict[str, dict[str, Any]]:
    """Entries for Celery's ``beat_schedule`` (``CELERY_BEAT_SCHEDULE``), one per
    schedule; django-celery-beat's database scheduler imports them too."""
    return {
        f"sagents:{name}": {"task": TASK, "schedule": every, "args": (name,)}
        for name, every in _every.items()
    }


def run_schedule(name: str, now: datetime | None = None) -> int | None:
    """Record this slot's start of schedule ``name`` (None: unknown schedule, no
    run this time, or this slot already started)."""
    from .dispatch import record

    trigger = get_trigger(name)
    if trigger is None or name not in _every:
        return None
    slot = slot_of(_every[name], now or timezone.now())
    return record(trigger, None, {"slot": slot}, target=f"schedule:{name}"[:255])


def slot_of(every: Any, now: datetime) -> datetime:
    """The start of the slot ``now`` falls in."""
    now = now.astimezone(UTC)
    if isinstance(every, timedelta):
        epoch = datetime(1970, 1, 1, tzinfo=UTC)
        return epoch + ((now - epoch) // every) * every
    return now.replace(second=0, microsecond=0)
