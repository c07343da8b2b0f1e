"""Branches in chromium, in both themes and at phone width: regenerate a reply,
edit a message with the XSS corpus in it, switch with ``< n / m >`` while another
tab follows, and go on from the branch shown. Nothing of the corpus runs, on the
page or in the tab that follows the switches."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browsers import shot
from tests.web.browser import (
    Site,
    new_conversation,
    row_ids,
    run_turn,
    serve,
    sign_in,
    wait_connected,
)
from tests.web.test_browser_chat_ui import DESKTOP, PHONE
from tests.web.test_browser_xss import CORPUS, clean

TIMEOUT = 30_000
CASES = [("light", DESKTOP), ("dark", DESKTOP), ("dark", PHONE)]
IDS = ["light-desktop", "dark-desktop", "dark-phone"]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    yield from serve(tmp_path_factory.mktemp("branches-site"), delay_ms=0)


def settled(page: Any) -> None:
    """The turn a branch started has ended (the demo's approval decided)."""
    approval = page.get_by_role("form", name="Approval needed")
    page.locator(
        "#sg-status:has-text('Ready'), form[aria-label='Approval needed']"
    ).first.wait_for()
    if approval.count():
        approval.get_by_role("button", name="Send the decision").click()
    page.locator("#sg-status", has_text="Ready").wait_for()


def transcript(page: Any) -> str:
    return str(page.locator("#sg-messages").inner_text())


@pytest.mark.parametrize(("scheme", "viewport"), CASES, ids=IDS)
def test_regenerate_edit_and_switch_branches(
    chrome: Any, site: Site, scheme: str, viewport: dict[str, int]
) -> None:
    name = IDS[CASES.index((scheme, viewport))]
    context = chrome.new_context(
        viewport=viewport, color_scheme=scheme, reduced_motion="reduce"
    )
    context.set_default_timeout(TIMEOUT)
    errors: list[str] = []
    dialogs: list[str] = []

    step = ["start"]

    def watch(page: Any, tab: str = "page") -> Any:
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on(
            "console",
            lambda m: (
                errors.append(f"{tab} {step[0]} {m.text}")
                if m.type == "error"
                else None
            ),
        )
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        return page

    page = watch(context.new_page())
    try:
        sign_in(page, site, "alice")
        cid = new_conversation(page, site, title=f"Branches {name}")
        wait_connected(page)
        run_turn(page, "Plan a picnic")
        run_turn(page, "Now a dinner")
        before = row_ids(page)

        step[0] = "regenerate"
        # Regenerate the last reply: a sibling of it, shown as 2 / 2.
        page.locator(".sg-regenerate").last.get_by_role(
            "button", name="Regenerate"
        ).click()
        count = page.locator(".sg-branch-count").last
        count.wait_for()
        settled(page)
        page.locator(".sg-branch-count", has_text="2 / 2").wait_for()
        assert "Plan a picnic" in transcript(page)
        shot(page, f"40-branches-regenerated-{name}")

        # A second tab follows the switches of the first.
        other = watch(context.new_page(), "other")
        other.goto(f"{site.url}/c/{cid}/")
        wait_connected(other)
        other.locator(".sg-branch-count", has_text="2 / 2").wait_for()

        step[0] = "switch1"
        page.get_by_role("button", name="Previous version").click()
        page.locator(".sg-branch-count", has_text="1 / 2").wait_for()
        other.locator(".sg-branch-count", has_text="1 / 2").wait_for()
        assert row_ids(page) == before == row_ids(other)
        shot(page, f"41-branches-switched-back-{name}")

        # Edit the first message with the XSS corpus in it: a new branch from the
        # start, the old messages kept in theirs.
        step[0] = "edit"
        first = page.locator(".sg-msg--user").first
        first.locator("details.sg-edit > summary").click()
        first.get_by_label("Edit your message").fill(
            "A picnic by the lake\n\n" + CORPUS
        )
        shot(page, f"42-branches-editing-{name}")
        first.get_by_role("button", name="Send as a new branch").click()
        page.locator(".sg-msg--user .sg-branch-count", has_text="2 / 2").wait_for()
        settled(page)
        assert "Now a dinner" not in transcript(page)
        assert "A picnic by the lake" in transcript(page)
        other.locator(".sg-msg--user .sg-branch-count", has_text="2 / 2").wait_for()
        clean(page, dialogs)
        clean(other, dialogs)
        shot(page, f"43-branches-edited-{name}")

        step[0] = "switch2"
        # Back to the first version of the first message (its latest branch,
        # the regenerated reply), then on from there.
        page.locator(".sg-msg--user").first.get_by_role(
            "button", name="Previous version"
        ).click()
        page.locator(".sg-msg--user .sg-branch-count", has_text="1 / 2").wait_for()
        other.locator(".sg-msg--user .sg-branch-count", has_text="1 / 2").wait_for()
        assert "Now a dinner" in transcript(page)
        page.locator(".sg-branch-count", has_text="1 / 2").nth(1).wait_for()
        clean(other, dialogs)
        step[0] = "barbecue"
        run_turn(page, "And a barbecue")
        assert "And a barbecue" in transcript(page)
        shot(page, f"44-branches-went-on-{name}")

        # The page without its socket (a reload) shows the same branch.
        page.reload()
        wait_connected(page)
        assert "And a barbecue" in transcript(page)
        assert "A picnic by the lake" not in transcript(page)
        clean(page, dialogs)
    finally:
        context.close()
    assert not errors, errors
    assert not dialogs, dialogs


def test_the_branch_actions_work_without_javascript(chrome: Any, site: Site) -> None:
    context = chrome.new_context(viewport=DESKTOP, java_script_enabled=False)
    context.set_default_timeout(TIMEOUT)
    scripted = chrome.new_context(viewport=DESKTOP)
    scripted.set_default_timeout(TIMEOUT)
    try:
        # The turn runs in a scripted tab; the actions are used without scripts.
        driver = scripted.new_page()
        sign_in(driver, site, "bob")
        cid = new_conversation(driver, site, title="No JS")
        wait_connected(driver)
        run_turn(driver, "Plan a picnic")

        page = context.new_page()
        sign_in(page, site, "bob")
        page.goto(f"{site.url}/c/{cid}/")
        page.locator(".sg-msg--user details.sg-edit > summary").first.click()
        page.get_by_label("Edit your message").fill("Plan a dinner")
        page.get_by_role("button", name="Send as a new branch").click()
        page.wait_for_url(f"**/c/{cid}/**")
        assert "Plan a dinner" in transcript(page)
        assert page.locator(".sg-branch-count", has_text="2 / 2").count() == 1
        driver.reload()
        wait_connected(driver)
        settled(driver)
        page.reload()
        page.get_by_role("button", name="Previous version").click()
        page.wait_for_url(f"**/c/{cid}/**")
        page.locator(".sg-branch-count", has_text="1 / 2").wait_for()
        assert "Plan a picnic" in transcript(page)
        shot(page, "45-branches-no-javascript")
    finally:
        context.close()
        scripted.close()
