"""Sharing in a real browser: Alice shares a conversation with Bob to read, then
to write, Bob sees it under "Shared with me" and (writing) sends and approves in it,
Alice stops sharing and Bob's open page is told at once; a read-only link opens
without an account, shows the transcript and nothing else, runs none of the XSS
corpus, and stops when revoked. Screenshots go to test-artifacts/."""

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
from tests.web.test_browser_xss import CORPUS, clean


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    yield from serve(tmp_path_factory.mktemp("sharing-site"), delay_ms=0)


def person(chrome: Any) -> tuple[Any, Any, list[str]]:
    context = chrome.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(30_000)
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    return context, page, dialogs


def share_with(page: Any, name: str, access: str) -> None:
    panel = page.locator("#sg-share")
    if not panel.is_visible():
        page.locator("summary", has_text="Sharing").click()
    panel.get_by_label("Share with (username, email or group)").fill(name)
    panel.get_by_label("They may").select_option(access)
    panel.get_by_role("button", name="Share", exact=True).click()
    label = "read and write" if access == "write" else "read only"
    page.locator("#sg-share li", has_text=name).filter(has_text=label).wait_for()


def test_a_conversation_shared_to_read_then_to_write_then_stopped(
    chrome: Any, site: Site
) -> None:
    alice_context, alice, _ = person(chrome)
    bob_context, bob, _ = person(chrome)
    try:
        sign_in(alice, site, "alice")
        cid = new_conversation(alice, site, "Trip to Lisbon")
        wait_connected(alice)
        run_turn(alice, "Plan a weekend in Lisbon")
        # Nobody by that name: the panel says so (not its markup as an error).
        alice.locator("summary", has_text="Sharing").click()
        panel = alice.locator("#sg-share")
        panel.get_by_label("Share with (username, email or group)").fill("nobody-here")
        panel.get_by_role("button", name="Share", exact=True).click()
        alice.locator("#sg-share .sg-form-error", has_text="has that name").wait_for()
        assert "<section" not in alice.locator("#sg-share").inner_text()
        share_with(alice, "bob", "read")
        shot(alice, "60-sharing-owner-panel")

        sign_in(bob, site, "bob")
        shared = bob.locator(".sg-shared-with-me")
        shared.get_by_role("link", name="Trip to Lisbon").wait_for()
        shot(bob, "61-sharing-shared-with-me")
        shared.get_by_role("link", name="Trip to Lisbon").click()
        wait_connected(bob)
        bob.get_by_text("Shared with you: read only").wait_for()
        assert bob.get_by_text("Plan a weekend in Lisbon").count() >= 1
        assert bob.get_by_label("Message", exact=True).count() == 0
        assert bob.locator("#sg-share").count() == 0
        assert bob.get_by_text("Rename").count() == 0
        shot(bob, "62-sharing-read-only")

        share_with(alice, "bob", "write")
        bob.reload()
        wait_connected(bob)
        bob.get_by_text("you may send and approve").wait_for()
        run_turn(bob, "Add a day trip to Sintra")
        shot(bob, "63-sharing-write-turn")
        # The owner's page shows Bob's message live.
        alice.get_by_text("Add a day trip to Sintra").first.wait_for()

        alice.locator("#sg-share li", has_text="bob").get_by_role(
            "button", name="Stop sharing"
        ).click()
        alice.locator("#sg-share", has_text="Only you can see").wait_for()
        bob.locator(
            "#sg-conn", has_text="This conversation is not available."
        ).wait_for()
        # Nothing on the page can be sent any more.
        assert bob.get_by_label("Message", exact=True).is_disabled()
        shot(bob, "64-sharing-revoked-live")
        bob.reload()
        assert "Page not found" in bob.content() or bob.title() != "Trip to Lisbon"
        assert bob.locator(".sg-shared-with-me").count() == 0 or (
            bob.get_by_text("Trip to Lisbon").count() == 0
        )
        assert f"/c/{cid}/" in bob.url
    finally:
        alice_context.close()
        bob_context.close()


def test_a_read_only_link_shows_the_transcript_only_and_stops_when_revoked(
    chrome: Any, site: Site
) -> None:
    alice_context, alice, _ = person(chrome)
    stranger_context, stranger, dialogs = person(chrome)
    try:
        sign_in(alice, site, "alice")
        new_conversation(alice, site, "Corpus")
        wait_connected(alice)
        run_turn(alice, CORPUS)
        alice.locator("summary", has_text="Sharing").click()
        alice.get_by_label(
            "A link anyone can read the transcript with, for"
        ).select_option("1")
        alice.get_by_role("button", name="Make a link").click()
        field = alice.get_by_label("Link", exact=True)
        field.wait_for()
        link = field.input_value()
        shot(alice, "65-sharing-link-made")

        response = stranger.goto(link)
        assert response is not None and response.status == 200
        stranger.get_by_role("heading", name="Corpus").wait_for()
        assert stranger.locator("form, textarea, input, button, script").count() == 0
        assert stranger.locator(".sg-msg").count() >= 2
        clean(stranger, dialogs)
        shot(stranger, "66-sharing-link-page")

        alice.get_by_role("button", name="Stop the link").click()
        alice.locator("#sg-share", has_text="No link.").wait_for()
        again = stranger.goto(link)
        assert again is not None and again.status == 404
    finally:
        alice_context.close()
        stranger_context.close()
