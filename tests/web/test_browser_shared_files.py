"""Two chat pages of conversations sharing their files, open side by side in
Debian's chromium against daphne: a file one conversation's turn writes, and a file
uploaded to it, appear in the other page's file panel without a reload."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browsers import shot
from tests.web.browser import Site, new_conversation, serve, sign_in, wait_connected

TIMEOUT = 30_000


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    yield from serve(
        tmp_path_factory.mktemp("shared-files-site"),
        delay_ms=0,
        settings="tests.web.shared_files_settings",
    )


def test_a_file_written_in_one_conversation_appears_in_the_others_panel(
    chrome: Any, site: Site
) -> None:
    context = chrome.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT)
    errors: list[str] = []
    writer, reader = context.new_page(), context.new_page()
    for page in (writer, reader):
        page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        sign_in(writer, site, "alice")
        new_conversation(reader, site, title="Reading")
        wait_connected(reader)
        new_conversation(writer, site, title="Writing")
        wait_connected(writer)
        url = reader.url

        box = writer.get_by_label("Message", exact=True)
        box.fill("Plan a picnic")
        box.press("Enter")
        approval = writer.get_by_role("form", name="Approval needed")
        approval.get_by_role("button", name="Send the decision").click()

        reader.locator("#sg-files a", has_text="demo.md").wait_for()
        shot(reader, "shared-files-01-written-elsewhere")
        writer.get_by_label("Upload a text file to the agent").set_input_files(
            files=[{"name": "menu.txt", "mimeType": "text/plain", "buffer": b"Tea\n"}]
        )
        writer.get_by_role("button", name="Upload", exact=True).click()
        reader.locator("#sg-files a", has_text="menu.txt").wait_for()
        shot(reader, "shared-files-02-uploaded-elsewhere")

        assert reader.url == url  # never reloaded
        assert "Plan a picnic" not in reader.locator("#sg-messages").inner_text()
    finally:
        context.close()
    assert not errors, errors
