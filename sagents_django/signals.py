"""Lifecycle signals (Sagents' Persistence.Hooks), and what sign-out does to sockets."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.dispatch import Signal

message_received = Signal()
agent_response = Signal()
status_changed = Signal()
run_finished = Signal()
interrupt_raised = Signal()
title_generated = Signal()

logger = logging.getLogger(__name__)


def send_after_commit(signal: Signal, *, sender: Any, **kwargs: Any) -> None:
    transaction.on_commit(lambda: signal.send_robust(sender=sender, **kwargs))


def close_signed_out_sockets(
    sender: Any, request: Any = None, user: Any = None, **kwargs: Any
) -> None:
    """``user_logged_out``: close the sockets this session signed in, with 4401.

    A socket is signed in once, when it opens; without this it would go on
    following and sending for someone who signed out. Only this session's sockets
    close (they joined its group, ``groups.session_group``): the person's other
    browsers are still signed in. Sent before Django flushes the session, so its
    key is still there. A layer that cannot be reached never fails a sign-out."""
    key = getattr(getattr(request, "session", None), "session_key", None)
    if not key:
        return
    from sagents_django.runtime import groups, layer, loop

    if layer.get_layer() is None:
        return  # no layer, no socket to close
    message = {"type": "session.signed_out"}
    future = loop.submit(layer.group_send(groups.session_group(key), message))
    try:
        future.result(timeout=layer.HOP_TIMEOUT)
    except Exception:
        logger.warning("Could not close the sockets of a signed-out session")
