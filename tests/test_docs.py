"""The README and the docs stay true: every python block runs (or says why it
cannot), the quick start does what it says, the settings reference lists every
key with its default, the README's status names only modules that exist, and the
README's links lead somewhere.

How each block is run is the HTML comment before it (``tests/docs.py``; the forms
are listed in docs/development.md). Blocks run in a new interpreter each, as a
reader would run them, never in this one."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Any

import pytest

from sagents_django.conf import DEFAULTS
from tests.docs import REPO, Block, blocks, marked, pages, python_blocks, text

NAMED = {
    "quick-start": "tests/test_docs.py",
    "socket-client": "tests/test_readme_socket.py",
    "agui-socket-bearer": "tests/test_readme_socket.py",
    "tool-permissions": "tests/test_docs_tool_access.py",
    "model-tools": "tests/test_docs_model_tools.py",
    "mcp-settings": "tests/mcp/test_readme.py",
    "mcp-factory": "tests/mcp/test_readme.py",
}
"""Blocks a test of their own runs (the test that reads each)."""

AFTER_QUICK_START = "after quick-start"


def known(block: Block) -> bool:
    spec = block.spec or ""
    if block.kind == "readme-test":
        return block.page == "README.md"  # tests/sites/test_fresh_project.py
    return (
        spec in NAMED
        or spec in ("run", "django", "settings", AFTER_QUICK_START)
        or spec.startswith("generated ")
        or (spec.startswith("skip: ") and len(spec) > len("skip: ") + 10)
    )


def run_python(
    code: str, *, django: bool = False, argv: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """``code`` in a new interpreter at the repository's root, offline demo model,
    no settings module unless ``django`` (then the tests' settings, set up)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": "/tmp",
        "PYTHONPATH": str(REPO),
        "SAGENTS_DEMO_DELAY_MS": "0",
    }
    if django:
        env["DJANGO_SETTINGS_MODULE"] = "tests.settings"
        code = "import django\ndjango.setup()\n" + code
    return subprocess.run(
        [sys.executable, "-c", code, *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# Every block is accounted for ------------------------------------------------------


def test_every_python_block_says_how_it_is_tested() -> None:
    unmarked = [str(b) for b in python_blocks() if not known(b)]

    assert unmarked == [], "add a <!-- docs-test: ... --> comment before each"


def test_each_block_a_test_runs_by_name_is_there_once() -> None:
    for name, test in NAMED.items():
        assert marked(name).code.strip(), name
        assert (REPO / test).exists(), test


def test_every_json_block_parses_unless_it_elides_with_an_ellipsis() -> None:
    for page in pages():
        for block in blocks(page):
            if block.language == "json" and "…" not in block.code:
                json.loads(block.code)


# Running them ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "block", [b for b in python_blocks() if b.spec == "run"], ids=str
)
def test_a_block_marked_run_runs_alone(block: Block) -> None:
    result = run_python(block.code)

    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    "block", [b for b in python_blocks() if b.spec == "django"], ids=str
)
def test_a_block_marked_django_runs_with_django_set_up(block: Block) -> None:
    result = run_python(block.code, django=True)

    assert result.returncode == 0, result.stderr


SETTINGS_CHECK = """
import json
import logging.config
import sys

from django.test import override_settings
from django.utils.module_loading import import_string

from sagents_django.checks import check_sagents_settings

fragment = {"SAGENTS": {}}
exec(compile(sys.argv[1], "settings fragment", "exec"), fragment)


def strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings(item)


named = [
    path
    for key, value in fragment.items()
    if key.isupper()
    for path in strings(value)
    if path.startswith("sagents_django.")
]
for path in named:
    import_string(path.replace(":", "."))
with override_settings(SAGENTS=fragment["SAGENTS"]):
    problems = [str(p) for p in check_sagents_settings()]
if "LOGGING" in fragment:
    logging.config.dictConfig(fragment["LOGGING"])
print(json.dumps({"named": named, "problems": problems}))
"""


@pytest.mark.parametrize(
    "block", [b for b in python_blocks() if b.spec == "settings"], ids=str
)
def test_a_settings_block_runs_names_importable_paths_and_passes_the_checks(
    block: Block,
) -> None:
    result = run_python(SETTINGS_CHECK, django=True, argv=(block.code,))

    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["problems"] == []


def test_the_blocks_after_the_quick_start_run_after_it_in_reading_order() -> None:
    after = [b for b in python_blocks() if b.spec == AFTER_QUICK_START]
    code = "".join(
        f"# {block}\n{block.code}" for block in [marked("quick-start"), *after]
    )

    result = run_python(code)

    assert len(after) >= 4  # models, sub-agents, cancelling, abandoning an approval
    assert result.returncode == 0, result.stderr


