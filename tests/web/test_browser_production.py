"""The chat pages on the production stack: PostgreSQL, the Redis channel layer and
turns on a Celery worker process, with daphne serving the pages (what a deployment
runs). The same person's flow as on the embedded default: streaming, the plan, an
approval, a file, a reload showing every row once, a dropped socket resynced.

PostgreSQL and Redis must answer (``scripts/test-services`` starts them): without them this
fails, never skips.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browsers import shot
from tests.web.browser import (
    DroppingProxy,
    Site,
    new_conversation,
    row_ids,
    serve,
    sign_in,
    wait_connected,
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    yield from serve(tmp_path_factory.mktemp("prod"), delay_ms=60, production=True)


def test_a_turn_on_a_celery_worker_streams_pauses_and_resyncs_through_redis(
    chrome: Any, site: Site
) -> None:
    proxy = DroppingProxy(int(site.url.rsplit(":", 1)[1]))
    context = chrome.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(60_000)
    page = context.new_page()
    try:
        relayed = Site(f"http://127.0.0.1:{proxy.port}", site.database, site.env)
        sign_in(page, relayed, "alice")
        cid = new_conversation(page, relayed)
        wait_connected(page)
        box = page.get_by_label("Message", exact=True)
        box.fill("Plan a picnic on the production stack")
        box.press("Enter")
        stream = page.locator("#sg-stream-text")
        stream.wait_for(state="visible")
        page.locator("#sg-todos li").first.wait_for()
        approval = page.get_by_role("form", name="Approval needed")
        approval.wait_for()
        shot(page, "30-production-approval")
        proxy.drop()
        page.wait_for_function("() => window.__sgOpen >= 2")
        approval = page.get_by_role("form", name="Approval needed")
        approval.get_by_role("button", name="Send the decision").click()
        page.locator("#sg-status", has_text="Ready").wait_for()
        page.locator("#sg-files a", has_text="demo.md").wait_for()
        page.wait_for_function(
            "n => document.querySelectorAll('#sg-messages > [id^=sg-msg-]').length"
            " === n",
            arg=len(site.rows(cid)),
        )
        assert row_ids(page) == site.rows(cid)
        shot(page, "31-production-done")
        page.reload()
        wait_connected(page)
        assert row_ids(page) == site.rows(cid)
    finally:
        context.close()
        proxy.close()
