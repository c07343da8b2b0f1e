"""The README's core quick start runs as written (on the offline demo model)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def python_block(after: str) -> str:
    """The README's first python block after the text ``after``."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split(after, 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, f"no python block after {after!r}"
    return match.group(1)


def quick_start_code() -> str:
    return python_block("## Quick start (core API)")


def test_the_readme_quick_start_pauses_for_its_approval_and_completes() -> None:
    result = subprocess.run(
        [sys.executable, "-c", quick_start_code()],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={"SAGENTS_DEMO_DELAY_MS": "0", "PATH": "/usr/bin:/bin", "HOME": "/tmp"},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    # The approval it sets up happens: the turn paused on write_file, then completed.
    assert result.stdout.startswith("approve? write_file /notes/demo.md\n")
    assert "\ncompleted " in result.stdout
    assert "offline demo model" in result.stdout


def settings_rows() -> dict[str, list[str]]:
    """The README's SAGENTS table: its cells by key."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Settings reference", 1)[1].split("\n## ", 1)[0]
    table = section.split("| key | type | default | meaning |", 1)[1].split("\n\n")[0]
    rows = {}
    for line in table.strip().splitlines()[1:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = cells[1:]
    return rows


def test_the_settings_reference_lists_every_sagents_key_with_its_default() -> None:
    from sagents_django.conf import DEFAULTS

    rows = settings_rows()

    assert list(rows) == list(DEFAULTS)
    for key, (kind, default, meaning) in rows.items():
        python = "None" if DEFAULTS[key] is None else json.dumps(DEFAULTS[key])
        assert default == f"`{python}`", key
        assert kind and meaning, key


def test_the_settings_reference_names_the_settings_outside_sagents() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Settings reference", 1)[1].split("\n## ", 1)[0]

    from sagents_django.core.providers.demo_litellm import DEFAULT_DELAY_MS

    defaults = {
        "SAGENTS_DJANGO_CONVERSATION_MODEL": '"sagents_django.Conversation"',
        "SAGENTS_DEMO_DELAY_MS": f"{DEFAULT_DELAY_MS:g}",
    }
    for name, default in defaults.items():
        row = next(line for line in section.splitlines() if f"| `{name}` |" in line)
        assert row.split("|")[3].strip() == f"`{default}`", name
