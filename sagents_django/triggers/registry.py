"""Triggers by name, and the decorator that connects one to a Django signal."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.dispatch import Signal

from sagents_django.scope import Scope

RATE = 60
"""Runs a trigger starts per minute unless it says otherwise."""


@dataclass(frozen=True, slots=True)
class Start:
    """What a trigger starts: a turn of ``scope`` answering ``message``.

    ``conversation``: an existing conversation's id (in ``scope``), or None for a
    new one titled ``title``. ``label`` is shown on the conversation ("Invoice #42
    saved"; by default the object and what happened to it). ``key`` tells this
    change from the object's others (by default a digest of its field values, so
    a save that changed nothing starts nothing again)."""

    scope: Scope
    message: str
    conversation: Any = None
    title: str = ""
    label: str = ""
    key: str = ""


@dataclass(frozen=True, slots=True)
class Trigger:
    name: str
    build: Callable[..., Start | None]
    rate: int = RATE


_triggers: dict[str, Trigger] = {}


def triggers() -> dict[str, Trigger]:
    """Every registered trigger (signal ones and schedules), by name."""
    return dict(_triggers)


def get_trigger(name: str) -> Trigger | None:
    return _triggers.get(name)


def register(trigger: Trigger) -> Trigger:
    if not isinstance(trigger.rate, int) or not 1 <= trigger.rate <= 10_000:
        raise ValueError(
            f"Trigger {trigger.name!r}: rate is runs a minute, 1 to 10,000; "
            f"got {trigger.rate!r}"
        )
    _triggers[trigger.name] = trigger
    return trigger


def on_signal(
    signal: Signal,
    *,
    sender: Any = None,
    when: Callable[..., bool] | None = None,
    name: str = "",
    rate: int = RATE,
) -> Callable[[Callable[..., Start | None]], Callable[..., Start | None]]:
    """Decorate ``build(instance, **signal_kwargs) -> Start | None``: on each
    ``signal`` from ``sender`` for which ``when(instance, **signal_kwargs)`` holds
    (always, without it), the trigger records a start of what ``build`` returns
    (None: nothing). ``name`` defaults to the function's dotted path."""

    def connect(build: Callable[..., Start | None]) -> Callable[..., Start | None]:
        from .dispatch import record

        trigger = register(
            Trigger(name or f"{build.__module__}.{build.__qualname__}", build, rate)
        )

        def receiver(signal: Any = None, sender: Any = None, **kwargs: Any) -> None:
            instance = kwargs.pop("instance", None)
            if kwargs.get("raw"):  # loaddata: fixtures start no runs
                return
            if when is not None and not when(instance, **kwargs):
                return
            record(trigger, instance, kwargs)

        signal.connect(
            receiver, sender=sender, weak=False, dispatch_uid=f"sagents:{trigger.name}"
        )
        return build

    return connect
