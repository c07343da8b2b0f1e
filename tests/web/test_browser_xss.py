"""An XSS corpus through every way text reaches the chat pages, in a real browser.

Payloads go in as a person's messages (which the demo model echoes into its reply,
its file and the generated title), as a title typed by the person (and the title and
note of a fork of it), as a feedback comment, as the name of an uploaded file, and
as tool calls, tool results and errors written to the
transcript (what a hostile tool or model could produce). Every page that shows
them is opened; nothing may run (no dialog, no ``window.__xss``), and the DOM may
hold no event-handler attribute, no ``javascript:`` link and no script but ours.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browsers import shot
from tests.web.browser import Site, new_conversation, serve, sign_in, wait_connected

PAYLOADS = [
    "<script>window.__xss = 'script'</script>",
    "<img src=x onerror=\"window.__xss='img'\">",
    "[click me](javascript:window.__xss='link')",
    "<a href=\"javascript:window.__xss='a'\">a</a>",
    '" onmouseover="window.__xss=\'attr\'" x="',
    "'><svg onload=window.__xss='svg'>",
    "</textarea><script>window.__xss='textarea'</script>",
    "<details open ontoggle=\"window.__xss='details'\">",
    "![img](javascript:window.__xss='mdimg')",
    "<iframe srcdoc=\"<script>parent.__xss='iframe'</script>\"></iframe>",
]
CORPUS = "\n\n".join(PAYLOADS)

INJECT = """
import django, json, sys
django.setup()
from django.contrib.auth import get_user_model
from sagents_django import services
from sagents_django.scope import Scope
scope = Scope.for_user(get_user_model().objects.get(username="alice"))
cid = sys.argv[1]
for n, payload in enumerate(json.loads(sys.argv[2])):
    call = f"call-{n}"
    services.append_display_message(
        scope, cid, message_type="assistant", content_type="tool_call",
        content={"call_id": call, "name": payload, "arguments": {"x": payload}},
        status="completed",
    )
    services.append_display_message(
        scope, cid, message_type="tool", content_type="tool_result",
        content={"tool_call_id": call, "name": payload, "content": payload},
    )
    services.append_display_message(
        scope, cid, message_type="system", content_type="error",
        content={"text": payload},
    )
    services.append_display_message(
        scope, cid, message_type="assistant", content_type="thinking",
        content={"text": payload},
    )
"""

CHECK = """() => {
  const bad = [];
  for (const el of document.querySelectorAll('*')) {
    for (const attr of el.attributes) {
      if (attr.name.startsWith('on')) bad.push(el.tagName + ' ' + attr.name);
      if (/^\\s*javascript:/i.test(attr.value)) bad.push(el.tagName + ' ' + attr.name);
    }
  }
  for (const s of document.querySelectorAll('script')) {
    if (!s.src || new URL(s.src).origin !== location.origin) bad.push('script');
  }
  for (const tag of ['iframe', 'svg', 'img', 'object', 'embed']) {
    if (document.querySelector(tag)) bad.push(tag);
  }
  return {bad, xss: window.__xss || null};
}"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    yield from serve(tmp_path_factory.mktemp("xss-site"), delay_ms=0)


def clean(page: Any, dialogs: list[str]) -> None:
    found = page.evaluate(CHECK)
    assert found == {"bad": [], "xss": None}, page.url
    assert dialogs == []


def test_no_payload_of_the_corpus_runs_on_any_chat_page(
    chrome: Any, site: Site
) -> None:
    context = chrome.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(30_000)
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        sign_in(page, site, "alice")
        cid = new_conversation(page, site)
        wait_connected(page)
        box = page.get_by_label("Message", exact=True)
        box.fill(CORPUS)
        page.get_by_role("button", name="Send", exact=True).click()
        page.get_by_role("form", name="Approval needed").wait_for()
        clean(page, dialogs)  # live: streamed and pushed fragments
        page.goto(f"{site.url}/inbox/")
        clean(page, dialogs)
        page.get_by_role("button", name="Send the decision").click()
        page.goto(f"{site.url}/c/{cid}/")
        page.locator("#sg-status", has_text="Ready").wait_for()
        clean(page, dialogs)

        page.get_by_text("Rename").click()
        page.get_by_label("New title").fill(PAYLOADS[1] + PAYLOADS[4])
        page.get_by_role("button", name="Save").click()
        page.locator("#sg-title-text", has_text="onerror").wait_for()
        for n, payload in enumerate(PAYLOADS[:5]):
            page.get_by_label("Upload a text file to the agent").set_input_files(
                files=[
                    {
                        "name": f"file{n}-{payload.replace('/', '_')}.md",
                        "mimeType": "text/markdown",
                        "buffer": payload.encode(),
                    }
                ]
            )
            page.get_by_role("button", name="Upload", exact=True).click()
            page.locator("#sg-files a", has_text=f"file{n}-").first.wait_for()
        site.python(
            INJECT.replace("sys.argv[1]", repr(cid)).replace(
                "json.loads(sys.argv[2])", f"json.loads({json.dumps(PAYLOADS)!r})"
            )
        )
        page.reload()
        wait_connected(page)
        clean(page, dialogs)
        shot(page, "20-xss-conversation")

        # A feedback comment of the corpus, drawn by htmx and again on reload.
        rate = page.locator(".sg-rate").last
        rate.locator("summary").click()
        rate.locator("textarea").fill(CORPUS)
        rate.get_by_role("button", name="Bad reply").click()
        page.locator(".sg-rated", has_text="rated bad").wait_for()
        clean(page, dialogs)
        page.reload()
        wait_connected(page)
        clean(page, dialogs)
        # A fork: its title and its note carry the payload title.
        page.locator(".sg-fork button").last.click()
        page.wait_for_url(lambda url: "/c/" in url and cid not in url)
        wait_connected(page)
        page.locator(".sg-note", has_text="Forked from").wait_for()
        clean(page, dialogs)
        shot(page, "22-xss-fork")
        page.goto(f"{site.url}/usage/")
        clean(page, dialogs)
        page.goto(f"{site.url}/c/{cid}/")
        wait_connected(page)

        for link in page.locator("#sg-files a[href*='/files/open/']").all()[:6]:
            href = link.get_attribute("href")
            page.goto(f"{site.url}{href}" if href.startswith("/") else href)
            clean(page, dialogs)
            page.go_back()
        page.goto(f"{site.url}/")
        clean(page, dialogs)
        page.goto(f"{site.url}/?q=script")
        clean(page, dialogs)
        shot(page, "21-xss-search")
    finally:
        context.close()
