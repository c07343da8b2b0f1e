"""Message actions in chromium: rate a reply (htmx swaps the buttons; the rating
stays after a reload), the turn's usage on its reply, fork from the first turn
into a new conversation that goes on from there, and My usage with an export of
the person's data."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browsers import shot
from tests.web.browser import (
    Site,
    new_conversation,
    run_turn,
    serve,
    sign_in,
    wait_connected,
)

TIMEOUT = 30_000


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    yield from serve(tmp_path_factory.mktemp("actions-site"), delay_ms=0)


def test_a_reply_is_rated_and_the_conversation_forked_from_its_turn(
    chrome: Any, site: Site
) -> None:
    context = chrome.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on(
        "console",
        lambda m: (
            errors.append(m.text) if "Content Security Policy" in m.text else None
        ),
    )
    try:
        sign_in(page, site, "alice")
        cid = new_conversation(page, site, title="Picnic")
        wait_connected(page)
        run_turn(page, "Plan a picnic")
        run_turn(page, "Now a dinner")
        # The first turn's reply: its usage arrives with the turn's end.
        rate = page.locator(".sg-rate").first
        usage = page.locator(".sg-turn-usage").first
        usage.wait_for()
        assert " in · " in usage.inner_text()
        shot(page, "30-actions-before-rating")

        rate.locator("summary").click()
        rate.get_by_label("Comment on this reply (optional)").fill(
            "Short & <b>useful</b>"
        )
        rate.get_by_role("button", name="Good reply").click()
        page.locator(".sg-rated", has_text="rated good").wait_for()
        up = page.locator(".sg-rate").first.get_by_role("button", name="Good reply")
        assert up.get_attribute("aria-pressed") == "true"
        shot(page, "31-rated")
        rows = site.query("SELECT rating, comment FROM sagents_reply_feedback")
        assert rows == [("up", "Short & <b>useful</b>")]

        page.reload()
        wait_connected(page)
        first = page.locator(".sg-rate").first
        assert (
            first.get_by_role("button", name="Good reply").get_attribute("aria-pressed")
            == "true"
        )
        assert first.locator("textarea").input_value() == "Short & <b>useful</b>"
        # The socket's resync on opening replaced the recent rows: their forms
        # still post through htmx, in place, with no page load.
        page.evaluate("() => { window.__sgSamePage = true; }")
        down = first.get_by_role("button", name="Bad reply")
        if not down.is_visible():
            first.locator("summary").click()
        down.click()
        page.locator(".sg-rated", has_text="rated bad").wait_for()
        assert page.evaluate("() => window.__sgSamePage === true")
        assert down.get_attribute("aria-pressed") == "true"

        # Fork from the first reply: a new conversation with the first turn only.
        page.locator(".sg-fork").nth(1).get_by_role(
            "button", name="Fork from here"
        ).click()
        page.wait_for_url(lambda url: "/c/" in url and cid not in url)
        wait_connected(page)
        page.get_by_text("Forked from “Picnic”").wait_for()
        assert "Fork of Picnic" in page.locator("#sg-title-text").inner_text()
        transcript = page.locator("#sg-messages").inner_text()
        assert "Plan a picnic" in transcript and "Now a dinner" not in transcript
        shot(page, "32-forked")

        run_turn(page, "And a barbecue")
        transcript = page.locator("#sg-messages").inner_text()
        assert "And a barbecue" in transcript and "Now a dinner" not in transcript
        shot(page, "33-fork-went-on")

        page.get_by_role("link", name="My usage").click()
        page.get_by_role("heading", name="My usage").wait_for()
        table = page.locator("#sg-my-usage").inner_text()
        assert "Picnic" in table and "Fork of Picnic" in table
        shot(page, "34-my-usage")
        # The person's data as a zip, downloaded once.
        page.get_by_role("button", name="Export my data").click()
        link = page.locator("#sg-exports").get_by_role("link", name="Download")
        link.wait_for()
        with page.expect_download() as download:
            link.click()
        assert download.value.suggested_filename.endswith(".zip")
        page.reload()
        assert "downloaded" in page.locator("#sg-exports").inner_text()
        shot(page, "35-my-data-exported")
        # The source conversation is untouched.
        page.goto(f"{site.url}/c/{cid}/")
        wait_connected(page)
        assert "Now a dinner" in page.locator("#sg-messages").inner_text()
        assert "And a barbecue" not in page.locator("#sg-messages").inner_text()
    finally:
        context.close()
    assert not errors, errors
