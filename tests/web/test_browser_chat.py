"""The chat pages in Debian's chromium against daphne: a person's whole session.

Each test looks at what a person sees (text streaming in, the plan and the files
appearing, approval forms, the inbox badge) and at the database behind it (every
row shown exactly once). Screenshots of each step land in ``test-artifacts/``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.web.browser import (
    Site,
    launch,
    new_conversation,
    row_ids,
    serve,
    shot,
    sign_in,
    wait_connected,
)

TIMEOUT = 30_000


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    yield from serve(tmp_path_factory.mktemp("chat-site"), delay_ms=60)


@pytest.fixture(scope="module")
def chrome() -> Iterator[Any]:
    manager, browser = launch()
    try:
        yield browser
    finally:
        browser.close()
        manager.stop()


@pytest.fixture
def tab(chrome: Any) -> Iterator[Any]:
    context = chrome.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on(
        "console",
        lambda m: errors.append(f"{m.text} at {m.location} on {page.url}")
        if m.type == "error" and "Content Security Policy" in m.text
        else None,
    )
    yield page
    context.close()
    assert not errors, errors


def send(page: Any, text: str) -> None:
    box = page.get_by_label("Message", exact=True)
    box.fill(text)
    box.press("Enter")


def test_a_turn_streams_plans_asks_for_approval_and_writes_a_file_live(
    tab: Any, site: Site
) -> None:
    page = tab
    sign_in(page, site, "alice")
    shot(page, "01-signed-in-list")
    cid = new_conversation(page, site)
    wait_connected(page)
    send(page, "Plan a picnic for Saturday")

    stream = page.locator("#sg-stream-text")
    stream.wait_for(state="visible")
    assert stream.inner_text().strip()
    shot(page, "02-streaming")

    page.locator("#sg-todos li").first.wait_for()
    assert "Outline the answer" in page.locator("#sg-todos").inner_text()
    approval = page.get_by_role("form", name="Approval needed")
    approval.wait_for()
    assert "write_file" in approval.inner_text()
    assert page.locator("#sg-status").inner_text().startswith("Waiting")
    shot(page, "03-approval-in-conversation")

    approval.get_by_role("button", name="Send the decision").click()
    page.locator("#sg-files a", has_text="demo.md").wait_for()
    page.locator("#sg-status", has_text="Ready").wait_for()
    page.locator("#sg-title-text", has_text="Plan a picnic").wait_for()
    assert page.locator("#sg-approvals form").count() == 0
    shot(page, "04-turn-done-file-and-title")

    page.get_by_label("Upload a text file to the agent").set_input_files(
        files=[{"name": "guests.txt", "mimeType": "text/plain", "buffer": b"Ann\n"}]
    )
    page.get_by_role("button", name="Upload", exact=True).click()
    page.locator("#sg-files a", has_text="guests.txt").wait_for()
    shot(page, "05-uploaded")

    shown = row_ids(page)
    assert shown == site.rows(cid)
    assert len(shown) == len(set(shown))

    page.reload()
    wait_connected(page)
    assert row_ids(page) == site.rows(cid)
    assert page.locator("#sg-files a", has_text="guests.txt").count() == 1
    shot(page, "06-reloaded-history")
