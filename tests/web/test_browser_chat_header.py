"""The chat header in Debian's chromium at a phone's width and a desktop's: the
title, the "Shared with you" badge, the status pill and the header's other
controls never overlap (their bounding boxes), nothing runs past the viewport,
and the console stays empty. Ready and waiting for an approval, on the owner's
page and on the page of someone it is shared with; and My usage's table fits a
phone.

Screenshots land in ``test-artifacts/`` (``50-header-*``).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import combinations
from typing import Any

import pytest

from tests.support.browsers import shot
from tests.web.browser import (
    Site,
    new_conversation,
    run_turn,
    send,
    serve,
    sign_in,
    wait_connected,
)
from tests.web.test_browser_chat_ui import DESKTOP, PHONE
from tests.web.test_browser_sharing import share_with

TIMEOUT = 30_000
TITLE = "A rather long title about planning the summer picnic by the lake with friends"
BOXES = {
    "title": "#sg-title h1",
    "badge": ".sg-shared-note",
    "status": "#sg-status",
    "menu": ".sg-nav-toggle",
    "panels link": ".sg-side-link",
}
"""The header's boxes that must not overlap (those the page shows)."""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    yield from serve(tmp_path_factory.mktemp("header-site"), delay_ms=0)


def boxes(page: Any) -> dict[str, dict[str, float]]:
    found = {}
    for name, selector in BOXES.items():
        element = page.locator(selector)
        if element.count() and element.first.is_visible():
            found[name] = element.first.bounding_box()
    return found


def overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    """Whether two boxes share more than a rounding error of area."""
    slack = 0.5
    return (
        a["x"] + slack < b["x"] + b["width"]
        and b["x"] + slack < a["x"] + a["width"]
        and a["y"] + slack < b["y"] + b["height"]
        and b["y"] + slack < a["y"] + a["height"]
    )


def check_header(page: Any, name: str) -> None:
    for viewport in (PHONE, DESKTOP):
        page.set_viewport_size(viewport)
        page.wait_for_function(f"() => window.innerWidth === {viewport['width']}")
        found = boxes(page)
        label = f"{name}-{viewport['width']}"
        shot(page, f"50-header-{label}")
        assert {"title", "status"} <= set(found), (label, found)
        for (one, a), (two, b) in combinations(found.items(), 2):
            assert not overlap(a, b), (label, one, a, two, b)
        for what, box in found.items():
            assert box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"], (
                label,
                what,
                box,
            )
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= viewport["width"], (label, width)


def test_the_header_s_title_badge_and_status_never_overlap(
    chrome: Any, site: Site
) -> None:
    errors: list[str] = []
    contexts = []

    def tab() -> Any:
        context = chrome.new_context(viewport=DESKTOP, reduced_motion="reduce")
        context.set_default_timeout(TIMEOUT)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on(
            "console", lambda m: errors.append(m.text) if m.type == "error" else None
        )
        return page

    try:
        alice, bob = tab(), tab()
        sign_in(alice, site, "alice")
        sign_in(bob, site, "bob")
        written = new_conversation(alice, site, title=TITLE)
        wait_connected(alice)
        run_turn(alice, "Plan a picnic")
        share_with(alice, "bob", "write")
        read = new_conversation(alice, site, title="Lisbon")
        wait_connected(alice)
        share_with(alice, "bob", "read")

        alice.goto(f"{site.url}/c/{written}/")
        wait_connected(alice)
        check_header(alice, "owner-ready")
        for cid, access in ((written, "write"), (read, "read")):
            bob.goto(f"{site.url}/c/{cid}/")
            wait_connected(bob)
            bob.locator(".sg-shared-note").wait_for()
            check_header(bob, f"shared-{access}-ready")

        # Waiting for an approval: the widest pill, on both pages.
        alice.goto(f"{site.url}/c/{written}/")
        wait_connected(alice)
        send(alice, "Plan a dinner")
        alice.locator("#sg-status", has_text="Waiting for your approval").wait_for()
        check_header(alice, "owner-waiting")
        bob.goto(f"{site.url}/c/{written}/")
        wait_connected(bob)
        bob.locator("#sg-status", has_text="Waiting for your approval").wait_for()
        check_header(bob, "shared-write-waiting")

        # My usage's table fits a phone: the page never scrolls sideways.
        alice.set_viewport_size(PHONE)
        alice.goto(f"{site.url}/usage/")
        shot(alice, "50-header-my-usage-390")
        table = alice.locator("#sg-my-usage").bounding_box()
        assert table["x"] + table["width"] <= PHONE["width"], table
        width = alice.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], width
        assert errors == []
    finally:
        for context in contexts:
            context.close()
