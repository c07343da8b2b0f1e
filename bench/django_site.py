"""Django for a benchmark: the project's settings on a database of its own.

``setup_django("postgres", url)`` points Django at ``url`` and names the test
database after it (``test_`` + its name, so runs against two URLs never share
one); ``setup_django("sqlite", ...)`` uses a temporary file, as a site would (an
in-memory database would flatter it). Then ``setup_databases`` creates and
migrates it and ``teardown_databases`` drops it; the site's own database is never
opened.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def setup_django(database: str, postgres_url: str) -> None:
    sys.path.insert(0, str(REPO))
    os.environ["DJANGO_SETTINGS_MODULE"] = "project.settings"
    tmp = tempfile.mkdtemp(prefix="sagents-bench-")
    os.environ["DATABASE_URL"] = (
        postgres_url if database == "postgres" else f"sqlite:///{tmp}/unused.sqlite3"
    )
    import django
    from django.conf import settings

    settings.DATABASES["default"].setdefault("TEST", {})
    if database == "sqlite":
        settings.DATABASES["default"]["TEST"]["NAME"] = f"{tmp}/bench.sqlite3"
    else:
        name = settings.DATABASES["default"]["NAME"]
        settings.DATABASES["default"]["TEST"]["NAME"] = f"test_{name}"
    settings.DEBUG = False
    django.setup()
