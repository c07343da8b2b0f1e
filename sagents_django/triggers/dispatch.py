"""Recording a trigger's start (in the transaction of what caused it) and starting
it after commit, within the trigger's rate; the rest wait for ``drain``."""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, models, transaction
from django.utils import timezone

from sagents_django.scope import Scope, scope_class

from .models import TriggerEvent
from .registry import RATE, Start, Trigger, get_trigger

logger = logging.getLogger(__name__)

ERROR_CHARS = 2000
MAX_MESSAGE_CHARS = 100_000


def record(
    trigger: Trigger,
    instance: Any,
    signal_kwargs: dict[str, Any],
    *,
    target: str = "",
) -> int | None:
    """Record what ``trigger`` starts for ``instance`` (``target`` names it; by
    default ``app_label.model:pk``); None when it starts nothing, or already did
    for this change. It starts after commit. Never raises: a trigger that fails is
    a failed row the admin lists, not a failed save."""
    target = target or _object(instance)
    try:
        start = trigger.build(instance, **signal_kwargs)
        if start is None:
            return None
        row = _row(trigger, target, start, instance, signal_kwargs)
    except Exception as exc:
        logger.exception("Trigger %s failed for %s", trigger.name, target)
        row = TriggerEvent(
            trigger=trigger.name,
            object=target,
            change=_digest([repr(exc), timezone.now().isoformat()]),
            label=target,
            status=TriggerEvent.FAILED,
            scope={},
            message="",
            error=_error(exc),
        )
    try:
        with transaction.atomic():
            row.save()
    except IntegrityError:
        return None  # this change already started (or waits to)
    if row.status == TriggerEvent.PENDING:
        transaction.on_commit(lambda: start_event(row.pk))
    return row.pk


def start_event(event_id: int) -> bool:
    """Start the pending event ``event_id`` if its trigger's rate allows; whether
    it started. A failure is recorded on the row (and logged), never raised."""
    with transaction.atomic():
        event = (
            TriggerEvent.objects.select_for_update(skip_locked=True)
            .filter(pk=event_id, status=TriggerEvent.PENDING)
            .first()
        )
        if event is None or _over_rate(event.trigger):
            return False
        event.attempts += 1
        try:
            with transaction.atomic():
                event.conversation_id, event.run_id = _start(event)
        except Exception as exc:
            logger.warning("Trigger %s could not start: %s", event.trigger, exc)
            event.status, event.error = TriggerEvent.FAILED, _error(exc)
        else:
            event.status, event.error = TriggerEvent.STARTED, ""
            event.started_at = timezone.now()
        event.save()
        return event.status == TriggerEvent.STARTED


def drain(limit: int = 100) -> int:
    """Start pending events, oldest first, as their triggers' rates allow (every
    sweeper calls it); how many started."""
    started = 0
    ids = TriggerEvent.objects.filter(status=TriggerEvent.PENDING).order_by("id")
    full: set[str] = set()
    for event_id, name in ids.values_list("id", "trigger")[:limit]:
        if name in full:
            continue
        if start_event(event_id):
            started += 1
        elif _over_rate(name):
            full.add(name)
    return started


# Helpers ----------------------------------------------------------------------------


def _row(
    trigger: Trigger, target: str, start: Start, instance: Any, kwargs: dict[str, Any]
) -> TriggerEvent:
    if not isinstance(start, Start):
        raise TypeError(
            f"A trigger returns a sagents_django.triggers.Start or None, "
            f"not {type(start).__name__}"
        )
    if not isinstance(start.scope, Scope):
        raise TypeError(
            f"Start.scope must be a Scope, not {type(start.scope).__name__}"
        )
    if not isinstance(start.message, str) or not start.message.strip():
        raise ValueError("Start.message must be non-empty text")
    if len(start.message) > MAX_MESSAGE_CHARS:
        raise ValueError(f"Start.message is over {MAX_MESSAGE_CHARS:,} characters")
    return TriggerEvent(
        trigger=trigger.name,
        object=target,
        change=(start.key or _change(instance, kwargs))[:64],
        label=(start.label or _label(instance, kwargs) or target)[:255],
        scope=start.scope.to_dict(),
        conversation_id=str(start.conversation or "")[:64],
        title=start.title[:255],
        message=start.message,
    )


def _start(event: TriggerEvent) -> tuple[str, str]:
    # Imported here: the runtime's modules import the models, which import this app.
    from sagents_django import services
    from sagents_django.runtime import agent_server

    scope = scope_class().from_dict(event.scope)
    started_by = {"trigger": event.trigger, "label": event.label}
    conversation_id: Any = event.conversation_id
    if not conversation_id:
        conversation = services.create_conversation(
            scope, title=event.title, metadata={"started_by": started_by}
        )
        conversation_id = conversation.pk
    submission = agent_server.add_message(
        scope, conversation_id, event.message, metadata={"started_by": started_by}
    )
    return str(conversation_id), str(submission.run_id or "")


def _over_rate(name: str) -> bool:
    trigger = get_trigger(name)
    rate = trigger.rate if trigger is not None else RATE
    since = timezone.now() - timedelta(minutes=1)
    recent = TriggerEvent.objects.filter(trigger=name, started_at__gte=since)
    return recent.count() >= rate


def _object(instance: Any) -> str:
    if isinstance(instance, models.Model):
        return f"{instance._meta.label_lower}:{instance.pk}"[:255]
    return "-" if instance is None else type(instance).__name__[:255]


def _label(instance: Any, kwargs: dict[str, Any]) -> str:
    if not isinstance(instance, models.Model):
        return _object(instance)
    what = "created" if kwargs.get("created") else "saved"
    if "created" not in kwargs:
        what = "deleted" if instance.pk is None else "changed"
    return f"{str(instance._meta.verbose_name).capitalize()} #{instance.pk} {what}"


def _change(instance: Any, kwargs: dict[str, Any]) -> str:
    """A digest of the instance's field values (and whether it was created)."""
    if not isinstance(instance, models.Model):
        return _digest([repr(instance)])
    values = {
        f.attname: f.value_to_string(instance) for f in instance._meta.concrete_fields
    }
    return _digest([bool(kwargs.get("created")), values])


def _digest(parts: list[Any]) -> str:
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:ERROR_CHARS]
