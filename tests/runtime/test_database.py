"""The runtime's database threads: a pool beside a database with concurrent
writers, the one thread-sensitive thread on SQLite."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from django.db import connection

from sagents_django.runtime import database


def where() -> tuple[str, bool]:
    """This thread's name and whether its connection is open after a query."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return threading.current_thread().name, connection.connection is not None


@pytest.mark.django_db(transaction=True)
async def test_calls_run_on_a_pool_of_threads_whose_connections_can_be_closed(
    settings: Any,
) -> None:
    settings.SAGENTS = {"DATABASE_THREADS": 3}
    started = threading.Barrier(3)

    def held() -> tuple[str, bool]:
        started.wait(10)  # three calls at once: three threads
        return where()

    seen = await asyncio.gather(*(database.db(held)() for _ in range(3)))

    assert len({name for name, _ in seen}) == 3
    assert all(name.startswith("sagents-db") and open_ for name, open_ in seen)
    await asyncio.to_thread(database.close_connections)
    closed = await asyncio.gather(
        *(database.db(lambda: connection.connection is None)() for _ in range(3))
    )
    # Django keeps SQLite's in-memory test database open (closing would lose it).
    in_memory = "mode=memory" in str(connection.settings_dict["NAME"])
    assert all(closed) != in_memory


@pytest.mark.django_db(transaction=True)
async def test_sqlite_keeps_the_one_thread_sensitive_thread(settings: Any) -> None:
    settings.SAGENTS = {}
    if connection.vendor != "sqlite":
        assert database.threads() == database.DEFAULT_THREADS
        return
    assert database.threads() == 1
    names = {
        name
        for name, _ in await asyncio.gather(*(database.db(where)() for _ in range(4)))
    }
    assert len(names) == 1 and not names.pop().startswith("sagents-db")
