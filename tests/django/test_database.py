"""The suite runs on the database DATABASE_URL names, and says so loudly if it cannot.

The README's test command runs the suite on SQLite and then the database tests again
on PostgreSQL; if PostgreSQL is unreachable the run must fail, never skip or quietly
fall back to SQLite.
"""

from __future__ import annotations

import os

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


def expected_vendor() -> str:
    url = os.environ.get("DATABASE_URL", "")
    return "postgresql" if url.startswith(("postgres", "pgsql")) else "sqlite"


def test_the_suite_runs_on_the_database_that_database_url_names() -> None:
    assert connection.vendor == expected_vendor()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)


def test_the_test_database_is_never_the_development_database() -> None:
    name = str(connection.settings_dict["NAME"])
    assert not name.endswith("db.sqlite3")
    if connection.vendor == "postgresql":
        assert name.startswith("test_")


@pytest.mark.skipif(
    expected_vendor() != "postgresql", reason="TOAST compression is PostgreSQL's"
)
def test_large_json_columns_are_compressed_with_lz4_on_postgresql() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attrelid::regclass::text, attname, attcompression "
            "FROM pg_attribute WHERE (attrelid, attname) IN "
            "(('sagents_agent_states'::regclass, 'state_data'), "
            "('sagents_display_messages'::regclass, 'content'))"
        )
        assert sorted(cursor.fetchall()) == [
            ("sagents_agent_states", "state_data", "l"),
            ("sagents_display_messages", "content", "l"),
        ]
