"""Fixtures for core tests: agents wired to the fake provider through both transports."""

from __future__ import annotations

import pytest

from sagents_django.core import ChatModel, Tool
from tests.fakes.openai_server import FakeOpenAIServer


@pytest.fixture(scope="session", autouse=True)
def litellm_imported() -> None:
    """Import litellm once up front (4-5 s), so no test's timeout pays for it."""
    from sagents_django.core.transports import import_litellm

    import_litellm()


@pytest.fixture(params=["litellm", "openai"])
def transport(request: pytest.FixtureRequest) -> str:
    """Every chain test runs through litellm and through the lean httpx path."""
    if request.param == "litellm":
        request.getfixturevalue("litellm_warmed")
    return request.param


@pytest.fixture
def chat_model(fake_llm: FakeOpenAIServer, transport: str) -> ChatModel:
    return model_for(fake_llm, transport)


def model_for(server: FakeOpenAIServer, transport: str, **options: object) -> ChatModel:
    defaults: dict[str, object] = {
        "max_retries": 2,
        "retry_delay": 0.01,
        # Generous: on a busy machine litellm's own per-call work can block the loop
        # for over a second. Tests of stalls pass their own, shorter timeout.
        "stream_idle_timeout": 10.0,
        "request_timeout": 5.0,
    }
    defaults.update(options)
    return ChatModel(
        model=server.model,
        params=dict(server.model_params),
        transport=transport,  # type: ignore[arg-type]
        **defaults,  # type: ignore[arg-type]
    )


def _add(args: dict, _context: object) -> str:
    return str(args["a"] + args["b"])


@pytest.fixture
def add_tool() -> Tool:
    return Tool(
        name="add",
        description="Add two numbers.",
        function=_add,
        parameters={
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    )
