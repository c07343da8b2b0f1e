"""The README's core quick start runs as written (on the offline demo model)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def quick_start_code() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start (core API)", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the quick start has no python block"
    return match.group(1)


def test_the_readme_quick_start_runs_and_completes_a_turn() -> None:
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
    assert result.stdout.startswith("completed ")
    assert "offline demo model" in result.stdout
