"""The chat's layout and actions in Debian's chromium, in both themes and at a
phone's width: the sidebar and its drawer, the composer in view and focused, the
typing dots, copy buttons, the theme switch, approvals drawn as fields with a
diff, search, the tab title; and axe-core finding no serious or critical
accessibility violation on any chat page (``tests/web/vendor/README.md``).

Screenshots of every step land in ``test-artifacts/``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browsers import shot
from tests.web.browser import (
    Site,
    new_conversation,
    send,
    serve,
    sign_in,
    wait_connected,
)

TIMEOUT = 30_000
AXE = Path(__file__).parent / "vendor" / "axe-4.14.1.min.js"
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 860}
SIZES = [("light", DESKTOP), ("dark", DESKTOP), ("light", PHONE), ("dark", PHONE)]
IDS = ["light-desktop", "dark-desktop", "light-phone", "dark-phone"]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    yield from serve(tmp_path_factory.mktemp("chat-ui-site"), delay_ms=40)


@pytest.fixture
def open_tab(chrome: Any) -> Iterator[Any]:
    """A function giving a page of a new context (a theme, a size); every page
    error fails the test."""
    contexts: list[Any] = []
    errors: list[str] = []

    def make(scheme: str = "light", viewport: dict[str, int] = DESKTOP) -> Any:
        context = chrome.new_context(
            viewport=viewport, color_scheme=scheme, reduced_motion="reduce"
        )
        context.set_default_timeout(TIMEOUT)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on(
            "console",
            lambda m: errors.append(m.text) if m.type == "error" else None,
        )
        return page

    yield make
    for context in contexts:
        context.close()
    assert errors == []


def axe(page: Any) -> list[str]:
    """The serious and critical violations axe-core finds on the page (run through
    the test's channel: the page's CSP stays on)."""
    if not page.evaluate("() => !!window.axe"):
        page.evaluate(AXE.read_text(encoding="utf-8"))
    found = page.evaluate(
        """async () => {
          const r = await axe.run(document, {resultTypes: ["violations"]});
          return r.violations.filter(v => ["serious", "critical"].includes(v.impact))
            .map(v => v.id + ": " + v.nodes.slice(0, 3).map(n => n.target.join(" ")
              + " (" + (n.failureSummary || "").split("\\n").slice(1, 2).join("")
              + ")").join("; "));
        }"""
    )
    return list(found)


@pytest.mark.parametrize(("scheme", "viewport"), SIZES, ids=IDS)
def test_a_turn_in_the_chat_layout_with_axe_on_every_page(
    open_tab: Any, site: Site, scheme: str, viewport: dict[str, int]
) -> None:
    name = f"ui-{scheme}-{'phone' if viewport is PHONE else 'desktop'}"
    page = open_tab(scheme, viewport)
    problems: dict[str, list[str]] = {}

    def check(label: str) -> None:
        found = axe(page)
        if found:
            problems[label] = found

    page.goto(f"{site.url}/accounts/login/")
    check("sign-in")
    sign_in(page, site, "alice")
    check("list")
    new_conversation(page, site, title=f"Layout {name}")
    wait_connected(page)
    box = page.get_by_label("Message", exact=True)
    assert page.evaluate("() => document.activeElement.id") == "sg-text"
    top = box.bounding_box()
    assert top is not None and top["y"] + top["height"] <= viewport["height"]
    check("conversation, empty")

    send(page, "Plan a picnic\n\n```python\nprint('<b>hi</b>')\n```")
    # The typing dots show before anything streams.
    page.locator(".sg-typing").wait_for(state="visible")
    shot(page, f"{name}-01-typing")
    approval = page.get_by_role("form", name="Approval needed")
    approval.wait_for()
    assert "What changes in /notes/demo.md" in approval.inner_text()
    assert approval.get_by_label("file_path").input_value() == "/notes/demo.md"
    shot(page, f"{name}-02-approval-fields-and-diff")
    check("conversation, approval")

    # Editing a field picks Edit, and the edited content is what gets written.
    approval.get_by_label("content").fill(f"Edited by a person ({name})")
    assert approval.get_by_label("Edit the arguments").is_checked()
    approval.get_by_role("button", name="Send the decision").click()
    page.locator("#sg-status", has_text="Ready").wait_for()
    assert page.evaluate("() => document.activeElement.id") == "sg-text"
    assert page.locator(".sg-tool").count() >= 1
    shot(page, f"{name}-03-done")
    check("conversation, after the turn")
    [(written,)] = site.query(
        "SELECT count(*) FROM sagents_stored_files WHERE content = ?",
        f"Edited by a person ({name})",
    )
    assert written == 1

    if viewport is PHONE:
        toggle = page.get_by_role("button", name="Conversations")
        toggle.click()
        nav = page.get_by_role("navigation", name="Conversations")
        nav.get_by_role("link", name=f"Layout {name}").wait_for(state="visible")
        assert toggle.get_attribute("aria-expanded") == "true"
        shot(page, f"{name}-04-drawer")
        check("conversation, drawer open")
        page.keyboard.press("Escape")
        nav.wait_for(state="hidden")

    page.goto(f"{site.url}/inbox/")
    check("inbox")
    page.goto(f"{site.url}/?q=picnic")
    check("search")
    assert problems == {}, problems


def test_copy_a_message_and_a_code_block(open_tab: Any, site: Site) -> None:
    page = open_tab()
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    sign_in(page, site, "alice")
    new_conversation(page, site, title="Copy")
    wait_connected(page)
    send(page, "Look:\n\n```python\nprint('copied')\n```")
    page.get_by_role("form", name="Approval needed").wait_for()
    mine = page.locator(".sg-msg--user").first
    code = mine.get_by_role("button", name="Copy code")
    code.click()
    assert page.evaluate("() => navigator.clipboard.readText()") == "print('copied')\n"
    mine.locator(".sg-copy-code", has_text="Copied").wait_for()
    mine.get_by_role("button", name="Copy", exact=True).click()
    copied = page.evaluate("() => navigator.clipboard.readText()")
    assert copied.startswith("Look:") and "print('copied')" in copied
    shot(page, "ui-05-copied")


def test_the_theme_switch_is_remembered_and_the_sidebar_folds(
    open_tab: Any, site: Site
) -> None:
    page = open_tab("light")
    sign_in(page, site, "alice")
    cid = new_conversation(page, site, title="Themes")
    wait_connected(page)
    page.get_by_role("button", name="Switch to the dark theme").click()
    assert page.evaluate("() => document.documentElement.dataset.theme") == "dark"
    page.reload()
    assert page.evaluate("() => document.documentElement.dataset.theme") == "dark"
    background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(20, 23, 27)"
    shot(page, "ui-06-dark-by-choice")

    nav = page.get_by_role("navigation", name="Conversations")
    assert nav.get_by_role("link", name="Themes").get_attribute("aria-current") == (
        "page"
    )
    page.get_by_role("button", name="Conversations").click()
    nav.wait_for(state="hidden")
    page.reload()
    # The socket's first resync redraws the title bar: rename after it, or the
    # open form is replaced under the typing.
    wait_connected(page)
    nav.wait_for(state="hidden")  # remembered folded
    page.get_by_role("button", name="Conversations").click()
    nav.wait_for(state="visible")

    # Renaming: the tab's title and the sidebar follow.
    page.get_by_text("Rename").click()
    shot(page, "ui-06b-rename-open")
    page.get_by_label("New title").fill("Renamed <b>here</b>")
    page.get_by_role("button", name="Save").click()
    page.locator("#sg-title-text", has_text="Renamed").wait_for()
    page.wait_for_function("() => document.title.startsWith('Renamed <b>here</b>')")
    assert nav.locator(f"#sg-title-{cid}").inner_text() == "Renamed <b>here</b>"
    page.get_by_role("button", name="Switch to the light theme").click()


def test_another_tabs_new_conversation_and_rename_reach_this_tabs_sidebar(
    open_tab: Any, site: Site
) -> None:
    page = open_tab("dark")
    sign_in(page, site, "alice")
    watched = new_conversation(page, site, title="Watched")
    wait_connected(page)
    page.wait_for_function("() => window.__sgListOpen")
    nav = page.get_by_role("navigation", name="Conversations")

    other = page.context.new_page()  # the same session, another tab
    new_conversation(other, site, title="Made <i>elsewhere</i>")
    nav.get_by_role("link", name="Made <i>elsewhere</i>").wait_for()

    other.goto(f"{site.url}/c/{watched}/")
    wait_connected(other)
    other.set_viewport_size(PHONE)
    other.get_by_text("Rename", exact=True).click()
    shot(other, "ui-07b-rename-open-phone")
    other.get_by_label("New title").fill("Renamed elsewhere")
    other.get_by_role("button", name="Save").click()
    page.locator("#sg-title-text", has_text="Renamed elsewhere").wait_for()
    page.wait_for_function("() => document.title.startsWith('Renamed elsewhere')")
    link = nav.get_by_role("link", name="Renamed elsewhere")
    assert link.get_attribute("aria-current") == "page"
    assert nav.locator("#sg-nav-list a").first.inner_text() == "Renamed elsewhere"
    shot(page, "ui-07-other-tab-followed")
    other.close()


def test_search_shows_one_highlighted_snippet_per_conversation(
    open_tab: Any, site: Site
) -> None:
    page = open_tab()
    sign_in(page, site, "alice")
    new_conversation(page, site, title="Lemonade stand")
    wait_connected(page)
    send(page, "Make **lemonade** please")
    page.get_by_role("form", name="Approval needed").wait_for()
    page.goto(f"{site.url}/")
    page.get_by_label("Search titles and messages").fill("lemonade")
    page.get_by_role("button", name="Search").click()
    results = page.locator(".sg-results li")
    results.first.wait_for()
    titles = [t.inner_text() for t in page.locator(".sg-results li > a").all()]
    assert len(titles) == len(set(titles))
    assert page.locator(".sg-snippet mark").first.inner_text().lower() == "lemonade"
    assert "**" not in page.locator(".sg-results").inner_text()
    assert page.locator(".sg-conversations").count() == 0
    shot(page, "ui-07-search")
