"""A site whose conversations belong to teams: the default Scope refuses to guess.

The case the issue found: with a team-owned conversation model and the default
``Scope``, a user's id was used as a team's id, so a user in no team listed team 3's
conversations because his own id is 3. The conversation model must be swapped before
the app registry loads, which only a fresh interpreter allows: the project is
written into a temporary folder (a ``teams`` app holding ``Team`` and the team-owned
conversation model, and a ``TeamScope``) and everything Django runs in a subprocess
that prints one JSON line of findings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]

SETTINGS = """\
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = "team-scope-test"
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
SAGENTS_DJANGO_CONVERSATION_MODEL = "teams.Conversation"
SAGENTS = {"MODEL": "sagents/demo"}
"""

MODELS = """\
from django.conf import settings
from django.db import models

from sagents_django.models import AbstractConversation


class Team(models.Model):
    name = models.CharField(max_length=100)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="teams")


class Conversation(AbstractConversation):
    OWNER_FIELD = "team"

    team = models.ForeignKey(
        Team, on_delete=models.CASCADE, related_name="sagents_conversations"
    )

    class Meta(AbstractConversation.Meta):
        db_table = "teams_conversations"
"""

SCOPE = """\
from dataclasses import dataclass

from sagents_django.scope import Scope


@dataclass(frozen=True, kw_only=True)
class TeamScope(Scope):
    @classmethod
    def resolve_owner(cls, user):
        return user.teams.first()
"""

SCRIPT = """\
import json

import django

django.setup()

from django.contrib.auth import get_user_model
from django.core import checks
from django.core.exceptions import PermissionDenied
from django.core.management import call_command
from django.test import override_settings

call_command("makemigrations", "teams", verbosity=0)
call_command("migrate", verbosity=0)

from sagents_django import services
from sagents_django.exceptions import NotFound
from sagents_django.scope import Scope, get_scope
from teams.models import Team

User = get_user_model()


def check_ids():
    return sorted(m.id for m in checks.run_checks() if m.id.startswith("sagents"))


def attempts(scope, conversation):
    found = {
        "owner": None if scope.owner is None else repr(scope.owner),
        "list": [str(c.pk) for c in services.list_conversations(scope)],
        "get": str(services.get_conversation(scope, conversation.pk)),
        "display": len(services.load_display_messages(scope, conversation.pk)),
    }
    for name, call in {
        "create": lambda: services.create_conversation(scope, title="mine?"),
        "update": lambda: services.update_conversation(
            scope, conversation.pk, title="taken"
        ),
        "append": lambda: services.append_text_message(
            scope, conversation.pk, "user", "hello"
        ),
    }.items():
        try:
            call()
            found[name] = "done"
        except (PermissionDenied, NotFound) as exc:
            found[name] = type(exc).__name__
    return found


# Teams 1..3 exist; the loner's user id is 3 (another user takes ids 1 and 2).
red, green, blue = (Team.objects.create(name=n) for n in ("Red", "Green", "Blue"))
member = User.objects.create_user(username="member", id=1)
User.objects.create_user(username="filler", id=2)
loner = User.objects.create_user(username="loner", id=3)
blue.members.add(member)
blues = services.create_conversation(Scope(owner=blue), title="Blue's plans")
services.append_text_message(Scope(owner=blue), blues.pk, "user", "secret plan")

findings = {
    "ids": [red.pk, green.pk, blue.pk, member.pk, loner.pk],
    "default_checks": check_ids(),
    "default_loner": attempts(Scope.for_user(loner), blues),
    "default_member": attempts(Scope.for_user(member), blues),
    "default_from_dict": attempts(Scope.from_dict({"user_id": loner.pk}), blues),
}
with override_settings(SAGENTS={"SCOPE": "teams.scope.TeamScope"}):
    class Request:
        user = loner

    findings["team_checks"] = check_ids()
    findings["team_loner"] = attempts(get_scope(Request()), blues)
    Request.user = member
    findings["team_member"] = attempts(get_scope(Request()), blues)
findings["titles"] = sorted(
    services.conversation_model().objects.values_list("title", flat=True)
)
from sagents_django.runtime.file_scopes import owner_files

findings["owner_files"] = list(owner_files(Scope(owner=blue), blues))

# The data lifecycle on a team site: a team's conversations are the team's.
from datetime import timedelta

from django.utils import timezone

