"""A worker's long-lived heap, kept out of the cyclic garbage collector's way.

Why: a worker's heap is mostly what it imported (Django, Celery, litellm, the
agents' modules): some 400,000 objects that live as long as the process. Python's
full collection walks every one of them, 0.2-0.3 s of CPU with the runtime loop
stopped, and one comes every so often while turns stream (``bench/stream_latency.py``
saw them in its rounds: a chunk's latency then waits for it), although what turns
leave behind is young. ``gc.freeze()`` moves the objects alive at that moment to a
generation the collector never walks; they are still freed by reference counting
when let go (only a cycle among frozen objects would stay, and what is frozen is
imported modules and the like).

So a Celery worker settles its heap twice, each time one full collection then a
freeze, from a thread of its own: once its start-up imports are done (litellm's
included), and once after its first turn (what a turn imports lazily: the agents'
factories, the provider's client).
"""

from __future__ import annotations

import gc
import logging
import threading
import time

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_first_turn_settled = False


def settle(reason: str) -> None:
    """Collect what is garbage now, then freeze what is left."""
    started = time.perf_counter()
    gc.collect()
    gc.freeze()
    logger.info(
        "Heap settled (%s): %d objects frozen, in %.0f ms",
        reason,
        gc.get_freeze_count(),
        (time.perf_counter() - started) * 1000,
    )


def settle_after(thread: threading.Thread | None, reason: str) -> None:
    """``settle`` on a daemon thread once ``thread`` (a warm-up) has finished."""

    def wait_then_settle() -> None:
        if thread is not None:
            thread.join()
        settle(reason)

    threading.Thread(
        target=wait_then_settle, name="sagents-heap-settle", daemon=True
    ).start()


def first_turn_done() -> None:
    """A turn of this process ended: the first time, ``settle``."""
    global _first_turn_settled
    with _lock:
        if _first_turn_settled:
            return
        _first_turn_settled = True
    settle("first turn")
