"""The hosting project as a site in a folder of its own: its environment, its
database migrated, Python run against it, and a signed-in user with a
conversation (for tests that talk to it from outside, as a browser or a socket
client would)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PASSWORD = "correct horse battery staple"

SIGNED_IN = """
import json
import django
django.setup()
from django.contrib.auth import get_user_model
from django.test import Client
from sagents_django import services
from sagents_django.scope import Scope

user = get_user_model().objects.create_user(username=USERNAME, password=PASSWORD)
conversation = services.create_conversation(Scope.for_user(user))
client = Client()
client.force_login(user)
print(json.dumps({
    "session": client.cookies["sessionid"].value,
    "conversation": str(conversation.pk),
}))
"""


def site_env(
    folder: Path, settings: str = "project.settings", **extra: str
) -> dict[str, str]:
    """The environment of a site process: the embedded stack on a SQLite file in
    ``folder``, offline (no cost map or model hub downloads); ``extra`` overrides."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(folder),
        "PYTHONPATH": str(REPO),
        "DJANGO_SETTINGS_MODULE": settings,
        "DATABASE_URL": f"sqlite:///{folder / 'db.sqlite3'}",
        "SAGENTS_EXECUTOR": "inline",
        "SAGENTS_DRAIN_SECONDS": "0",  # a test's server stops without a drain
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "HF_HUB_OFFLINE": "1",
        **extra,
    }


def run_python(env: dict[str, str], *args: str) -> str:
    """``python *args`` in the repository with the site's environment; its output."""
    done = subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def migrate(env: dict[str, str]) -> None:
    run_python(env, "manage.py", "migrate", "--noinput", "-v", "0")


def signed_in(env: dict[str, str], username: str = "alice") -> dict[str, Any]:
    """A user (password ``PASSWORD``), a conversation of theirs and a signed-in
    session: ``{"session": <cookie>, "conversation": <id>}``."""
    code = f"USERNAME = {username!r}\nPASSWORD = {PASSWORD!r}\n{SIGNED_IN}"
    made: dict[str, Any] = json.loads(
        run_python(env, "-c", code).strip().splitlines()[-1]
    )
    return made