from sagents_django.exceptions import InvalidInput
from sagents_django.lifecycle.erasure import erase_owner, erase_user
from sagents_django.lifecycle.retention import apply_retention

findings["erase_member"] = erase_user(member).removed.get("conversations", 0)
try:
    erase_owner(member)
    findings["erase_owner_user"] = "done"
except InvalidInput as exc:
    findings["erase_owner_user"] = str(exc)
reds = services.create_conversation(Scope(owner=red), title="Red's old plans")
services.conversation_model().objects.filter(pk=reds.pk).update(
    updated_at=timezone.now() - timedelta(days=400)
)
with override_settings(SAGENTS={"RETENTION_DAYS": 30}):
    findings["retention"] = apply_retention().conversations
erased = erase_owner(blue.pk)
findings["erase_blue"] = [
    erased.removed.get("conversations"),
    erased.removed.get("display_messages"),
]
findings["left"] = sorted(
    services.conversation_model().objects.values_list("title", flat=True)
)
print(json.dumps(findings))
"""


@pytest.fixture(scope="module")
def findings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("teamsite")
    files = {
        "hostsite/__init__.py": "",
        "hostsite/settings.py": SETTINGS,
        "teams/__init__.py": "",
        "teams/models.py": MODELS,
        "teams/scope.py": SCOPE,
        "teams/migrations/__init__.py": "",
        "script.py": SCRIPT,
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), str(REPO)]),
        "DJANGO_SETTINGS_MODULE": "hostsite.settings",
    }
    environment.pop("DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "script.py"],
        cwd=root,
        env=environment,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


REFUSED = {
    "owner": None,
    "list": [],
    "get": "None",
    "display": 0,
    "create": "PermissionDenied",
    "update": "NotFound",
    "append": "NotFound",
}


def test_the_case_is_set_up_a_user_in_no_team_has_the_id_of_a_team(
    findings: dict[str, Any],
) -> None:
    red, _green, blue, member, loner = findings["ids"]
    assert loner == blue == 3
    assert member == red == 1


def test_the_default_scope_gives_a_user_whose_id_is_a_teams_id_nothing(
    findings: dict[str, Any],
) -> None:
    assert findings["default_loner"] == REFUSED


def test_the_default_scope_refuses_even_a_team_member_it_cannot_resolve(
    findings: dict[str, Any],
) -> None:
    assert findings["default_member"] == REFUSED


def test_a_scope_rebuilt_from_json_by_the_default_class_refuses_too(
    findings: dict[str, Any],
) -> None:
    assert findings["default_from_dict"] == REFUSED


def test_the_system_check_flags_a_default_scope_over_a_team_owned_model(
    findings: dict[str, Any],
) -> None:
    assert "sagents_django.E100" in findings["default_checks"]


def test_a_team_scope_that_resolves_the_owner_passes_the_check(
    findings: dict[str, Any],
) -> None:
    assert "sagents_django.E100" not in findings["team_checks"]


def test_with_a_team_scope_a_user_with_no_team_sees_nothing_and_cannot_create(
    findings: dict[str, Any],
) -> None:
    assert findings["team_loner"] == REFUSED


def test_with_a_team_scope_a_member_uses_the_teams_conversations(
    findings: dict[str, Any],
) -> None:
    found = findings["team_member"]
    assert found["owner"] == "<Team: Team object (3)>"
    assert len(found["list"]) == 1
    assert found["get"] == "Blue's plans" and found["display"] == 1
    assert found["create"] == found["update"] == found["append"] == "done"


def test_nothing_was_written_by_the_refused_attempts(findings: dict[str, Any]) -> None:
    # Only the member's create and rename ever happened.
    assert findings["titles"] == ["mine?", "taken"]


def test_owner_files_shares_a_teams_files_across_its_conversations(
    findings: dict[str, Any],
) -> None:
    blue = findings["ids"][2]
    assert findings["owner_files"] == ["team", blue]


def test_lifecycle_on_a_team_site_erases_and_retains_by_team(
    findings: dict[str, Any],
) -> None:
    # A member's erasure leaves the team's conversations: they are the team's.
    assert findings["erase_member"] == 0
    assert "must be a teams.Team" in findings["erase_owner_user"]
    assert findings["retention"] == 1  # Red's idle one; Blue's is recent
    # Blue's: its plans and the member's own ("mine?"), with their messages.
    assert findings["erase_blue"] == [2, 2]
    assert findings["left"] == []
