"""The benchmarks' own databases, made by Django's test-database machinery.

A bench that measures the database runs once per database, in a process of its own
(Django's settings are fixed once per process). On PostgreSQL it creates ``test_`` +
the database ``postgres_url`` names, so runs against two URLs never share one; on
SQLite a file in a temporary folder, as a site would use (an in-memory database would
flatter it). Both are migrated, and dropped at the end; ``db.sqlite3`` is never
opened.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@contextmanager
def bench_database(
    database: str,
    *,
    postgres_url: str,
    settings_module: str = "project.settings",
    postgres_name: str | None = None,
) -> Iterator[str]:
    """Django set up on a database of the bench's own (``"sqlite"`` or
    ``"postgres"``), for the ``with`` block; yields a temporary folder.
    ``postgres_name`` replaces the ``test_`` + name of the URL's database."""
    sys.path.insert(0, str(REPO))
    os.environ["DJANGO_SETTINGS_MODULE"] = settings_module
    tmp = tempfile.mkdtemp(prefix="sagents-bench-")
    os.environ["DATABASE_URL"] = (
        postgres_url if database == "postgres" else f"sqlite:///{tmp}/unused.sqlite3"
    )
    import django
    from django.conf import settings

    test = settings.DATABASES["default"].setdefault("TEST", {})
    if database == "sqlite":
        test["NAME"] = f"{tmp}/bench.sqlite3"
    else:
        name = settings.DATABASES["default"]["NAME"]
        test["NAME"] = postgres_name or f"test_{name}"
    settings.DEBUG = False
    django.setup()

    from django.test.utils import setup_databases, teardown_databases

    old = setup_databases(verbosity=0, interactive=False)
    try:
        yield tmp
    finally:
        teardown_databases(old, verbosity=0)


def database_options(description: str, script: str) -> argparse.Namespace | None:
    """``--database sqlite|postgres|both``, ``--quick`` and ``--runs``. For
    ``both``, ``script`` runs once per database, each in a process of its own
    (Django's settings are fixed once per process), and None is returned."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--database", choices=("sqlite", "postgres", "both"), default="both"
    )
    parser.add_argument("--quick", action="store_true", help="a fast smoke run")
    parser.add_argument("--runs", type=int, default=None, help="runs per figure")
    options = parser.parse_args()
    if options.database != "both":
        return options
    for database in ("postgres", "sqlite"):
        args = [sys.executable, script, "--database", database]
        args += ["--quick"] if options.quick else []
        args += ["--runs", str(options.runs)] if options.runs else []
        subprocess.run(args, check=True, cwd=REPO)
    return None
