"""A whole turn in Debian's chromium with nothing in the console: no error, no
Content-Security-Policy violation, no failed request, on any page it touches.

The chat pages promise a strict CSP (``sagents_django.security``) and a quiet
console; a person would see neither promise broken, so this test listens for
both. Every ``securitypolicyviolation`` event is reported to the console by a
script Playwright adds before the page's own (the browser does not apply the
page's CSP to it), so an inline style that htmx or a swap tried to apply fails the
test even where chromium does not log it. The turn goes through every kind of
swap: sign in, the conversation list following titles, a new conversation, the
reply streaming, the plan, the approval form and its decision, the file, the
generated title (on the page and on the list), the inbox, signing out.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browsers import shot
from tests.support.sites import PASSWORD
from tests.web.browser import Site, serve, wait_connected

TIMEOUT = 30_000
REPORT_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", (e) => {
  console.error(`CSP violation: ${e.violatedDirective} by ${e.blockedURI || "inline"}`
    + ` at ${e.sourceFile}:${e.lineNumber}:${e.columnNumber} (${e.sample})`);
});
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    yield from serve(tmp_path_factory.mktemp("console-site"), delay_ms=40)


class Console:
    """Everything that went wrong in the context's pages, as lines to show."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def watch(self, page: Any, name: str) -> Any:
        page.on("console", lambda m: self._console(name, page, m))
        page.on("pageerror", lambda exc: self.problems.append(f"{name}: {exc}"))
        page.on(
            "response",
            lambda r: (
                self.problems.append(f"{name}: HTTP {r.status} for {r.url}")
                if r.status >= 400
                else None
            ),
        )
        return page

    def _console(self, name: str, page: Any, message: Any) -> None:
        if message.type in ("error", "warning"):
            self.problems.append(
                f"{name} ({page.url}): [{message.type}] {message.text}"
            )


@pytest.mark.parametrize(
    "viewport",
    [{"width": 1280, "height": 900}, {"width": 390, "height": 844}],
    ids=["desktop", "phone"],
)
def test_a_whole_turn_leaves_the_console_empty(
    chrome: Any, site: Site, viewport: dict[str, int]
) -> None:
    name = "phone" if viewport["width"] < 600 else "desktop"
    context = chrome.new_context(viewport=viewport)
    context.set_default_timeout(TIMEOUT)
    context.add_init_script(REPORT_VIOLATIONS)
    console = Console()
    try:
        page = console.watch(context.new_page(), "chat")
        page.goto(f"{site.url}/")
        page.get_by_role("link", name="Sign in").first.click()
        page.get_by_label("Username").fill("alice")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{site.url}/")
        page.get_by_role("button", name="New conversation").click()
        page.wait_for_url("**/c/*/")
        cid = page.url.rstrip("/").rsplit("/", 1)[-1]
        wait_connected(page)
        # The list, opened once the conversation exists, follows its title.
        listing = console.watch(context.new_page(), "list")
        listing.goto(f"{site.url}/")
        listing.wait_for_function("() => window.__sgOpen")

        box = page.get_by_label("Message", exact=True)
        box.fill("Plan a picnic for Saturday")
        box.press("Enter")
        page.locator("#sg-stream-text").wait_for(state="visible")
        page.locator("#sg-todos li").first.wait_for()
        approval = page.get_by_role("form", name="Approval needed")
        approval.wait_for()
        shot(page, f"console-{name}-01-approval")
        approval.get_by_role("button", name="Send the decision").click()
        page.locator("#sg-files a", has_text="demo.md").wait_for()
        page.locator("#sg-status", has_text="Ready").wait_for()
        page.locator("#sg-title-text", has_text="Plan a picnic").wait_for()
        listing.locator(f"#sg-title-{cid}", has_text="Plan a picnic").wait_for()
        shot(page, f"console-{name}-02-turn-done")
        shot(listing, f"console-{name}-03-list-title")

        page.get_by_role("link", name="Approvals").click()
        page.wait_for_url("**/inbox/")
        page.get_by_role("button", name="Sign out").click()
        # This project sends people home (LOGOUT_REDIRECT_URL): the landing page.
        page.get_by_role("link", name="Sign in").first.wait_for()
        shot(page, f"console-{name}-04-signed-out")
        page.wait_for_timeout(500)  # anything late (the list's socket closing)
    finally:
        context.close()

    assert console.problems == []
