"""An XSS corpus through every way text reaches the chat pages, in a real browser.

Payloads go in as a person's messages (which the demo model echoes into its reply,
its file and the generated title), as a title typed by the person (and the title and
note of a fork of it), as a feedback comment, as the name of an uploaded file, as
tool calls, tool results and errors written to the transcript (what a hostile tool
or model could produce), as a tool's JSON schema drawn as approval fields (property
names, enum values, descriptions, defaults, arguments) beside the diff of a file
call, and as search snippets. Every page that shows
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

PAUSE = """
import django, json
django.setup()
from django.contrib.auth import get_user_model
from sagents_django import services
from sagents_django.models import AgentState
from sagents_django.scope import Scope
scope = Scope.for_user(get_user_model().objects.get(username="alice"))
payloads = json.loads(PAYLOADS)
conversation = services.create_conversation(scope, title="Hostile schema")
schema = {"type": "object", "properties": {
    p: {"type": ["string", "integer", "boolean", "string"][n % 4],
        "description": p, "maxLength": 5}
    for n, p in enumerate(payloads)
}}
schema["properties"]["choice"] = {"enum": payloads, "description": payloads[1]}
arguments = {p: (p if n % 4 in (0, 3) else 1 if n % 4 == 1 else True)
             for n, p in enumerate(payloads)}
arguments["choice"] = payloads[2]
requests = [
    {"tool_call_id": "h1", "tool_name": payloads[0], "arguments": arguments,
     "allowed_decisions": ["approve", "edit", "reject"], "parameters": schema,
     "description": payloads[4]},
    {"tool_call_id": "h2", "tool_name": "write_file",
     "arguments": {"file_path": "/" + payloads[5], "content": chr(10).join(payloads)},
     "allowed_decisions": ["approve", "edit", "reject"]},
]
AgentState.objects.create(conversation=conversation, state_data={
    "version": 1, "serialized_at": "2026-01-01T00:00:00+00:00",
    "state": {"messages": [], "todos": [], "metadata": {},
              "interrupt_data": {"type": "hitl", "action_requests": requests}}})
print(conversation.pk)
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
        for query in ("script", "onerror", "javascript"):
            page.goto(f"{site.url}/?q={query}")
            assert page.locator(".sg-snippet mark").count() >= 1
            clean(page, dialogs)
        shot(page, "21-xss-search")

        hostile = site.python(
            PAUSE.replace("PAYLOADS", repr(json.dumps(PAYLOADS)))
        ).strip()
        page.goto(f"{site.url}/c/{hostile}/")
        form = page.get_by_role("form", name="Approval needed")
        form.wait_for()
        assert form.locator(".sg-args .sg-field").count() == len(PAYLOADS) + 1
        assert form.locator(".sg-diff").count() == 1
        clean(page, dialogs)
        shot(page, "22-xss-approval-fields")
        # Sent back as an edit: the schema's checks answer, drawn beside the
        # fields, and still nothing runs.
        form.get_by_label("Edit the arguments").first.check()
        form.locator("fieldset.sg-args").evaluate(
            "fs => fs.querySelectorAll('[maxlength]').forEach(e => e.removeAttribute('maxlength'))"
        )
        form.get_by_role("button", name="Send all 2 decisions").click()
        page.locator(".sg-field-error").first.wait_for()
        clean(page, dialogs)
        page.goto(f"{site.url}/inbox/")
        clean(page, dialogs)
    finally:
        context.close()
