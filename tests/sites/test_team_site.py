"""The generator in a fresh Django project whose conversations belong to teams.

The project is written into a temporary folder: a ``teams`` app (teams with member
users) and settings without the generated app, what a host has when it runs
``sagents_setup``. The settings the command prints are then added as printed; the
generated Scope is tried as written (it refuses everyone), filled in, and the site
runs conversations through the generated modules. Everything Django runs in
subprocesses: the conversation model must be swapped before the app registry
loads, which only a fresh interpreter allows. The agent talks to the fake OpenAI
server this process starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.docs import blocks
from tests.fakes.openai_server import FakeOpenAIServer, reply, tool_call
from tests.generator.helpers import REPO, ruff_problems

SETTINGS_BEFORE = '''\
"""The host's settings before sagents_setup: no generated app yet."""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = "team-site-test"
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "sagents_django",
    "teams",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": BASE_DIR / "db.sqlite3",
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
SAGENTS = {
    "MODEL": "openai/fake-model",
    "MODEL_PARAMS": {"api_base": os.environ.get("FAKE_OPENAI_BASE_URL", ""), "api_key": "test"},
}
'''

TEAM_MODELS = """\
from django.conf import settings
from django.db import models


class Team(models.Model):
    name = models.CharField(max_length=100)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="teams")
"""

TEAM_MIGRATION = """\
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True
    dependencies = [migrations.swappable_dependency(settings.AUTH_USER_MODEL)]
    operations = [
        migrations.CreateModel(
            name="Team",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=100)),
                ("members", models.ManyToManyField(related_name="teams", to=settings.AUTH_USER_MODEL)),
            ],
        ),
    ]
"""

FILLED_IN = "return user.teams.first()"

# How a script starts once the settings are in place: migrate and check, then alice,
# a member of the team Blue.
MIGRATED = """\
import json

import django

django.setup()

from django.contrib.auth import get_user_model
from django.core.management import call_command

call_command("migrate", verbosity=0)
call_command("check", fail_level="WARNING")
call_command("makemigrations", "--check", "--dry-run", verbosity=0)

from teams.models import Team

alice = get_user_model().objects.create_user("alice")
blue = Team.objects.create(name="Blue")
blue.members.add(alice)
"""

# With the generated Scope as written: what it lets users do.
UNFILLED = (
    MIGRATED
    + """
from django.contrib import admin
from django.core.exceptions import PermissionDenied

from hostsite.agents.models import Conversation
from hostsite.agents.scope import TeamScope
from sagents_django import services
from sagents_django.scope import Scope, get_scope

# Made by hand for the team: the generated scope must still not show it.
services.create_conversation(Scope(user=alice, owner=blue), title="Offsite")

class Request:
    user = alice

scope = get_scope(Request())
try:
    services.create_conversation(scope, title="Mine")
    created = "created"
except PermissionDenied as exc:
    created = str(exc)
print(json.dumps({
    "scope_class": type(scope).__name__,
    "owner": scope.owner,
    "listed": len(services.list_conversations(scope)),
    "created": created,
    "admin": admin.site.is_registered(Conversation),
}))
"""
)

# With the Scope filled in: two sessions of one conversation through the generated
# modules, and other users' views of it; prints one JSON line of findings.
FILLED = """\
import asyncio
import json

import django

django.setup()

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied

from hostsite.agents import factory
from sagents_django import services
from hostsite.agents.coordinator import start_conversation_session
from hostsite.agents.models import Conversation
from hostsite.agents.scope import TeamScope
from sagents_django.core.testing import ScriptedModel
from sagents_django.exceptions import NotFound
from sagents_django.models import AgentState
from teams.models import Team

# Titles from a model of their own (the factory's override point): a title call
# runs beside the agent's first call and would take a reply scripted for the agent.
factory.build_title_model = lambda: ScriptedModel(["Offsite planning"])

users = get_user_model().objects
alice = users.get(username="alice")
bob, carol = users.create_user("bob"), users.create_user("carol")
blue = Team.objects.get(name="Blue")
red = Team.objects.create(name="Red")
red.members.add(bob)
scope = TeamScope.for_user(alice)
red_scope, no_team = TeamScope.for_user(bob), TeamScope.for_user(carol)
[conversation] = services.list_conversations(scope)

session = start_conversation_session(
    conversation.pk, scope=scope, filesystem_scope=("team", blue.pk)
)
first = asyncio.run(session.arun_turn("Plan our offsite"))
reloaded = start_conversation_session(str(conversation.pk), scope=scope)
reloaded_roles = [m.role for m in reloaded.state.messages]
second = reloaded.run_turn("Any news?")
# A turn that pauses for approval: resumed by another process (RESUME).
factory.INTERRUPT_ON = {"write_file": True}
paused = reloaded.run_turn("Note the venue")

try:
    start_conversation_session(conversation.pk, scope=red_scope)
    red_session = "opened"
except NotFound as exc:
    red_session = str(exc)
try:
    services.create_conversation(no_team, title="Mine")
    no_team_created = "created"
except PermissionDenied:
    no_team_created = "refused"

rows = services.load_display_messages(scope, conversation.pk)
state = services.load_agent_state(scope, conversation.pk)["state"]
print(json.dumps({
    "first": [first.status, first.last_message.text],
    "second": [second.status, second.last_message.text],
    "paused": [paused.status, paused.interrupt_data["action_requests"][0]["tool_name"]],
    "reloaded_roles": reloaded_roles,
    "stored_roles": [m["role"] for m in state["messages"]],
    "title": state["metadata"].get("conversation_title"),
    "todos": [t.content for t in services.load_todos(scope, conversation.pk)],
    "display": [[r.message_type, r.content_type, r.status] for r in rows],
    "conversation_owner": Conversation.objects.get().team_id == blue.pk,
    "table": Conversation._meta.db_table,
    "state_points_at": AgentState._meta.get_field("conversation").related_model._meta.label,
    "red_session": red_session,
    "red_get": services.get_conversation(red_scope, conversation.pk),
    "red_display": len(services.load_display_messages(red_scope, conversation.pk)),
    "red_list": len(services.list_conversations(red_scope)),
    "no_team_list": len(services.list_conversations(no_team)),
    "no_team_created": no_team_created,
}))
"""

# Another process, later: the paused turn is approved and finishes.
RESUME = """\
import json

import django

django.setup()

from django.contrib.auth import get_user_model

from hostsite.agents import factory
from sagents_django import services
from hostsite.agents.coordinator import start_conversation_session
from hostsite.agents.scope import TeamScope

factory.INTERRUPT_ON = {"write_file": True}
scope = TeamScope.for_user(get_user_model().objects.get(username="alice"))
[conversation] = services.list_conversations(scope)
session = start_conversation_session(conversation.pk, scope=scope)
waiting = session.state.interrupt_data is not None
done = session.resume([{"type": "approve"}])
print(json.dumps({
    "waiting": waiting,
    "done": [done.status, done.last_message.text],
    "interrupt": services.load_agent_state(scope, conversation.pk)["state"][
        "interrupt_data"
    ],
}))
"""

# A site with its own scope class (which leaves owners to Scope) and a table prefix:
# what the database holds once migrated, and which scope the app builds.
PREFIXED = (
    MIGRATED
    + """
from django.db import connection

from accounts.scope import SiteScope
from sagents_django import services
from sagents_django.scope import scope_class

scope = scope_class().for_user(alice)
conversation = services.create_conversation(scope, title="Offsite")
services.append_text_message(scope, conversation.pk, "user", "Hello")
with connection.cursor() as cursor:
    cursor.execute("SELECT team_id FROM chat_conversations")
    owners = [row[0] for row in cursor.fetchall()]
    relations = connection.introspection.get_relations(
        cursor, "sagents_display_messages"
    )
    constraints = connection.introspection.get_constraints(cursor, "chat_conversations")
print(json.dumps({
    "tables": sorted(
        t for t in connection.introspection.table_names()
        if t.startswith(("sagents_", "chat_")) or "conversations" in t
    ),
    "owners": owners == [blue.pk],
    "display_points_at": relations["conversation_id"][1],
    "index": "chat_conv_team_recent" in constraints,
    "scope": [type(scope).__name__, isinstance(scope, SiteScope), scope.owner == blue],
}))
"""
)

SITE_SCOPE = """\
from sagents_django.scope import Scope


class SiteScope(Scope):
    \"\"\"The site's scope: its own methods, owners left to Scope.\"\"\"
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


def findings(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    return json.loads(done.stdout.strip().splitlines()[-1])


def settings_to_add(output: str) -> list[str]:
    """The lines sagents_setup prints under "Add to your settings:"."""
    block = output.split("Add to your settings:\n", 1)[1].split("\n\n", 1)[0]
    return [line.removeprefix("    ") for line in block.splitlines()]


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A fresh project: the host package, a teams app, the settings before setup."""
    write(tmp_path / "hostsite" / "__init__.py", "")
    write(tmp_path / "hostsite" / "settings_before.py", SETTINGS_BEFORE)
    write(tmp_path / "teams" / "__init__.py", "")
    write(tmp_path / "teams" / "models.py", TEAM_MODELS)
    write(tmp_path / "teams" / "migrations" / "__init__.py", "")
    write(tmp_path / "teams" / "migrations" / "0001_initial.py", TEAM_MIGRATION)
    return tmp_path


def add_printed_settings(host: Path, output: str) -> list[str]:
    """Settings as the command says: its lines after the host's own."""
    lines = settings_to_add(output)
    body = "\n".join(lines)
    write(
        host / "hostsite" / "settings.py",
        f"from hostsite.settings_before import *  # noqa: F403\n\n{body}\n",
    )
    return lines


@pytest.mark.timeout(300)
def test_a_team_owned_site_migrates_and_runs_conversations_through_the_output(
    host: Path,
) -> None:
    setup = run(host, "hostsite.settings_before", SETUP_TEAMS)
    assert f"Wrote 10 files in {host}:" in setup.stdout
    assert add_printed_settings(host, setup.stdout) == [
        'INSTALLED_APPS += ["hostsite.agents"]',
        "# Before the first migrate: sagents_django's tables refer to this model.",
        'SAGENTS_DJANGO_CONVERSATION_MODEL = "agents.Conversation"',
        'SAGENTS["FACTORY"] = "hostsite.agents.factory.build_agent"',
        'SAGENTS["AGENT_PERSISTENCE"] = '
        '"hostsite.agents.agent_persistence.AgentPersistence"',
        'SAGENTS["DISPLAY_PERSISTENCE"] = '
        '"hostsite.agents.display_message_persistence.DisplayMessagePersistence"',
        'SAGENTS["SCOPE"] = "hostsite.agents.scope.TeamScope"',
    ]
    package = host / "hostsite" / "agents"
    generated = sorted(
        str(p.relative_to(host)) for p in package.rglob("*.py") if p.is_file()
    )
    assert len(generated) == 10
    assert ruff_problems(host, generated) == ""

    # As generated, the scope refuses: a member of a team sees and creates nothing.
    write(host / "unfilled.py", UNFILLED)
    unfilled = findings(run(host, "hostsite.settings", ["unfilled.py"]))
    assert unfilled == {
        "scope_class": "TeamScope",
        "owner": None,
        "listed": 0,
        "created": "This scope owns nothing (its resolve_owner found no owner for "
        "the user), so it cannot create conversations.",
        "admin": True,
    }

    scope = package / "scope.py"
    scope.write_text(scope.read_text().replace("return None", FILLED_IN, 1))
    write(host / "filled.py", FILLED)
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
            reply(
                tool_calls=[
                    tool_call(
                        "write_file",
                        {"file_path": "/venue.md", "content": "Lakeside hall"},
                    )
                ]
            ),
            reply("Noted the venue."),
        )
        done = run(
            host,
            "hostsite.settings",
            ["filled.py"],
            FAKE_OPENAI_BASE_URL=server.base_url,
        )
        write(host / "resume.py", RESUME)
        resumed = findings(
            run(
                host,
                "hostsite.settings",
                ["resume.py"],
                FAKE_OPENAI_BASE_URL=server.base_url,
            )
        )
        requests = list(server.requests)
    found = findings(done)

    assert found["first"] == ["completed", "Planned: book a venue."]
    assert found["reloaded_roles"] == ["user", "assistant", "tool", "assistant"]
    assert found["second"] == ["completed", "No news yet."]
    assert found["paused"] == ["interrupted", "write_file"]
    assert resumed == {
        "waiting": True,
        "done": ["completed", "Noted the venue."],
        "interrupt": None,
    }
    assert found["stored_roles"] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert found["title"] == "Offsite planning"
    assert found["todos"] == ["Book a venue"]
    assert found["display"] == [
        ["user", "text", "completed"],
        ["assistant", "text", "completed"],
        ["assistant", "tool_call", "completed"],
        ["tool", "tool_result", "completed"],
        ["assistant", "text", "completed"],
        ["user", "text", "completed"],
        ["assistant", "text", "completed"],
        ["user", "text", "completed"],
        ["assistant", "tool_call", "pending"],  # as the first process left it
    ]
    assert found["conversation_owner"] is True
    assert found["table"] == "sagents_conversations"
    assert found["state_points_at"] == "agents.Conversation"
    assert found["red_session"].endswith("was not found.")
    assert found["red_get"] is None
    assert found["red_display"] == found["red_list"] == 0
    assert found["no_team_list"] == 0
    assert found["no_team_created"] == "refused"
    # The second session continued the conversation: its model call carried the
    # whole history restored from the database.
    assert len(requests) == 5
    history = [m["role"] for m in requests[2].messages if m["role"] != "system"]
    assert history == ["user", "assistant", "tool", "assistant", "user"]
    assert requests[2].messages[1]["content"] == "Plan our offsite"


def test_the_generated_migration_runs_before_sagents_djangos_own(host: Path) -> None:
    setup = run(
        host,
        "hostsite.settings_before",
        [*SETUP_TEAMS, "--owner-field", "team_id"],
    )
    add_printed_settings(host, setup.stdout)
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


@pytest.mark.timeout(300)
def test_a_prefixed_site_migrates_into_tables_named_so_with_its_scope_extended(
    host: Path,
) -> None:
    write(host / "accounts" / "__init__.py", "")
    write(host / "accounts" / "scope.py", SITE_SCOPE)
    setup = run(
        host,
        "hostsite.settings_before",
        [
            *SETUP_TEAMS,
            *("--table-prefix", "chat_"),
            *("--scope", "accounts.scope.SiteScope"),
        ],
    )
    assert add_printed_settings(host, setup.stdout)[-1] == (
        'SAGENTS["SCOPE"] = "hostsite.agents.scope.TeamScope"'
    )
    scope = host / "hostsite" / "agents" / "scope.py"
    assert "class TeamScope(SiteScope):" in scope.read_text()
    scope.write_text(scope.read_text().replace("return None", FILLED_IN, 1))
    write(host / "prefixed.py", PREFIXED)

    found = findings(run(host, "hostsite.settings", ["prefixed.py"]))

    # The one table the generated app creates has the prefix; sagents_django's keep
    # the names the generator page lists, and point at it.
    [shown] = [
        block for block in blocks("docs/generator.md") if block.spec == "library tables"
    ]
    library = shown.code.split()
    assert found["tables"] == sorted(["chat_conversations", *library])
    assert found["display_points_at"] == "chat_conversations"
    assert found["index"] is True
    assert found["owners"] is True
    # The app builds its scopes with the generated subclass of the site's scope.
    assert found["scope"] == ["TeamScope", True, True]
