"""Sharing files in a real browser (Debian's chromium against daphne): Alice
shares her conversation's files with Bob from the files panel's "Share files", Bob
finds them under "Shared with me" and opens the shared files page, which follows
them live (Alice's upload appears there, and Bob's appears in Alice's panel),
and stops, saying so, when Alice stops sharing. Screenshots go to
test-artifacts/."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browsers import shot
from tests.web.browser import Site, new_conversation, serve, sign_in, wait_connected
from tests.web.test_browser_sharing import person


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    yield from serve(tmp_path_factory.mktemp("file-sharing-site"), delay_ms=0)


def upload(page: Any, label: str, name: str, text: bytes) -> None:
    page.get_by_label(label).set_input_files(
        files=[{"name": name, "mimeType": "text/plain", "buffer": text}]
    )
    page.get_by_role("button", name="Upload", exact=True).click()


def test_files_shared_from_the_panel_show_live_on_the_other_users_page(
    chrome: Any, site: Site
) -> None:
    alice_context, alice, _ = person(chrome)
    bob_context, bob, _ = person(chrome)
    errors: list[str] = []
    for page in (alice, bob):
        page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        sign_in(alice, site, "alice")
        new_conversation(alice, site, "Picnic")
        wait_connected(alice)
        upload(alice, "Upload a text file to the agent", "menu.txt", b"Tea\n")
        alice.locator("#sg-files a", has_text="menu.txt").wait_for()

        alice.locator("summary", has_text="Share files").click()
        panel = alice.locator("#sg-file-share")
        # Herself: the panel says why not (and stays a panel).
        panel.get_by_label("Share with (username, email or group)").fill("alice")
        panel.get_by_role("button", name="Share", exact=True).click()
        panel.locator(".sg-form-error", has_text="already owns").wait_for()
        panel.get_by_label("Share with (username, email or group)").fill("bob")
        panel.get_by_label("They may").select_option("write")
        panel.get_by_role("button", name="Share", exact=True).click()
        alice.locator("#sg-file-share li", has_text="bob").filter(
            has_text="read and write"
        ).wait_for()
        # The conversation itself is not shared by it.
        assert alice.locator("#sg-share li", has_text="bob").count() == 0
        shot(alice, "70-file-sharing-owner-panel")

        sign_in(bob, site, "bob")
        shared = bob.locator(".sg-shared-with-me")
        link = shared.get_by_role("link", name="Files")
        link.wait_for()
        shot(bob, "71-file-sharing-shared-with-me")
        link.click()
        bob.wait_for_function("() => window.__sgOpen")
        bob.get_by_text("Shared with you: read and write").wait_for()
        bob.locator("#sg-files a", has_text="menu.txt").wait_for()
        url = bob.url

        upload(alice, "Upload a text file to the agent", "plan.txt", b"Go at noon\n")
        bob.locator("#sg-files a", has_text="plan.txt").wait_for()
        shot(bob, "72-file-sharing-live-on-the-shared-page")

        upload(bob, "Upload a text file here", "notes.txt", b"Bring cups\n")
        alice.locator("#sg-files a", has_text="notes.txt").wait_for()
        bob.locator("#sg-files a", has_text="notes.txt").wait_for()
        shot(alice, "73-file-sharing-bobs-upload-in-alices-panel")
        assert bob.url == url  # never reloaded

        bob.locator("#sg-files a", has_text="notes.txt").click()
        bob.get_by_text("Bring cups").wait_for()
        bob.wait_for_function("() => window.__sgOpen")

        alice.locator("#sg-file-share li", has_text="bob").get_by_role(
            "button", name="Stop sharing"
        ).click()
        alice.locator("#sg-file-share", has_text="Only your own").wait_for()
        bob.locator("#sg-conn", has_text="not shared with you any more").wait_for()
        assert bob.get_by_label("Upload a text file here").is_disabled()
        shot(bob, "74-file-sharing-revoked-live")
        response = bob.goto(url)
        assert response is not None and response.status == 404
    finally:
        alice_context.close()
        bob_context.close()
    assert not errors, errors
