"""Whether this process is draining: stopping for a deploy.

A draining worker claims no new run and hands its running turns over (each stops
at its next safe point, checkpoints and releases its lease, so another worker goes
on at once); a draining web process answers "not ready" so the load balancer sends
new sockets elsewhere. Set once (by SIGTERM), never cleared: the process is ending.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

_draining = threading.Event()
_listeners: list[Callable[[], object]] = []
_lock = threading.Lock()


def start() -> None:
    """Begin draining; tell every listener once (from this thread)."""
    with _lock:
        if _draining.is_set():
            return
        _draining.set()
        listeners = list(_listeners)
    for listener in listeners:
        listener()


def is_draining() -> bool:
    return _draining.is_set()


def on_drain(listener: Callable[[], object]) -> Callable[[], None]:
    """Call ``listener()`` when draining starts (at once if it has); returns a
    function that removes it."""
    with _lock:
        started = _draining.is_set()
        if not started:
            _listeners.append(listener)
    if started:
        listener()

    def remove() -> None:
        with _lock:
            if listener in _listeners:
                _listeners.remove(listener)

    return remove


def reset_for_tests() -> None:
    """Forget a drain (a test process drains and goes on)."""
    with _lock:
        _draining.clear()
