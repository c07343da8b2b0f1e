"""Runs started by the site: a turn when a model is saved (any Django signal), or on
a Celery beat schedule, owned by whom the trigger says.

::

    from django.db.models.signals import post_save
    from sagents_django.scope import Scope
    from sagents_django.triggers import Start, on_signal

    @on_signal(post_save, sender=Invoice, when=lambda invoice, created, **kw: created)
    def review_invoice(invoice, **kwargs):
        return Start(
            scope=Scope.for_user(invoice.account_manager),
            message=f"Check invoice #{invoice.pk} against its order.",
            title=f"Invoice #{invoice.pk}",
        )

A start happens after the save's transaction commits (a rolled-back save starts
nothing), once per (trigger, object, change): a retried save of the same values,
or a beat delivered twice, finds its ``TriggerEvent`` row and starts nothing. Each
trigger starts at most ``rate`` runs a minute; the rest wait as pending rows that
every sweeper starts as the rate allows. A start that fails (the trigger raised,
the owner owns nothing, the message is refused) is a failed row with the error,
listed in the admin, which can start it again; the site's save never fails
because of a trigger.
"""

from __future__ import annotations

from .dispatch import drain, record, start_event
from .registry import Start, Trigger, get_trigger, on_signal, triggers
from .schedules import beat_schedule, run_schedule, schedule

__all__ = [
    "Start",
    "Trigger",
    "beat_schedule",
    "drain",
    "get_trigger",
    "on_signal",
    "record",
    "run_schedule",
    "schedule",
    "start_event",
    "triggers",
]
