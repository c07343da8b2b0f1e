"""The generator in a fresh Django project whose conversations belong to teams.

The project is written into a temporary folder: a ``teams`` app with its migration,
settings without the generated app (what a host has when it runs ``sagents_setup``)
and settings with it (installed, and named by ``SAGENTS_DJANGO_CONVERSATION_MODEL``).
Everything Django runs in subprocesses: the conversation model must be swapped
before the app registry loads, which only a fresh interpreter allows. The agent
talks to the fake OpenAI server this process starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAIServer, reply, tool_call

from .helpers import REPO, ruff_problems

SETTINGS_BEFORE = '''\
"""The host's settings before sagents_setup: no generated app yet."""

import os
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = "fresh-project-test"
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "sagents_django",
    "teams",
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": BASE_DIR / "db.sqlite3",
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
SAGENTS = {
    "MODEL": "openai/fake-model",
    "MODEL_PARAMS": {"api_base": os.environ.get("FAKE_OPENAI_BASE_URL", ""), "api_key": "test"},
}
'''

SETTINGS = """\
from hostsite.settings_before import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "hostsite.agents"]  # noqa: F405
SAGENTS_DJANGO_CONVERSATION_MODEL = "agents.Conversation"
# The default Scope refuses team owners (system check sagents_django.E100).
SAGENTS = {**SAGENTS, "SCOPE": "teams.scope.TeamScope"}  # noqa: F405
"""

TEAM_SCOPE = """\
from dataclasses import dataclass

from sagents_django.scope import Scope


@dataclass(frozen=True, kw_only=True)
class TeamScope(Scope):
    @classmethod
    def resolve_owner(cls, user):
        return None  # this test site has no team membership
"""

TEAM_MODELS = """\
from django.db import models


class Team(models.Model):
    name = models.CharField(max_length=100)
"""

TEAM_MIGRATION = """\
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True
    dependencies = []
    operations = [
        migrations.CreateModel(
            name="Team",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=100)),
            ],
        ),
    ]
"""

# Runs in the subprocess with the full settings: migrate, then two sessions of one
# conversation through the generated modules; prints one JSON line of findings.
SCRIPT = """\
import asyncio
import json

import django

django.setup()

from django.core.management import call_command

call_command("migrate", verbosity=0)
call_command("makemigrations", "--check", "--dry-run", verbosity=0)

from hostsite.agents import conversations
from hostsite.agents.coordinator import start_conversation_session
from hostsite.agents.models import Conversation
from sagents_django.exceptions import NotFound
from sagents_django.models import AgentState
from sagents_django.scope import Scope
from teams.models import Team

blue = Team.objects.create(name="Blue")
red = Team.objects.create(name="Red")
scope, red_scope = Scope(owner=blue), Scope(owner=red)
conversation = conversations.create_conversation(scope, title="Offsite")

session = start_conversation_session(
    conversation.pk, scope=scope, filesystem_scope=("team", blue.pk)
)
first = asyncio.run(session.run_turn("Plan our offsite"))
reloaded = start_conversation_session(str(conversation.pk), scope=scope)
reloaded_roles = [m.role for m in reloaded.state.messages]
second = reloaded.run_turn_sync("Any news?")

try:
    start_conversation_session(conversation.pk, scope=red_scope)
    red_session = "opened"
except NotFound as exc:
    red_session = str(exc)

rows = conversations.load_display_messages(scope, conversation.pk)
print(json.dumps({
    "first": [first.status, first.last_message.text],
    "second": [second.status, second.last_message.text],
    "reloaded_roles": reloaded_roles,
    "stored_roles": [
        m["role"]
        for m in conversations.load_agent_state(scope, conversation.pk)["state"]["messages"]
    ],
    "todos": [t.content for t in conversations.load_todos(scope, conversation.pk)],
    "display": [[r.message_type, r.content_type, r.status] for r in rows],
    "conversation_owner": Conversation.objects.get().team_id == blue.pk,
    "table": Conversation._meta.db_table,
    "state_points_at": AgentState._meta.get_field("conversation").related_model._meta.label,
    "red_session": red_session,
    "red_get": conversations.get_conversation(red_scope, conversation.pk),
    "red_display": len(conversations.load_display_messages(red_scope, conversation.pk)),
    "red_list": len(conversations.list_conversations(red_scope)),
}))
"""

SETUP_TEAMS = [
    *("-m", "django", "sagents_setup", "hostsite.agents"),
    *("--owner-type", "team", "--owner-model", "teams.Team"),
]


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def run(
    root: Path, settings: str, args: list[str], **env: str
) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), str(REPO)]),
        "DJANGO_SETTINGS_MODULE": settings,
        **env,
    }
    environment.pop("DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, *args],
        cwd=root,
        env=environment,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A fresh project: the host package, a teams app, settings before and after."""
    write(tmp_path / "hostsite" / "__init__.py", "")
    write(tmp_path / "hostsite" / "settings_before.py", SETTINGS_BEFORE)
    write(tmp_path / "hostsite" / "settings.py", SETTINGS)
    write(tmp_path / "teams" / "__init__.py", "")
    write(tmp_path / "teams" / "models.py", TEAM_MODELS)
    write(tmp_path / "teams" / "scope.py", TEAM_SCOPE)
    write(tmp_path / "teams" / "migrations" / "__init__.py", "")
    write(tmp_path / "teams" / "migrations" / "0001_initial.py", TEAM_MIGRATION)
    return tmp_path


def test_a_team_owned_site_migrates_and_runs_conversations_through_the_output(
    host: Path,
) -> None:
    setup = run(
        host,
        "hostsite.settings_before",
        SETUP_TEAMS,
    )
    assert f"Wrote 9 files in {host}:" in setup.stdout
    assert 'SAGENTS_DJANGO_CONVERSATION_MODEL = "agents.Conversation"' in setup.stdout
    package = host / "hostsite" / "agents"
    generated = sorted(
        str(p.relative_to(host)) for p in package.rglob("*.py") if p.is_file()
    )
    assert len(generated) == 9
    assert ruff_problems(host, generated) == ""

    write(host / "run_conversation.py", SCRIPT)
    with FakeOpenAIServer() as server:
        server.script(
            reply(
                "Let me plan.",
                tool_calls=[
                    tool_call(
                        "write_todos",
                        {"todos": [{"content": "Book a venue", "status": "pending"}]},
                    )
                ],
            ),
            reply("Planned: book a venue.", chunks=3),
            reply("No news yet."),
        )
        done = run(
            host,
            "hostsite.settings",
            ["run_conversation.py"],
            FAKE_OPENAI_BASE_URL=server.base_url,
        )
        requests = list(server.requests)
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])

    assert found["first"] == ["completed", "Planned: book a venue."]
    assert found["reloaded_roles"] == ["user", "assistant", "tool", "assistant"]
    assert found["second"] == ["completed", "No news yet."]
    assert found["stored_roles"] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    assert found["todos"] == ["Book a venue"]
    assert found["display"] == [
        ["user", "text", "completed"],
        ["assistant", "text", "completed"],
        ["assistant", "tool_call", "completed"],
        ["tool", "tool_result", "completed"],
        ["assistant", "text", "completed"],
        ["user", "text", "completed"],
        ["assistant", "text", "completed"],
    ]
    assert found["conversation_owner"] is True
    assert found["table"] == "sagents_conversations"
    assert found["state_points_at"] == "agents.Conversation"
    assert found["red_session"].endswith("was not found.")
    assert found["red_get"] is None
    assert found["red_display"] == found["red_list"] == 0
    # The second session continued the conversation: its model call carried the
    # whole history restored from the database.
    assert len(requests) == 3
    history = [m["role"] for m in requests[2].messages if m["role"] != "system"]
    assert history == ["user", "assistant", "tool", "assistant", "user"]
    assert requests[2].messages[1]["content"] == "Plan our offsite"


def test_the_generated_migration_runs_before_sagents_djangos_own(host: Path) -> None:
    run(
        host,
        "hostsite.settings_before",
        [*SETUP_TEAMS, "--owner-field", "team_id"],
    )
    plan = run(host, "hostsite.settings", ["-m", "django", "migrate", "--plan"])
    order = [
        line.strip()
        for line in plan.stdout.splitlines()
        if line.strip().startswith(("teams.", "agents.", "sagents_django."))
    ]

    assert order.index("teams.0001_initial") < order.index("agents.0001_initial")
    assert order.index("agents.0001_initial") < order.index(
        "sagents_django.0001_initial"
    )
    models = (host / "hostsite" / "agents" / "models.py").read_text()
    assert 'OWNER_FIELD = "team"' in models
