"""The runtime's database work, on threads of its own.

``sync_to_async``'s default (thread-sensitive) sends every call of a process to one
thread. A worker running many turns at once then queues every turn's writes on that
one thread and connection: with 20 turns streaming, a new turn waited seconds for
its first write (bench/stream_latency.py). The runtime's database calls are
self-contained (each opens and commits its own transactions), so any thread may run
them: a pool of ``SAGENTS["DATABASE_THREADS"]`` threads, each with its own
connection. On SQLite (one writer at a time, and the test suite's in-memory
database refuses a second connection's concurrent writes) the default stays the one
thread-sensitive thread.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import InterfaceError, OperationalError, connections

from sagents_django.conf import sagents_settings

logger = logging.getLogger(__name__)

_P = ParamSpec("_P")
_R = TypeVar("_R")

DEFAULT_THREADS = 8
"""Threads on a database that takes concurrent writers (PostgreSQL, MySQL...)."""

_pools: dict[int, ThreadPoolExecutor] = {}
"""This process's pools by size (a changed setting makes another one)."""
_pid = os.getpid()
_lock = threading.Lock()


def threads() -> int:
    """How many threads run the runtime's database work in this process."""
    configured = sagents_settings.DATABASE_THREADS
    if configured is not None:
        return configured
    return 1 if connections["default"].vendor == "sqlite" else DEFAULT_THREADS


def _executor() -> ThreadPoolExecutor | None:
    """The pool (None: the thread-sensitive default)."""
    global _pid
    size = threads()
    if size == 1:
        return None
    with _lock:
        if _pid != os.getpid():  # a forked child starts its own threads
            _pools.clear()
            _pid = os.getpid()
        pool = _pools.get(size)
        if pool is None:
            pool = _pools[size] = ThreadPoolExecutor(
                size, thread_name_prefix="sagents-db"
            )
        return pool


def db(function: Callable[_P, _R]) -> Callable[_P, Awaitable[_R]]:
    """``function`` (synchronous, self-contained database work) for async code."""
    executor = _executor()
    work = _reconnecting(function)
    if executor is None:
        return sync_to_async(work)
    return sync_to_async(work, thread_sensitive=False, executor=executor)


def _reconnecting(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """``function`` on a live connection: one the server closed (a restart, a
    failover, ``pg_terminate_backend``) is replaced and the work tried once more.
    The failed attempt's transaction never committed (its connection was gone),
    so trying again does it once."""

    @functools.wraps(function)
    def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        connection = connections["default"]
        if connection.in_atomic_block:
            return function(*args, **kwargs)  # the caller's transaction decides
        _check_if_idle(connection)
        try:
            return function(*args, **kwargs)
        except (OperationalError, InterfaceError):
            if connection.in_atomic_block:
                raise
            # The connection may look usable now (a failed rollback can already
            # have replaced it): try once more on a checked one. (Checked only
            # after a failure: a check before every call would reconnect every
            # time under CONN_MAX_AGE=0, the default.)
            logger.warning("A database call failed; trying it once more", exc_info=True)
            if not connection.is_usable():
                connection.close()
            return function(*args, **kwargs)
        finally:
            _last_use.at = time.monotonic()

    return call


IDLE_CHECK_SECONDS = 0.25
"""A thread's connection unused this long is checked before its next call."""

_last_use = threading.local()


def _check_if_idle(connection: Any) -> None:
    """Replace a connection the server closed while it sat idle (a turn waits on
    its model for seconds). The persistence classes record and swallow a failed
    write, so a dead connection must be found before the write, not by it: one
    ``SELECT 1`` per idle spell, none while a turn writes in quick succession."""
    last = getattr(_last_use, "at", None)
    if last is None or time.monotonic() - last < IDLE_CHECK_SECONDS:
        return
    if connection.connection is not None and not connection.is_usable():
        connection.close()


def reconnect() -> None:
    """Replace this thread's connection if the server closed it (after a failed
    write, before trying it again)."""
    connection = connections["default"]
    if not connection.in_atomic_block and not connection.is_usable():
        connection.close()


def close_connections() -> None:
    """Close the connection of every pool thread (a worker shutting down; a test
    suite about to drop its database)."""
    with _lock:
        pools = dict(_pools) if _pid == os.getpid() else {}
    for size, pool in pools.items():
        # Each task holds its thread until all have started, so each thread
        # takes one.
        barrier = threading.Barrier(size)

        def close(barrier: threading.Barrier = barrier) -> None:
            barrier.wait(10)
            connections.close_all()

        for future in [pool.submit(close) for _ in range(size)]:
            future.result(15)
