"""The chat pages in Debian's chromium against daphne: a person's whole session.

Each test looks at what a person sees (text streaming in, the plan and the files
appearing, approval forms, the inbox badge) and at the database behind it (every
row shown exactly once). Screenshots of each step land in ``test-artifacts/``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browsers import shot
from tests.web.browser import (
    Site,
    new_conversation,
    row_ids,
    run_turn,
    send,
    serve,
    sign_in,
    wait_connected,
)

TIMEOUT = 30_000


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    yield from serve(tmp_path_factory.mktemp("chat-site"), delay_ms=60)


@pytest.fixture
def tab(chrome: Any) -> Iterator[Any]:
    context = chrome.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on(
        "console",
        lambda m: (
            errors.append(f"{m.text} at {m.location} on {page.url}")
            if m.type == "error" and "Content Security Policy" in m.text
            else None
        ),
    )
    yield page
    context.close()
    assert not errors, errors


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


def test_an_approval_given_from_the_inbox_resumes_the_turn_and_the_badge_follows(
    tab: Any, site: Site
) -> None:
    page = tab
    sign_in(page, site, "alice")
    cid = new_conversation(page, site, title="Inbox trip")
    wait_connected(page)
    send(page, "Plan a trip to the lake")
    page.get_by_role("form", name="Approval needed").wait_for()
    badge = page.locator("#sg-inbox-count")
    badge.filter(has_text="1").wait_for()
    shot(page, "07-badge-counts-one")

    page.get_by_role("link", name="Approvals").click()
    item = page.locator(".sg-inbox-item", has_text="Inbox trip")
    item.wait_for()
    assert "write_file" in item.inner_text()
    shot(page, "08-inbox")
    item.get_by_role("button", name="Send the decision").click()
    page.wait_for_url("**/inbox/")
    assert page.locator(".sg-inbox-item", has_text="Inbox trip").count() == 0

    page.goto(f"{site.url}/c/{cid}/")
    page.locator("#sg-status", has_text="Ready").wait_for()
    page.locator("#sg-files a", has_text="demo.md").wait_for()
    assert page.locator("#sg-inbox-count").inner_text().strip() == "0"
    shot(page, "09-resumed-from-inbox")


def test_a_message_sent_before_an_approval_waits_for_it_and_dismiss_frees_the_page(
    tab: Any, site: Site
) -> None:
    """The jam (issue 16): a second message sent while the turn streams, the turn
    then pausing for approval. The message waits, the approval stays answerable,
    and Dismiss (nothing else: no Delete) gets the conversation going again."""
    page = tab
    sign_in(page, site, "alice")
    cid = new_conversation(page, site, title="Jam")
    wait_connected(page)
    send(page, "Plan a picnic for Saturday")
    page.locator("#sg-stream-text").wait_for(state="visible")
    send(page, "And bring lemonade")
    approval = page.get_by_role("form", name="Approval needed")
    approval.wait_for()
    note = page.locator("#sg-send-note")
    assert "answered once you decide" in note.inner_text()
    page.locator("#sg-inbox-count").filter(has_text="1").wait_for()
    shot(page, "10-approval-with-a-waiting-message")

    approval.get_by_role("button", name="Dismiss").click()
    page.locator("#sg-messages", has_text="Approval dismissed").wait_for()
    # The held message is answered: the demo plans again and asks again.
    page.locator(".sg-messages .sg-tool", has_text="write_file").nth(1).wait_for()
    approval = page.get_by_role("form", name="Approval needed")
    approval.wait_for()
    shot(page, "11-dismissed-then-the-held-message-answered")
    approval.get_by_role("button", name="Dismiss").click()
    page.locator("#sg-status", has_text="Ready").wait_for()
    assert page.get_by_role("form", name="Approval needed").count() == 0
    assert page.locator("#sg-inbox-count").inner_text().strip() == "0"
    shot(page, "12-free-again")
    shown = row_ids(page)
    assert len(shown) == len(set(shown))
    runs = site.query(
        "SELECT status FROM sagents_agent_runs WHERE conversation_id = ? "
        "ORDER BY created_at",
        cid.replace("-", ""),
    )
    assert "error" not in {status for (status,) in runs}


def test_stop_ends_a_running_turn_and_keeps_what_it_said(tab: Any, site: Site) -> None:
    page = tab
    sign_in(page, site, "alice")
    cid = new_conversation(page, site, title="Stopped")
    wait_connected(page)
    send(page, "Plan a long walk")
    stop = page.get_by_role("button", name="Stop")
    stop.wait_for()
    shot(page, "10-running-with-stop")
    stop.click()
    page.locator("#sg-status", has_text="Stopped").wait_for()
    assert page.get_by_role("button", name="Stop").count() == 0
    [(status,)] = site.query(
        "SELECT status FROM sagents_agent_runs WHERE conversation_id = ?",
        cid.replace("-", ""),
    )
    assert status == "cancelled"
    shot(page, "11-stopped")


def test_a_socket_dropped_mid_turn_reconnects_and_the_page_resyncs_without_doubles(
    tab: Any, site: Site
) -> None:
    from tests.web.browser import DroppingProxy

    page = tab
    proxy = DroppingProxy(int(site.url.rsplit(":", 1)[1]))
    try:
        relayed = Site(f"http://127.0.0.1:{proxy.port}", site.database, site.env)
        sign_in(page, relayed, "alice")
        cid = new_conversation(page, relayed, title="Dropped")
        wait_connected(page)
        send(page, "Plan a dinner")
        page.locator("#sg-stream-text").wait_for(state="visible")
        proxy.drop()
        page.locator("#sg-conn", has_text="reconnecting").wait_for()
        shot(page, "12-dropped")
        page.wait_for_function("() => window.__sgOpen >= 2")
        approval = page.get_by_role("form", name="Approval needed")
        approval.wait_for()
        reason = approval.get_by_label("Reason (used when you choose Reject)")
        reason.fill("half-typed")
        proxy.drop()  # and once more while the approval is pending
        page.wait_for_function("() => window.__sgOpen >= 3")
        page.wait_for_timeout(300)  # the resync has arrived: the form was kept
        assert reason.input_value() == "half-typed"
        approval.get_by_role("button", name="Send the decision").click()
        page.locator("#sg-status", has_text="Ready").wait_for()
        page.locator("#sg-files a", has_text="demo.md").wait_for()
        page.wait_for_function(
            f"() => document.querySelectorAll('#sg-messages > [id^=sg-msg-]').length"
            f" === {len(site.rows(cid))}"
        )
        shown = row_ids(page)
        assert shown == site.rows(cid)
        assert len(shown) == len(set(shown))
        shot(page, "13-resynced")
    finally:
        proxy.close()


def test_another_user_gets_a_404_and_a_closed_socket(tab: Any, site: Site) -> None:
    page = tab
    sign_in(page, site, "alice")
    cid = new_conversation(page, site, title="Alice only")
    page.context.clear_cookies()
    sign_in(page, site, "bob")
    response = page.goto(f"{site.url}/c/{cid}/")
    assert response is not None and response.status == 404
    shot(page, "14-bob-404")
    for path in (f"/c/{cid}/files/", f"/c/{cid}/inspect/"):
        answer = page.request.get(f"{site.url}{path}", max_redirects=0)
        assert answer.status in (302, 404)
    page.goto(f"{site.url}/")
    code = page.evaluate(
        """url => new Promise(done => {
            const socket = new WebSocket(url);
            socket.onclose = event => done(event.code);
        })""",
        f"{site.ws}/ws/sagents/html/{cid}/",
    )
    assert code == 4404


def test_the_page_reads_and_sends_with_javascript_off(chrome: Any, site: Site) -> None:
    context = chrome.new_context(java_script_enabled=False)
    context.set_default_timeout(TIMEOUT)
    page = context.new_page()
    try:
        sign_in(page, site, "alice")
        cid = new_conversation(page, site, title="No script")
        page.get_by_label("Message", exact=True).fill("Plan a quiet evening")
        # Without JavaScript each button submits a form: wait for the page it loads
        # before reloading, or the reload races the navigation.
        with page.expect_navigation():
            page.get_by_role("button", name="Send", exact=True).click()
        page.wait_for_url(f"**/c/{cid}/")
        assert "Plan a quiet evening" in page.locator("#sg-messages").inner_text()
        for _ in range(100):
            page.reload()
            if page.get_by_role("form", name="Approval needed").count():
                break
            page.wait_for_timeout(200)
        with page.expect_navigation():
            page.get_by_role("button", name="Send the decision").click()
        for _ in range(100):
            page.reload()
            if "Ready" in page.locator("#sg-status").inner_text():
                break
            page.wait_for_timeout(200)
        assert "demo.md" in page.locator("#sg-files").inner_text()
        # Every row is on the page (a row written just after the status turned
        # Ready shows on the next load: a page without script is not live).
        for _ in range(20):
            if len(site.rows(cid)) == page.locator("#sg-messages > [id]").count():
                break
            page.wait_for_timeout(200)
            page.reload()
        assert len(site.rows(cid)) == page.locator("#sg-messages > [id]").count()
        shot(page, "15-no-javascript")
    finally:
        context.close()


def test_the_conversation_page_fits_a_phone(chrome: Any, site: Site) -> None:
    context = chrome.new_context(viewport={"width": 390, "height": 844})
    context.set_default_timeout(TIMEOUT)
    page = context.new_page()
    try:
        sign_in(page, site, "alice")
        new_conversation(page, site, title="Phone")
        wait_connected(page)
        run_turn(page, "Plan a picnic with a very-long-word-" + "x" * 80)
        width = page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= 390
        shot(page, "16-phone")
    finally:
        context.close()
