"""Lifecycle signals (Sagents' Persistence.Hooks)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.dispatch import Signal

message_received = Signal()
agent_response = Signal()
status_changed = Signal()
run_finished = Signal()
interrupt_raised = Signal()
title_generated = Signal()


def send_after_commit(signal: Signal, *, sender: Any, **kwargs: Any) -> None:
    transaction.on_commit(lambda: signal.send_robust(sender=sender, **kwargs))
