"""Pytest fixtures for the fake OpenAI-compatible server.

Registered suite-wide by ``pytest_plugins = ["tests.fakes.fixtures"]`` in
tests/conftest.py.

    async def test_agent_answers(fake_llm):
        fake_llm.script(reply("Hello", chunks=3))
        await litellm.acompletion(model=fake_llm.model, **fake_llm.model_params, ...)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAIServer


def litellm_params(server: FakeOpenAIServer) -> dict[str, Any]:
    """``{"api_base": ..., "api_key": "test"}`` for litellm calls to ``server``."""
    return dict(server.model_params)


@pytest.fixture
def fake_llm() -> Iterator[FakeOpenAIServer]:
    """A started fake server, stopped at teardown.

    Unconsumed replies do not fail the test: assert on ``fake_llm.remaining`` (and
    ``fake_llm.exhausted``) where it matters.
    """
    server = FakeOpenAIServer().start()
    try:
        yield server
    finally:
        server.stop()
