"""Debian's chromium driven by Playwright (never a downloaded browser), and
screenshots for people to look at (``test-artifacts/``, gitignored).

When chromium is missing the tests fail, never skip: scripts/test-services installs it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def launch() -> Any:
    """Playwright and Debian's chromium: (playwright, browser)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"{CHROMIUM} is missing: apt-get install -y chromium (scripts/test-services does)"
        )
    from playwright.sync_api import sync_playwright

    manager = sync_playwright().start()
    browser = manager.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    return manager, browser


def shot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    # caret="initial": hiding the caret injects a style the CSP (rightly) refuses.
    page.screenshot(path=str(path), full_page=True, caret="initial")
    return path
