"""Where a backend call runs, and the database connection it leaves behind.

The filesystem is synchronous; its tools run in worker threads (``asyncio.to_thread``)
and one call path stays on the event loop: an ``Agent`` built inside a coroutine
attaches its FileSystem middleware there, and a filesystem created then lists what
storage holds. Django's ORM refuses queries on a loop's thread
(``SynchronousOnlyOperation``), so such calls are handed to one dedicated thread and
waited for. The wait blocks the loop for one query, as any synchronous call on it
would; it happens once per filesystem, at creation. Calls from any other thread run
where they are, inside the caller's transaction.

Worker threads have no request cycle to close their connections: a connection opened
by a backend call would stay open as long as the thread (a pool keeps threads for the
life of the loop), one per thread. So a call that opened a connection closes it
afterwards under Django's own rule (``close_if_unusable_or_obsolete``: at once with
the default ``CONN_MAX_AGE = 0``, after that age otherwise). A connection the caller
already had is left alone: its owner decides.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from django.db import connections

P = ParamSpec("P")
R = TypeVar("R")

_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None


def on_event_loop() -> bool:
    """Whether the current thread is running an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def backend_call(method: Callable[P, R]) -> Callable[P, R]:
    """Run ``method`` off the event loop, closing any connection it opened."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        if not on_event_loop():
            return _closing_new_connections(method, args, kwargs)
        future = _pool().submit(_closing_new_connections, method, args, kwargs)
        return future.result()

    return wrapper


def _pool() -> ThreadPoolExecutor:
    global _executor
    with _lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="sagents-storage"
            )
        return _executor


def _closing_new_connections(method: Callable[..., R], args: Any, kwargs: Any) -> R:
    unopened = [c for c in connections.all() if c.connection is None]
    try:
        return method(*args, **kwargs)
    finally:
        for connection in unopened:
            if connection.connection is not None and not connection.in_atomic_block:
                connection.close_if_unusable_or_obsolete()
