"""Following turns in tests: a site on the fake provider, a subscriber's channel."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.contrib.auth import get_user_model

from sagents_django import services
from sagents_django.models import ACTIVE_RUN_STATUSES, AgentRun, DisplayMessage
from sagents_django.runtime import agent_server
from sagents_django.runtime.executors import wait_inline
from sagents_django.scope import Scope
from tests.runtime import stacks

EMBEDDED = {
    "FACTORY": "tests.runtime.agents.build_agent",
    "EXECUTOR": "inline",
    "MODEL": "sagents/demo",
}


@pytest.fixture(params=stacks.names())
async def site(request: Any, settings: Any) -> Any:
    """The fake provider of a site running turns on the stack ``request.param``
    (``stacks``: embedded, and production in the PostgreSQL pass)."""
    llm = use_stack(request, settings)
    request.getfixturevalue("litellm_warmed")  # a cold first call reads as a stall
    if request.param == "production":
        request.getfixturevalue("production_worker")
    yield llm
    await turns_ended()


def use_stack(request: Any, settings: Any) -> Any:
    """Settings for turns on the stack ``request.param``; its fake provider."""
    if request.param == "production":
        llm = request.getfixturevalue("production_llm")
        llm.reset()
        settings.CHANNEL_LAYERS = {"default": stacks.redis_layer()}
        settings.SAGENTS = {**EMBEDDED, **stacks.sagents_overrides(llm)}
    else:
        llm = request.getfixturevalue("fake_llm")
        settings.CHANNEL_LAYERS = {
            "default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}
        }
        settings.SAGENTS = {
            **EMBEDDED,
            "MODEL": llm.model,
            "MODEL_PARAMS": dict(llm.model_params),
        }
    return llm


async def turns_ended() -> None:
    """A turn still ending (its follow-up, its last writes) must not meet the
    flush of the test database."""
    assert await asyncio.to_thread(wait_inline, 30)
    assert await no_active_runs(30), "a turn was still running after the test"


async def no_active_runs(timeout: float) -> bool:
    """Wait for every run to end (a worker's turn may still be writing)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while await AgentRun.objects.filter(status__in=ACTIVE_RUN_STATUSES).aexists():
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def make_scope(name: str) -> Scope:
    user = get_user_model().objects.create_user(username=name)
    return Scope.for_user(user)


class Follower:
    """A subscriber's channel: what a socket consumer would receive."""

    def __init__(self, channel: str) -> None:
        self.channel = channel
        self.events: list[dict[str, Any]] = []

    async def until(self, event: str, timeout: float = 30) -> dict[str, Any]:
        layer = get_channel_layer()
        async with asyncio.timeout(timeout):
            while True:
                message = await layer.receive(self.channel)
                self.events.append(message)
                if message["event"] == event:
                    return message

    async def finished(self, run_id: Any, timeout: float = 30) -> dict[str, Any]:
        """The ``run_finished`` of ``run_id`` (a verb's own short run may end
        around it: a dismissal's, published after its commit)."""
        while True:
            event = await self.until("run_finished", timeout)
            if event["data"]["run_id"] == str(run_id):
                return event

    def names(self) -> list[str]:
        return [e["event"] for e in self.events]


async def follow(scope: Scope, conversation_id: Any) -> Follower:
    channel = await get_channel_layer().new_channel()
    await agent_server.asubscribe(scope, conversation_id, channel)
    return Follower(channel)


async def new_conversation(name: str = "alice") -> tuple[Scope, Any]:
    scope = await sync_to_async(make_scope)(name)
    conversation = await sync_to_async(services.create_conversation)(scope)
    return scope, conversation


async def rows_of(conversation: Any) -> list[DisplayMessage]:
    return await sync_to_async(list)(
        DisplayMessage.objects.filter(conversation=conversation.pk).order_by("pk")
    )


async def runs_of(conversation: Any) -> list[AgentRun]:
    return await sync_to_async(list)(
        AgentRun.objects.filter(conversation=conversation.pk).order_by("created_at")
    )


def client_page(scope: Scope, conversation: Any) -> str:
    """The chat page of ``conversation`` as its owner gets it."""
    from django.test import Client
    from django.urls import reverse

    client = Client()
    client.force_login(scope.user)
    url = reverse("sagents_django:conversation", args=[conversation.pk])
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()
