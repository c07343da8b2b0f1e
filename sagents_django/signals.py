"""Lifecycle signals (Sagents' Persistence.Hooks), and feedback on replies.

``feedback_given`` is sent after commit each time a person rates a reply
(``services.rate_reply``), with ``feedback`` (the ``ReplyFeedback`` row: its user,
message, conversation, rating, comment and model) and ``created`` (False when the
person changed an earlier rating): a receiver can feed an evaluation set.

``conversation_changed`` is sent after commit when the services create, rename or
delete a conversation, with ``conversation`` (the instance; deleted: as it was) and
``change`` (``"created"``, ``"renamed"`` or ``"deleted"``). The chat pages' lists
follow it (``ui.live_lists``); a site can too.
``budget_threshold_reached`` is sent after commit when a model call crosses a
budget's soft threshold on a site whose ``SOFT_ACTION`` is ``notify``, with
``conversation_id``, ``run_id``, ``user_id``, ``budget`` (scope, key, period,
limit, spent, remaining, estimate) and ``message``: mail the owner, page finance.
"""

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
feedback_given = Signal()
conversation_changed = Signal()
budget_threshold_reached = Signal()
approval_requested = Signal()
"""An approval request waits for people: ``request``, ``link``, ``still_needed``
(``sagents_django.approvals.signals``)."""


def send_after_commit(signal: Signal, *, sender: Any, **kwargs: Any) -> None:
    transaction.on_commit(lambda: signal.send_robust(sender=sender, **kwargs))
