"""A second page opened while a reply streams (Debian's chromium against daphne): it
shows the text streamed so far at once, then the live words, and the reply once. On
the embedded stack (the buffer in daphne's memory) and the production one
(PostgreSQL, a Celery worker streaming, the buffer in Redis).

Both pages record every state of their streaming bubble (a MutationObserver added
before the page's own scripts), so the test sees what a person saw, frame by frame,
not only the end.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from sagents_django.core.providers.demo import plan_reply
from tests.support.browsers import shot
from tests.web.browser import (
    Site,
    new_conversation,
    row_ids,
    serve,
    sign_in,
    wait_connected,
)

# A production site (daphne and a Celery worker) starts and stops around a test:
# on a loaded machine that alone can pass the default 120 s.
pytestmark = pytest.mark.timeout(300)

REQUEST = "Plan a picnic by the river"
TOOLS = [
    {"type": "function", "function": {"name": name}}
    for name in ("write_todos", "write_file")
]
ASKED = {"role": "user", "content": REQUEST}
PLANNED = [
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "demo_call_1",
                "type": "function",
                "function": {"name": "write_todos", "arguments": "{}"},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "demo_call_1", "content": "ok"},
]
REPLY = plan_reply([ASKED], TOOLS).text
"""The demo model's first message of the turn (it plans the TODOs next)."""
NEXT = plan_reply([ASKED, *PLANNED], TOOLS).text
"""Its second message (then it asks to write a file, and the turn waits)."""

RECORDER = """
window.__sgStream = [];
new MutationObserver(() => {
  const el = document.getElementById("sg-stream-text");
  const text = el ? el.textContent : "";
  const seen = window.__sgStream;
  if (!seen.length || seen[seen.length - 1] !== text) { seen.push(text); }
}).observe(document, {subtree: true, childList: true, characterData: true});
"""


@pytest.fixture(scope="module", params=["embedded", "production"])
def site(request: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    # Slow words: a second page has time to open while the first message streams,
    # even on a machine busy with the rest of the suite (11 words: 6.6 s).
    yield from serve(
        tmp_path_factory.mktemp("late-joiner"),
        delay_ms=600,
        production=request.param == "production",
    )


def stream_states(page: Any) -> list[str]:
    return list(json.loads(page.evaluate("() => JSON.stringify(window.__sgStream)")))


def test_a_page_opened_mid_stream_shows_the_text_so_far_then_the_rest_once(
    chrome: Any, site: Site, request: Any
) -> None:
    stack = request.node.callspec.params["site"]
    context = chrome.new_context(viewport={"width": 1100, "height": 800})
    context.set_default_timeout(
        60_000
    )  # a cold first turn on a machine busy with the rest of the suite
    context.add_init_script(RECORDER)
    errors: list[str] = []
    try:
        first = context.new_page()
        first.on("pageerror", lambda exc: errors.append(str(exc)))
        sign_in(first, site, "alice")
        cid = new_conversation(first, site, title="Late joiner")
        wait_connected(first)
        box = first.get_by_label("Message", exact=True)
        box.fill(REQUEST)
        box.press("Enter")
        first.wait_for_function(
            "() => (document.getElementById('sg-stream-text') || {}).textContent"
            "?.split(' ').length > 3"
        )
        before = first.locator("#sg-stream-text").text_content() or ""

        second = context.new_page()
        second.on("pageerror", lambda exc: errors.append(str(exc)))
        second.goto(f"{site.url}/c/{cid}/")
        wait_connected(second)
        second.wait_for_function(
            "n => (document.getElementById('sg-stream-text') || {}).textContent"
            "?.length >= n",
            arg=len(before),
        )
        joined = second.locator("#sg-stream-text").text_content() or ""
        shot(second, f"40-late-joiner-mid-stream-{stack}")
        for page in (first, second):
            page.get_by_role("form", name="Approval needed").wait_for()
        shot(second, f"41-late-joiner-paused-{stack}")

        mid_reply = len(joined) < len(REPLY)
        seen_first, seen_second = stream_states(first), stream_states(second)
        shown = second.locator("#sg-messages").inner_text()
        rows_second, rows_first = row_ids(second), row_ids(first)
    finally:
        context.close()

    assert not errors, errors
    assert mid_reply, (joined, REPLY)  # the page did open mid-stream
    assert joined.startswith(before)  # the text so far, at once
    # Every state of both bubbles was the start of a message (never a word twice),
    # and both reached each message whole before its row took its place.
    for seen in (seen_first, seen_second):
        assert all(REPLY.startswith(t) or NEXT.startswith(t) for t in seen), seen
        assert REPLY in seen and NEXT in seen
    # The second page's first text was the in-flight text, not the next word alone.
    texts = [t for t in seen_second if t]
    assert texts[0].startswith(before)
    assert shown.count(REPLY) == 1
    assert rows_second == rows_first == site.rows(cid)
