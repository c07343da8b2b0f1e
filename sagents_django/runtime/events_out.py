"""Announcements that wait for their transaction: events and Django signals.

Every event about a database row is published after the row's transaction commits
(a subscriber that re-reads the database must find it), and every lifecycle signal is
sent after commit. From code in a transaction, these queue on ``on_commit``; from
code outside one, they go at once. Publishing runs on the runtime loop.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from . import loop
from .database import db
from .publisher import publish

logger = logging.getLogger(__name__)


def after_commit(conversation_id: Any, event: str, data: dict[str, Any]) -> None:
    """Publish ``event`` once the current transaction commits (now without one)."""

    def send() -> None:
        loop.submit(publish(conversation_id, event, data))

    transaction.on_commit(send)


def signal_after_commit(name: str, **kwargs: Any) -> None:
    """Send the lifecycle signal ``name`` of ``sagents_django.signals`` after commit."""
    from sagents_django import signals
    from sagents_django.services import conversation_model

    signal = getattr(signals, name)
    signals.send_after_commit(signal, sender=conversation_model(), **kwargs)


async def asignal(name: str, **kwargs: Any) -> None:
    """``signal_after_commit`` from async code (a turn's loop)."""
    await db(signal_after_commit)(name, **kwargs)
