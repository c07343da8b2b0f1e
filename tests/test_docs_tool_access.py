"""The docs' "Tools offered by permission" factory (docs/tools.md) runs as written, through the
runtime (inline executor, in-memory layer) on the fake provider, for a user who
holds nothing and for a staff user who holds ``auth.change_user``."""

from __future__ import annotations

import asyncio
import sys
import types
from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core import mail

from sagents_django import services
from sagents_django.runtime import agent_server
from sagents_django.runtime.executors import wait_inline
from sagents_django.scope import Scope
from tests.docs import marked
from tests.fakes.openai_server import FakeOpenAIServer, reply, tool_call
from tests.runtime.follow import follow, no_active_runs

pytestmark = pytest.mark.django_db(transaction=True)

MODULE = "docs_tool_permissions"


@pytest.fixture
async def site(
    settings: Any, fake_llm: FakeOpenAIServer
) -> AsyncIterator[FakeOpenAIServer]:
    """The docs' block as the site's agent factory module."""
    module = types.ModuleType(MODULE)
    block = marked("tool-permissions")
    exec(compile(block.code, f"{block} ({MODULE})", "exec"), module.__dict__)
    sys.modules[MODULE] = module
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}
    }
    settings.SAGENTS = {
        "FACTORY": f"{MODULE}.build_agent",
        "EXECUTOR": "inline",
        "MODEL": fake_llm.model,
        "MODEL_PARAMS": dict(fake_llm.model_params),
    }
    try:
        yield fake_llm
        # A turn still ending must not publish into this test's closed loop.
        assert await asyncio.to_thread(wait_inline, 30)
        assert await no_active_runs(30), "a turn was still running after the test"
    finally:
        del sys.modules[MODULE]


def make_scope(name: str, *, staff: bool = False, change_user: bool = False) -> Scope:
    user = get_user_model().objects.create_user(username=name, is_staff=staff)
    if change_user:
        user.user_permissions.add(
            Permission.objects.get(
                content_type__app_label="auth", codename="change_user"
            )
        )
    return Scope.for_user(user)


async def start(name: str, **options: Any) -> tuple[Scope, Any, Any]:
    scope = await sync_to_async(make_scope)(name, **options)
    conversation = await sync_to_async(services.create_conversation)(scope)
    return scope, conversation, await follow(scope, conversation.pk)


EMAIL = tool_call(
    "send_email", {"to": "bob@example.com", "subject": "Hi", "body": "Hello Bob"}
)


def offered(request: Any) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools") or []}


async def test_a_user_without_permissions_waits_for_approval_and_is_never_offered_deactivate(
    site: FakeOpenAIServer,
) -> None:
    site.script(
        reply(tool_calls=[EMAIL, tool_call("deactivate_user", {"username": "bob"})]),
        reply("Sent; I cannot deactivate accounts."),
    )
    scope, conversation, follower = await start("alice")

    await agent_server.aadd_message(
        scope, conversation.pk, "Email Bob, close his account"
    )
    paused = await follower.until("run_finished")

    assert "send_email" in offered(site.requests[0])
    assert "deactivate_user" not in offered(site.requests[0])
    assert paused["data"]["status"] == "interrupted"
    waiting = await sync_to_async(agent_server.get_info)(scope, conversation.pk)
    requests = waiting["state"].interrupt_data["action_requests"]
    assert [r["tool_name"] for r in requests] == ["send_email"]  # not the refused one
    assert mail.outbox == []

    await agent_server.aresume(scope, conversation.pk, [{"type": "approve"}])
    finished = await follower.until("run_finished")

    assert finished["data"]["status"] == "completed"
    assert [m.subject for m in mail.outbox] == ["Hi"]
    results = [m["content"] for m in site.requests[1].messages if m["role"] == "tool"]
    assert results == ["Sent.", "Tool 'deactivate_user' is not available to you."]


async def test_staff_holding_the_permission_send_at_once_and_deactivate(
    site: FakeOpenAIServer,
) -> None:
    bob = await get_user_model().objects.acreate(username="bob")
    site.script(
        reply(tool_calls=[EMAIL, tool_call("deactivate_user", {"username": "bob"})]),
        reply("Done."),
    )
    scope, conversation, follower = await start("boss", staff=True, change_user=True)

    await agent_server.aadd_message(
        scope, conversation.pk, "Email Bob, close his account"
    )
    finished = await follower.until("run_finished")

    assert finished["data"]["status"] == "completed"
    assert offered(site.requests[0]) >= {"send_email", "deactivate_user"}
    assert [m.subject for m in mail.outbox] == ["Hi"]
    results = [m["content"] for m in site.requests[1].messages if m["role"] == "tool"]
    assert results == ["Sent.", "Deactivated 1 account(s)."]
    await bob.arefresh_from_db()
    assert not bob.is_active
