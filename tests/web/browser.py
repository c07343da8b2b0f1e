"""A real browser against the site served by daphne, for the chat pages' tests.

daphne serves the hosting project (a file SQLite database of this module, the
in-memory channel layer, inline turns, the demo model paced so streaming shows)
with ``tests.web.site_settings`` (write_file asks for approval). Debian's chromium
runs headless through Playwright (never a downloaded browser); when it is missing
the tests fail, never skip: scripts/test-services installs it.

No Django runs in the test process: the site's database is read with sqlite3, so
Playwright's event loop never meets Django's async-safety check. Screenshots of
every step go to ``test-artifacts/`` (gitignored) for people to look at.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support import sites
from tests.support.processes import CeleryWorker, Daphne

USERS = ("alice", "bob", "carol")

SETUP = f"""
import django
django.setup()
from django.contrib.auth import get_user_model
User = get_user_model()
for name in {USERS!r}:
    User.objects.create_user(name, password={sites.PASSWORD!r}, is_staff=(name == "carol"))
"""


class Site:
    def __init__(self, url: str, database: Path | str, env: dict[str, str]) -> None:
        self.url = url
        self.ws = url.replace("http://", "ws://")
        self.database = database
        """A SQLite file, or a PostgreSQL URL (the production stack)."""
        self.env = env

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        if isinstance(self.database, str):
            import psycopg

            with psycopg.connect(self.database) as db:
                return list(db.execute(sql.replace("?", "%s"), params))
        with sqlite3.connect(self.database, timeout=20) as db:
            return list(db.execute(sql, params))

    def rows(self, conversation: str) -> list[int]:
        return [
            r[0]
            for r in self.query(
                "SELECT id FROM sagents_display_messages WHERE conversation_id = ? "
                "ORDER BY inserted_at, sequence, id",
                conversation.replace("-", ""),
            )
        ]

    def python(self, code: str) -> str:
        return sites.run_python(self.env, "-c", code)


POSTGRES = os.environ.get("SAGENTS_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432")
REDIS = os.environ.get("SAGENTS_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
BROKER = os.environ.get("SAGENTS_TEST_UI_BROKER", "redis://127.0.0.1:6379/11")
"""The broker of the production sites; each site's turns go to a queue of its own."""


def serve(
    folder: Path,
    *,
    delay_ms: int,
    production: bool = False,
    settings: str = "tests.web.site_settings",
) -> Iterator[Site]:
    """The site in daphne: embedded (SQLite file, in-memory layer, inline turns),
    or ``production`` (a PostgreSQL database of its own, the Redis channel layer,
    turns on a Celery worker process of its own queue); ``settings`` names its
    settings module."""
    env = sites.site_env(folder, settings, SAGENTS_DEMO_DELAY_MS=str(delay_ms))
    database: Path | str = folder / "db.sqlite3"
    # Unique across the parallel test processes and their temporary folders.
    name = f"ui_browser_{uuid.uuid4().hex[:12]}"
    if production:
        import psycopg

        with psycopg.connect(f"{POSTGRES}/postgres", autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        database = f"{POSTGRES}/{name}"
        env.update(
            DATABASE_URL=database,
            REDIS_URL=REDIS,
            CELERY_BROKER_URL=BROKER,
            SAGENTS_EXECUTOR="celery",
            SAGENTS_TEST_QUEUE=name,
        )
    daphne: Daphne | None = None
    worker: CeleryWorker | None = None
    try:
        sites.migrate(env)
        site = Site("", database, env)
        site.python(SETUP)
        daphne = Daphne(env, folder / "daphne.log")
        if production:
            worker = CeleryWorker(
                env, queue=name, concurrency=8, log=folder / "worker.log"
            )
            worker.start()
        site.url = daphne.url
        site.ws = daphne.url.replace("http://", "ws://")
        yield site
    finally:
        for process in (daphne, worker):
            if process is not None:
                process.stop()
        if production:
            import psycopg

            with psycopg.connect(f"{POSTGRES}/postgres", autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def sign_in(page: Any, site: Site, user: str) -> None:
    page.goto(f"{site.url}/accounts/login/")
    page.get_by_label("Username").fill(user)
    page.get_by_label("Password").fill(sites.PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{site.url}/")


def new_conversation(page: Any, site: Site, title: str = "") -> str:
    page.goto(f"{site.url}/")
    if title:
        page.get_by_label("Title (optional)").fill(title)
    page.get_by_role("button", name="New conversation").click()
    page.wait_for_url("**/c/*/")
    return page.url.rstrip("/").rsplit("/", 1)[-1]


def send(page: Any, text: str) -> None:
    """Type ``text`` into the composer and send it with Enter."""
    box = page.get_by_label("Message", exact=True)
    box.fill(text)
    box.press("Enter")


def run_turn(page: Any, text: str) -> None:
    """Send ``text`` and approve what the demo asks, until the turn is done."""
    send(page, text)
    approval = page.get_by_role("form", name="Approval needed")
    approval.wait_for()
    approval.get_by_role("button", name="Send the decision").click()
    page.locator("#sg-status", has_text="Ready").wait_for()


def wait_connected(page: Any) -> None:
    """The page's socket is open (its first resync has replaced the status)."""
    page.wait_for_function(
        "() => { const c = document.querySelector('#sg-chat');"
        " return c && !c.classList.contains('sg-offline') && window.__sgOpen"
        " && window.__sgSynced }"
    )


def row_ids(page: Any) -> list[int]:
    return json.loads(
        page.evaluate(
            "() => JSON.stringify(Array.from(document.querySelectorAll("
            "'#sg-messages > [id^=sg-msg-]')).map(e => Number(e.id.slice(7))))"
        )
    )


class DroppingProxy:
    """A TCP relay in front of daphne whose connections can be cut at once: the
    browser then sees its socket die (close code 1006) as on a real network
    drop, and reconnects through the relay."""

    def __init__(self, port: int) -> None:
        import socket
        import threading

        self.target = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.sockets: list[Any] = []
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket
        import threading

        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            with self.lock:
                self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: Any, sink: Any) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.close()

    def drop(self) -> None:
        """Cut every open connection (sockets, keep-alive HTTP)."""
        import socket

        with self.lock:
            sockets, self.sockets = self.sockets, []
        for end in sockets:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()

    def close(self) -> None:
        self.closed = True
        self.listener.close()
        self.drop()
