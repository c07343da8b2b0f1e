"""The process's runtime loop: where turns run, in a web process and in a worker.

One event loop in a daemon thread per process, started on first use. Every turn of
this process runs on it (an inline turn submitted by a request, a Celery task's turn:
the task's thread waits for it), so one process shares one set of channel-layer and
HTTP connections however many turns it runs, and a turn outlives the request that
started it. Database work leaves the loop through ``sync_to_async``.

When the process exits, the loop's tasks are cancelled and the loop stopped before
the interpreter finalizes: a daemon thread still inside a C extension's I/O (a Redis
or database client) while the interpreter tears down can crash the process on its
way out (a drained daphne was seen to exit with SIGSEGV). Debounced file writes
still pending then are stored (``core.filesystem.flush_pending_writes``).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import contextvars
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

_T = TypeVar("_T")

_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_pid: int | None = None
_lock = threading.Lock()
EXIT_SECONDS = 2.0
"""How long the loop's tasks get to unwind when the process exits."""


def runtime_loop() -> asyncio.AbstractEventLoop:
    """The running runtime loop of this process (started now if needed; a forked
    child starts its own)."""
    global _loop, _pid, _thread
    with _lock:
        if _loop is None or _pid != os.getpid() or _loop.is_closed():
            _loop = asyncio.new_event_loop()
            _pid = os.getpid()
            ready = threading.Event()
            _thread = threading.Thread(
                target=_run, args=(_loop, ready), name="sagents-runtime", daemon=True
            )
            _thread.start()
            ready.wait()
            atexit.register(_stop_at_exit, _loop, _thread, _pid)
        return _loop


def _stop_at_exit(
    loop: asyncio.AbstractEventLoop, thread: threading.Thread, pid: int
) -> None:
    """Cancel the loop's tasks, stop it and wait for its thread (bounded)."""
    if pid != os.getpid() or loop.is_closed() or not thread.is_alive():
        return

    async def cancel_all() -> None:
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=EXIT_SECONDS)

    with contextlib.suppress(Exception):  # exiting all the same
        asyncio.run_coroutine_threadsafe(cancel_all(), loop).result(EXIT_SECONDS + 1)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(EXIT_SECONDS)
    # What the cancelled turns' tools left waiting on a debounce (a daemon timer
    # would die with the interpreter, and the write with it).
    from sagents_django.core.filesystem.debounce import flush_pending_writes

    flush_pending_writes()


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
