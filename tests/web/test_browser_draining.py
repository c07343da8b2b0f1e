"""A deploy under a person's open chat page: the daphne serving it is told to stop
(SIGTERM) while a load balancer that follows readiness sits in front of two.

The page's socket is closed with 4503 after the drain, the page reconnects (the
balancer sends it to the other daphne) and resyncs, and the conversation goes on
there: an approval asked on the first daphne is answered on the second, and the
page shows every row once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.browsers import shot
from tests.support.processes import Daphne
from tests.web.balancer import Balancer, prepare, site_env
from tests.web.browser import Site, new_conversation, row_ids, sign_in, wait_connected


def test_a_drained_daphne_hands_the_open_page_to_the_other_one(
    chrome: Any, tmp_path: Path
) -> None:
    env = site_env(tmp_path, SAGENTS_DRAIN_SECONDS="2")
    prepare(env)
    first = Daphne(env, tmp_path / "first.log")
    second = Daphne(env, tmp_path / "second.log")
    balancer = Balancer([first.port, second.port])
    context = chrome.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(60_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        site = Site(balancer.url, tmp_path / "db.sqlite3", env)
        sign_in(page, site, "alice")
        cid = new_conversation(page, site, title="Deploy")
        wait_connected(page)
        box = page.get_by_label("Message", exact=True)
        box.fill("Plan a dinner")
        box.press("Enter")
        page.get_by_role("form", name="Approval needed").wait_for()
        assert set(balancer.routed) == {first.port}

        first.sigterm()
        # (The "reconnecting" state can last a few milliseconds: the page opens
        # its second socket, through the balancer to the other daphne, at once.)
        page.wait_for_function("() => window.__sgOpen >= 2")
        shot(page, "40-drained-reconnected")
        assert first.process.wait(15) == 0
        assert balancer.routed[-1] == second.port

        approval = page.get_by_role("form", name="Approval needed")
        approval.get_by_role("button", name="Send the decision").click()
        page.locator("#sg-status", has_text="Ready").wait_for()
        page.locator("#sg-files a", has_text="demo.md").wait_for()
        page.wait_for_function(
            "n => document.querySelectorAll('#sg-messages > [id^=sg-msg-]').length"
            " === n",
            arg=len(site.rows(cid)),
        )
        shown = row_ids(page)
        assert shown == site.rows(cid)
        assert len(shown) == len(set(shown))
        shot(page, "41-drained-answered-elsewhere")
        # The page's two sockets: the chat's and its sidebar's (live titles).
        assert "Draining: closing 2 sockets" in first.output()
    finally:
        context.close()
        balancer.close()
        first.stop()
        second.stop()
    assert not errors, errors
