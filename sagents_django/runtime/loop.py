"""The process's runtime loop: where turns run, in a web process and in a worker.

One event loop in a daemon thread per process, started on first use. Every turn of
this process runs on it (an inline turn submitted by a request, a Celery task's turn:
the task's thread waits for it), so one process shares one set of channel-layer and
HTTP connections however many turns it runs, and a turn outlives the request that
started it. Database work leaves the loop through ``sync_to_async``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

_T = TypeVar("_T")

_loop: asyncio.AbstractEventLoop | None = None
_pid: int | None = None
_lock = threading.Lock()


def runtime_loop() -> asyncio.AbstractEventLoop:
    """The running runtime loop of this process (started now if needed; a forked
    child starts its own)."""
    global _loop, _pid
    with _lock:
        if _loop is None or _pid != os.getpid() or _loop.is_closed():
            _loop = asyncio.new_event_loop()
            _pid = os.getpid()
            ready = threading.Event()
            thread = threading.Thread(
                target=_run, args=(_loop, ready), name="sagents-runtime", daemon=True
            )
            thread.start()
            ready.wait()
        return _loop


def _run(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.call_soon(ready.set)
    loop.run_forever()


def submit(coroutine: Coroutine[Any, Any, _T]) -> concurrent.futures.Future[_T]:
    """Run ``coroutine`` on the runtime loop; a future for its result.

    The task starts in an empty context: it must not inherit the caller's context
    variables (a request's, or asgiref's marks of the thread it was called from,
    which would make its database calls refuse to run)."""
    loop = runtime_loop()
    return contextvars.Context().run(asyncio.run_coroutine_threadsafe, coroutine, loop)


def on_runtime_loop() -> bool:
    try:
        return asyncio.get_running_loop() is _loop
    except RuntimeError:
        return False
