"""A site whose turns run on a model litellm prices, with budgets on or off."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from sagents_django.runtime.executors import wait_inline
from tests.django.conftest import other_user, user
from tests.runtime.follow import EMBEDDED

__all__ = ["budget_site", "other_user", "user"]  # the users: tests.django's fixtures

PRICED = "openai/gpt-4o-mini"
"""In litellm's bundled map: $0.15 per million input tokens, $0.60 per million
output tokens."""


@pytest.fixture
async def budget_site(settings: Any, fake_llm: Any, litellm_warmed: Any) -> Any:
    """The embedded stack on a priced model; ``site.budgets(**BUDGETS)`` turns
    budgets on (``site.budgets(None)`` off, the default)."""
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}
    }

    def configure(budgets: Any = None, *, model: str = PRICED) -> None:
        settings.SAGENTS = {
            **EMBEDDED,
            "MODEL": model,
            "MODEL_PARAMS": {**fake_llm.model_params, "max_tokens": 1000},
            "BUDGETS": budgets,
        }

    configure()
    fake_llm.budgets = configure
    yield fake_llm
    assert await asyncio.to_thread(wait_inline, 30)
    await sync_to_async(connections.close_all)()


async def user_budget(user: Any, limit: str, soft_percent: int) -> Any:
    """A monthly ``Budget`` row of ``user``."""
    from decimal import Decimal

    from sagents_django.models import Budget

    return await Budget.objects.acreate(
        scope="user",
        user=user,
        period="month",
        limit=Decimal(limit),
        soft_percent=soft_percent,
    )
