"""Approvals across people in chromium: alice's turn pauses; carol, who holds the
permission, sees it in her inbox and decides it through its signed link's
confirmation page; bob, who does not, is refused the same link; alice's page goes
on. Screenshots in test-artifacts/ (40-44)."""

from __future__ import annotations

from collections.abc import Iterator
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

GRANT = """
import django
django.setup()
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
carol = get_user_model().objects.get(username="carol")
carol.user_permissions.add(Permission.objects.get(codename="decide_approvals"))
"""

LINK = """
import django
django.setup()
from sagents_django.approvals import links
from sagents_django.approvals.models import ApprovalRequest
print(links.path_for(ApprovalRequest.objects.get(status="pending")))
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    yield from serve(
        tmp_path_factory.mktemp("approvals-site"),
        delay_ms=0,
        settings="tests.web.approval_site_settings",
    )


def new_page(chrome: Any, errors: list[str]) -> Any:
    context = chrome.new_context(viewport={"width": 1200, "height": 860})
    context.set_default_timeout(TIMEOUT)
    page = context.new_page()
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on(
        "console",
        lambda m: (
            errors.append(m.text) if "Content Security Policy" in m.text else None
        ),
    )
    return page


def test_another_person_decides_from_the_inbox_and_the_signed_link(
    chrome: Any, site: Site
) -> None:
    errors: list[str] = []
    site.python(GRANT)
    alice = new_page(chrome, errors)
    sign_in(alice, site, "alice")
    cid = new_conversation(alice, site, title="Quarterly notes")
    wait_connected(alice)
    send(alice, "Write the quarterly notes")
    alice.get_by_role("form", name="Approval needed").wait_for()
    shot(alice, "40-approvals-alice-waits")

    carol = new_page(chrome, errors)
    sign_in(carol, site, "carol")
    carol.goto(f"{site.url}/inbox/")
    item = carol.locator(".sg-inbox-item", has_text="Quarterly notes")
    item.wait_for()
    assert "write_file" in item.inner_text()
    shot(carol, "41-approvals-carol-inbox")

    link = site.python(LINK).strip()
    bob = new_page(chrome, errors)
    sign_in(bob, site, "bob")
    bob.goto(f"{site.url}{link}")
    assert "not for your account" in bob.locator("main").inner_text()
    assert "write_file" not in bob.content()
    shot(bob, "42-approvals-link-refused-to-bob")

    carol.goto(f"{site.url}{link}")
    carol.get_by_role("heading", name="The agent asks before it acts").wait_for()
    assert "write_file" in carol.locator(".sg-link-request").inner_text()
    shot(carol, "43-approvals-link-confirmation")
    assert site.query("SELECT count(*) FROM sagents_approval_votes") == [(0,)]
    carol.get_by_role("button", name="Send the decision").click()
    carol.get_by_role("heading", name="Decision recorded").wait_for()
    shot(carol, "44-approvals-link-decided")

    alice.locator("#sg-status", has_text="Ready").wait_for()
    alice.locator("#sg-files a", has_text="demo.md").wait_for()
    assert alice.locator("#sg-approvals form").count() == 0
    shot(alice, "45-approvals-alice-resumed")
    votes = site.query(
        "SELECT u.username, v.decision, v.via FROM sagents_approval_votes v "
        "JOIN auth_user u ON u.id = v.user_id"
    )
    assert votes == [("carol", "approve", "link")]
    chain = site.query(
        "SELECT status, execution_status FROM sagents_approval_requests "
        "WHERE conversation_ref = ?",
        cid,
    )
    assert chain == [("approved", "completed")]
    carol.goto(f"{site.url}{link}")  # the link is spent
    assert "already used" in carol.locator("main").inner_text()
    assert errors == []
