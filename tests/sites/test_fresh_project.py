"""The README's "Add it to your Django project", followed as written.

A fresh project made by ``django-admin startproject`` in a temporary folder gets
every step of that section, read from the README's code blocks (each preceded by a
``<!-- readme-test: ... -->`` marker saying what to do with it): shell commands run,
Python is appended to or replaces the named file, or is fed to ``manage.py shell``.
Only the ``pip install`` line is checked instead of run (this machine installs
nothing): the app comes from this repository through ``PYTHONPATH``, and the test
checks that the line names the extra that gives the full stack. ``createsuperuser``
asks for a password at a terminal; the test gives it ``--noinput`` and the password
in ``DJANGO_SUPERUSER_PASSWORD``, Django's way for scripts. The turn runs on the
offline demo model; then alice signs in, sees it, and signs out.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.generator.helpers import REPO

SECTION = "## Add it to your Django project"
MARKED_BLOCK = re.compile(
    r"<!-- readme-test: (?P<action>\w+)(?: (?P<path>\S+))? -->\n"
    r"[ ]*```(?P<language>\w+)\n(?P<code>.*?)\n[ ]*```",
    re.DOTALL,
)

# What the test looks at once the README's steps are done (its own code, not the
# README's): the stored turn, the page, the admin, the ASGI application.
FINDINGS = """\
import json

from django.contrib import admin
from django.test import Client

from mysite.asgi import application
from sagents_django import services
from sagents_django.models import StoredFile
from sagents_django.scope import Scope

from django.contrib.auth import get_user_model

scope = Scope.for_user(get_user_model().objects.get(username="alice"))
[conversation] = services.list_conversations(scope)
state = services.load_agent_state(scope, conversation.pk)["state"]
page = Client().get("/agents/", HTTP_HOST="localhost")
browser = Client(HTTP_HOST="localhost")
sign_in = browser.get("/accounts/login/?next=/agents/")
signed_in = browser.post(
    "/accounts/login/",
    {"username": "alice", "password": PASSWORD, "next": "/agents/"},
    follow=True,
)
signed_out = browser.post("/accounts/logout/")
print(json.dumps({
    "title": state["metadata"].get("conversation_title"),
    "todos": [t.content for t in services.load_todos(scope, conversation.pk)],
    "files": list(StoredFile.objects.values_list("path", flat=True)),
    "display": len(services.load_display_messages(scope, conversation.pk)),
    "page": [page.status_code, "It works" in page.content.decode()],
    "sign_in_link": 'href="/accounts/login/?next=/agents/"' in page.content.decode(),
    "sign_in": [sign_in.status_code, "sg-auth" in sign_in.content.decode()],
    "signed_in": [signed_in.redirect_chain, "First steps" in signed_in.content.decode()],
    "signed_out": [signed_out.status_code, "Signed out" in signed_out.content.decode()],
    "admin": admin.site.is_registered(type(conversation)),
    "asgi": [type(application).__name__,
             sorted(application.application.application_mapping)],
    "ready": Client().get("/agents/ready/", HTTP_HOST="localhost").json()["ready"],
}))
"""
PASSWORD = "a picnic on Saturday"


@dataclass(frozen=True)
class Step:
    action: str
    path: str | None
    language: str
    code: str


def readme_steps() -> list[Step]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return [
        Step(
            m["action"],
            m["path"],
            m["language"],
            textwrap.dedent(m["code"]) + "\n",
        )
        for m in MARKED_BLOCK.finditer(section)
    ]


def environment(home: Path) -> dict[str, str]:
    """A shell with this virtualenv's commands first and the app from this
    repository; no project settings inherited from the test run."""
    keep = {k: v for k, v in os.environ.items() if k in ("LANG", "LC_ALL", "TZ")}
    return {
        **keep,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin:/bin"]),
        "PYTHONPATH": str(REPO),
        "HOME": str(home),
        "SAGENTS_DEMO_DELAY_MS": "0",
        "DJANGO_SUPERUSER_PASSWORD": PASSWORD,
    }


def sh(command: str, cwd: Path, env: dict[str, str], stdin: str | None = None) -> str:
    done = subprocess.run(
        command,
        shell=True,
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_section_marks_every_step_it_shows() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split(SECTION, 1)[1].split("\n## ", 1)[0]
    steps = readme_steps()

    assert section.count("```") == 2 * len(steps)
    assert [s.action for s in steps] == [
        "install",
        "run",
        "append",
        "append",
        "replace",
        "run",
        "append",
        "run",
        "shell",
    ]


def test_the_install_line_names_the_extra_that_gives_the_full_stack() -> None:
    [install] = [s for s in readme_steps() if s.action == "install"]
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg", encoding="utf-8")

    assert install.code == 'pip install "sagents-django[full]"\n'
    assert config["metadata"]["name"] == "sagents-django"
    assert "full" in config["options.extras_require"]


@pytest.mark.timeout(600)
def test_a_fresh_project_following_the_readme_runs_a_turn(tmp_path: Path) -> None:
    env = environment(tmp_path)
    cwd = tmp_path
    printed = ""
    for step in readme_steps():
        if step.action == "install":
            continue  # checked above; the app comes from PYTHONPATH
        if step.action == "run":
            for line in step.code.splitlines():
                if line.startswith("cd "):
                    cwd = cwd / line[3:].strip()
                elif line.startswith("python manage.py createsuperuser"):
                    sh(f"{line} --noinput", cwd, env)  # the password: env
                elif line.strip():
                    sh(line, cwd, env)
        elif step.action in ("append", "replace"):
            assert step.path is not None
            target = cwd / step.path
            before = target.read_text() + "\n" if step.action == "append" else ""
            target.write_text(before + step.code)
        elif step.action == "shell":
            printed += sh("python manage.py shell", cwd, env, stdin=step.code)
        else:
            pytest.fail(f"unknown README step {step.action!r}")

    assert cwd == tmp_path / "mysite"
    # The site has no base.html of its own; the app's pages render with theirs.
    assert not list(cwd.rglob("base.html"))
    # print(result.status, result.last_message.text), after the shell's own notice.
    assert "\ncompleted Done! You asked: “Plan a picnic for Saturday”." in printed
    assert "(I am the offline demo model: no API key needed.)" in printed
    found = json.loads(
        sh(
            "python manage.py shell",
            cwd,
            env,
            stdin=f"PASSWORD = {PASSWORD!r}\n{FINDINGS}",
        )
        .strip()
        .splitlines()[-1]
    )
    assert found["title"] == "Plan a picnic for Saturday"
    assert found["todos"] == []  # all three done: the list clears itself
    assert found["files"] == ["/notes", "/notes/demo.md"]
    assert found["display"] > 4
    assert found["page"] == [200, True]
    assert found["sign_in_link"] is True
    assert found["sign_in"] == [200, True]
    assert found["signed_in"] == [[["/agents/", 302]], True]
    assert found["signed_out"] == [200, True]
    assert found["admin"] is True
    assert found["asgi"] == ["DrainOnSigterm", ["http", "websocket"]]
    assert found["ready"] is True
