"""Suite-wide test setup.

The socket guard: tests fake only the LLM provider, and the fakes listen on loopback.
Any other outbound connection (a real provider, a cost-map download, a model hub) is a
bug that would make the suite slow, flaky or leaky, so it fails loudly instead. It is
installed in ``pytest_configure`` (before collection) so imports are guarded too.

The database: the suite runs on SQLite, or on the server ``DATABASE_URL`` names (the
README runs the database tests a second time on PostgreSQL). A PostgreSQL URL whose
server does not answer stops the run before collection, never a skip or a fallback.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from typing import Any

import pytest

pytest_plugins = ["tests.fakes.fixtures", "tests.runtime.stacks", "tests.otel"]

_original_connect = socket.socket.connect
_original_connect_ex = socket.socket.connect_ex
_original_create_connection = socket.create_connection


def _is_allowed(address: Any) -> bool:
    # Unix sockets are paths (str or bytes); they never leave the machine.
    if isinstance(address, str | bytes):
        return True
    host = address[0]
    if isinstance(host, bytes):
        host = host.decode()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        # A host name other than localhost would need a DNS lookup: not allowed.
        return False


def _check(address: Any) -> None:
    if not _is_allowed(address):
        raise RuntimeError(
            f"Blocked network connection to {address!r}: tests may only connect to "
            "127.0.0.1, localhost or ::1 (socket guard in tests/conftest.py)."
        )


def _guarded_connect(self: socket.socket, address: Any) -> None:
    _check(address)
    return _original_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> int:
    _check(address)
    return _original_connect_ex(self, address)


def _guarded_create_connection(address: Any, *args: Any, **kwargs: Any) -> Any:
    # Checked before getaddrinfo so a blocked name costs no DNS lookup.
    _check(address)
    return _original_create_connection(address, *args, **kwargs)


def pytest_configure(config: pytest.Config) -> None:
    socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]
    socket.create_connection = _guarded_create_connection
    _check_database_url()
    from sagents_django.runtime import sweeper

    # The test process sweeps only where a test calls sweep_once(): a sweeper in
    # the background would take up runs that tests leave queued or stale on
    # purpose (the workers and daphne processes tests start do sweep).
    sweeper.autostart = False


def pytest_unconfigure(config: pytest.Config) -> None:
    socket.socket.connect = _original_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _original_connect_ex  # type: ignore[method-assign]
    socket.create_connection = _original_create_connection


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The README runs the suite on several processes (pytest-xdist, ``--dist
    loadgroup``): tests are spread one by one, except a module whose tests share a
    module-scoped fixture (a browser, a served site, a module's own Celery worker),
    which runs whole on one process so that fixture starts once. Runs before
    xdist's own hook, which reads the groups."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        # Ours only (a plugin's class-scoped autouse fixtures cost nothing).
        shared = any(
            definition.scope in ("module", "class", "package")
            and definition.baseid.startswith("tests")
            for definitions in info.name2fixturedefs.values()
            for definition in definitions
        )
        if shared:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))


def _check_database_url() -> None:
    """Fail the run at once, with the reason, when DATABASE_URL names a PostgreSQL
    server that does not answer (the alternative is hundreds of identical errors)."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres", "pgsql")):
        return
    import environ
    import psycopg

    config = environ.Env.db_url_config(url)
    try:
        psycopg.connect(
            host=config.get("HOST") or None,
            port=config.get("PORT") or None,
            user=config.get("USER") or None,
            password=config.get("PASSWORD") or None,
            dbname=config.get("NAME") or None,
            connect_timeout=5,
        ).close()
    except psycopg.Error as exc:
        raise pytest.UsageError(
            f"DATABASE_URL points at PostgreSQL ({config.get('HOST')}:"
            f"{config.get('PORT')}/{config.get('NAME')}) but it cannot be reached: "
            f"{exc}. Start it (scripts/test-services does) or unset DATABASE_URL to use SQLite."
        ) from exc


@pytest.fixture(scope="session", autouse=True)
def database_threads(django_db_setup: Any, django_db_blocker: Any) -> Any:
    """Before the test database is dropped (PostgreSQL refuses to drop a database
    in use): close the runtime's database threads' connections, and end those of
    threads Django does not manage (a file backend called from asyncio's
    executor keeps one per thread)."""
    yield
    from django.db import connection

    from sagents_django.runtime import sweeper
    from sagents_django.runtime.database import close_connections

    sweeper.stop()  # it would query a database about to be dropped
    close_connections()
    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.fixture(scope="session")
def litellm_warmed() -> None:
    """Import litellm and make one call before the first litellm test of a process.

    The first call imports litellm and sets up its handlers, blocking the event loop
    for seconds on a busy machine: inside a test's 1-second idle timeout that reads
    as a stalled stream on every retry.
    """
    import asyncio
    import concurrent.futures

    from sagents_django.core.transports import import_litellm

    litellm = import_litellm()

    async def one_call(server: FakeOpenAIServer) -> None:
        response = await litellm.acompletion(
            model=server.model,
            messages=[{"role": "user", "content": "warm up"}],
            stream=True,
            **server.model_params,
        )
        async for _chunk in response:
            pass

    from tests.fakes.openai_server import FakeOpenAIServer, reply

    with FakeOpenAIServer() as server:
        server.script(reply("warm"))
        # A thread of its own: an async fixture may ask for it in a running loop.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, one_call(server)).result()
