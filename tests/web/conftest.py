"""Fixtures for the chat pages: two signed-in people and a conversation each, and
a browser."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from sagents_django import services
from sagents_django.scope import Scope


@pytest.fixture
def alice(db: None) -> Any:
    return get_user_model().objects.create_user(username="alice", password="pw")


@pytest.fixture
def bob(db: None) -> Any:
    return get_user_model().objects.create_user(username="bob", password="pw")


@pytest.fixture
def alice_client(alice: Any) -> Client:
    client = Client()
    client.force_login(alice)
    return client


@pytest.fixture
def bob_client(bob: Any) -> Client:
    client = Client()
    client.force_login(bob)
    return client


@pytest.fixture
def conversation(alice: Any) -> Any:
    return services.create_conversation(Scope.for_user(alice), title="Alice's")


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """What the views handed to agent_server (nothing runs)."""
    from sagents_django.runtime import agent_server

    calls: list[tuple[str, Any]] = []
    for verb in ("add_message", "resume", "cancel", "execute"):

        def record(scope: Any, cid: Any, *args: Any, _verb: str = verb, **kw: Any):
            calls.append((_verb, args[0] if args else None))
            return True

        monkeypatch.setattr(agent_server, verb, record)
    return calls


@pytest.fixture(scope="module")
def chrome() -> Iterator[Any]:
    """Debian's chromium through Playwright (``tests.support.browsers.launch``), for a
    module's browser tests (a module defining its own ``chrome`` keeps it)."""
    from tests.support.browsers import launch

    manager, browser = launch()
    try:
        yield browser
    finally:
        browser.close()
        manager.stop()
