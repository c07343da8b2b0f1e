"""Who watches a conversation (Sagents' Presence), as the socket consumer reports it.

Minimal version by the lead so the server can count viewers; the protocol work
replaces the storage (Redis beside a Redis layer).
"""

from __future__ import annotations

import threading
from datetime import datetime

from asgiref.sync import sync_to_async
from django.utils import timezone

_viewers: dict[str, set[str]] = {}
_activity: dict[str, datetime] = {}
_lock = threading.Lock()


def add(conversation_id: str, channel_name: str) -> None:
    with _lock:
        _viewers.setdefault(conversation_id, set()).add(channel_name)
        _activity[conversation_id] = timezone.now()


def remove(conversation_id: str, channel_name: str) -> None:
    with _lock:
        _viewers.get(conversation_id, set()).discard(channel_name)
        _activity[conversation_id] = timezone.now()


def count(conversation_id: str) -> int:
    with _lock:
        return len(_viewers.get(conversation_id, ()))


def touch(conversation_id: str) -> None:
    with _lock:
        _activity[conversation_id] = timezone.now()


def last_activity(conversation_id: str) -> datetime | None:
    with _lock:
        return _activity.get(conversation_id)


aadd = sync_to_async(add)
aremove = sync_to_async(remove)
acount = sync_to_async(count)
atouch = sync_to_async(touch)