def test_the_core_quick_start_pauses_for_its_approval_and_completes() -> None:
    result = run_python(marked("quick-start").code)

    assert result.returncode == 0, result.stderr
    # The approval it sets up happens: the turn paused on write_file, then completed.
    assert result.stdout.startswith("approve? write_file /notes/demo.md\n")
    assert "\ncompleted " in result.stdout
    assert "offline demo model" in result.stdout


# What sagents_setup writes, as the generator page shows it ---------------------------


def generator_example() -> Any:
    """The options of the page's second command line: ``sagents_setup myapp.agents
    --owner-type team --owner-model teams.Team``."""
    from sagents_django.generator.options import SetupOptions

    assert "sagents_setup myapp.agents --owner-type team --owner-model teams.Team" in (
        text("docs/generator.md")
    )
    return SetupOptions(
        target="myapp.agents",
        owner_type="team",
        owner_field="team",
        owner_model="teams.Team",
        owner_dependency=("teams", "0001_initial"),
    )


def test_the_generator_page_shows_the_scope_module_it_writes() -> None:
    from sagents_django.generator import render

    [block] = [
        b
        for b in python_blocks()
        if (b.spec or "").startswith("generated ") and b.spec != "generated settings"
    ]
    path = (block.spec or "").removeprefix("generated ")

    assert render(generator_example())[path].endswith(block.code)


def test_the_generator_page_shows_the_settings_it_prints() -> None:
    from sagents_django.generator import settings_lines

    printed = "\n".join(settings_lines(generator_example())) + "\n"
    shown = marked("generated settings").code

    def settings(code: str) -> dict[str, Any]:
        namespace: dict[str, Any] = {"INSTALLED_APPS": [], "SAGENTS": {}}
        exec(compile(code, "settings", "exec"), namespace)
        return {k: v for k, v in namespace.items() if k.isupper()}

    assert settings(shown) == settings(printed)


# The settings reference ----------------------------------------------------------


def settings_rows() -> dict[str, list[str]]:
    """The settings page's SAGENTS table: its cells by key."""
    page = text("docs/settings.md")
    table = page.split("| key | type | default | meaning |", 1)[1].split("\n\n")[0]
    rows = {}
    for line in table.strip().splitlines()[1:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = cells[1:]
    return rows


def test_the_settings_reference_lists_every_sagents_key_with_its_default() -> None:
    rows = settings_rows()

    assert list(rows) == list(DEFAULTS)
    for key, (kind, default, meaning) in rows.items():
        python = "None" if DEFAULTS[key] is None else json.dumps(DEFAULTS[key])
        assert default == f"`{python}`", key
        assert kind and meaning, key


def test_the_settings_reference_names_the_settings_outside_sagents() -> None:
    page = text("docs/settings.md")

    from sagents_django.core.providers.demo_litellm import DEFAULT_DELAY_MS

    defaults = {
        "SAGENTS_DJANGO_CONVERSATION_MODEL": '"sagents_django.Conversation"',
        "SAGENTS_DEMO_DELAY_MS": f"{DEFAULT_DELAY_MS:g}",
    }
    for name, default in defaults.items():
        row = next(line for line in page.splitlines() if f"| `{name}` |" in line)
        assert row.split("|")[3].strip() == f"`{default}`", name


# The README ----------------------------------------------------------------------


def status() -> str:
    """The README's status: from ``**Status.**`` to the end of its opening."""
    readme = text("README.md")
    return readme.split("**Status.**", 1)[1].split("<!-- --8<-- [end:intro] -->")[0]


def test_the_readme_status_names_only_modules_that_import() -> None:
    import importlib

    names = sorted(set(re.findall(r"`(sagents_django(?:\.\w+)+)`", status())))

    assert len(names) >= 20
    for name in names:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError:
            module, _, attribute = name.rpartition(".")
            assert hasattr(importlib.import_module(module), attribute), name


def test_the_readme_status_names_the_management_command_it_says_exists() -> None:
    from django.core.management import get_commands

    commands = re.findall(r"`manage\.py (\w+)`", status())

    assert commands == ["sagents_setup"]
    assert set(commands) <= set(get_commands())


def test_the_readme_links_lead_to_files_and_headings_that_exist() -> None:
    readme = text("README.md")
    headings = {
        re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-")
        for h in re.findall(r"^#+ (.+)$", readme, re.M)
    }
    links = re.findall(r"\]\(([^)\s]+)\)", readme)

    assert links
    for link in links:
        if link.startswith(("http://", "https://")):
            continue
        if link.startswith("#"):
            assert link[1:] in headings, link
        else:
            assert (REPO / link.split("#")[0]).is_file(), link


def test_the_readme_keeps_the_test_command_ci_runs_verbatim() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    [command] = [
        line
        for line in ci.splitlines()
        if line.startswith(".venv/bin/python -m pytest")
    ]

    assert command in text("README.md")
