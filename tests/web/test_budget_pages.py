"""Budgets in a browser: the typed "budget exhausted" row in the chat, and what is
left on My usage (the site in daphne, the offline demo model)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browsers import shot
from tests.web.browser import Site, new_conversation, serve, sign_in, wait_connected

LIMITS = """
import django
django.setup()
from decimal import Decimal
from django.contrib.auth import get_user_model
from sagents_django.models import Budget
alice = get_user_model().objects.get(username="alice")
Budget.objects.create(scope="user", user=alice, period="day", limit=Decimal("0"))
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    yield from serve(
        tmp_path_factory.mktemp("budget-site"),
        delay_ms=0,
        settings="tests.web.budget_site_settings",
    )


def test_an_exhausted_budget_shows_in_the_chat_and_on_my_usage(
    chrome: Any, site: Site
) -> None:
    site.python(LIMITS)
    context = chrome.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(30_000)
    page = context.new_page()
    try:
        sign_in(page, site, "alice")
        new_conversation(page, site)
        wait_connected(page)
        page.get_by_label("Message", exact=True).fill("Plan my week")
        page.get_by_role("button", name="Send", exact=True).click()
        error = page.locator(".sg-error", has_text="Budget exhausted")
        try:
            error.wait_for()
        finally:
            shot(page, "budget-exhausted-chat")
        assert "today's budget for you is $0" in error.inner_text()

        page.goto(f"{site.url}/usage/")
        table = page.locator("#sg-budgets")
        assert "You, today: $0.00" in table.inner_text()
        assert "(used up)" in table.inner_text()
        shot(page, "budget-my-usage")
    finally:
        context.close()
