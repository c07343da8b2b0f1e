"""What the AG-UI endpoint refuses, who may use it, and what it declares."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ag_ui.core import AgentCapabilities
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from sagents_django.agui import inputs, tokens
from sagents_django.models import DisplayMessage
from tests.agui.client import parse_sse, run_input
from tests.agui.test_runs import post_run, signed_in
from tests.fakes.openai_server import reply
from tests.runtime import follow as follow_module
from tests.runtime.follow import new_conversation

pytestmark = pytest.mark.django_db(transaction=True)

site = follow_module.site


async def test_bad_bodies_are_refused_with_the_status_that_says_why(
    site: Any,
) -> None:
    scope, conversation = await new_conversation()
    client = await signed_in(scope)
    thread = str(conversation.pk)
    huge = json.dumps(run_input(thread, "x" * (inputs.MAX_INPUT_BYTES + 10)))
    cases = [
        ("{not json", 400),
        ("[1, 2]", 400),
        (json.dumps({"threadId": thread}), 422),  # runId and messages missing
        (json.dumps({**run_input(thread, "hi"), "messages": "hi"}), 422),
        (json.dumps(run_input("not-a-uuid", "hi")), 422),
        (json.dumps({**run_input(thread, "hi"), "runId": "r" * 500}), 422),
        ("[" * 200 + "]" * 200, 422),
        (huge, 413),
    ]
    for body, expected in cases:
        response = await client.post("/agui/", body, content_type="application/json")
        assert response.status_code == expected, (body[:60], response.content)
        assert json.loads(response.content)["error"]["message"]
    assert not await DisplayMessage.objects.filter(conversation=conversation).aexists()


async def test_another_users_thread_and_an_unknown_one_are_the_same_404(
    site: Any,
) -> None:
    _, theirs = await new_conversation("bob")
    scope, _ = await new_conversation("alice")
    client = await signed_in(scope)
    for thread in (str(theirs.pk), "00000000-0000-4000-8000-000000000000"):
        status, text = await post_run(client, run_input(thread, "Let me in"))
        assert status == 404
        assert json.loads(text) == {
            "error": {"code": "not_found", "message": "No such thread"}
        }
        response = await client.get(f"/agui/{thread}/")
        assert response.status_code == 404
    assert not await DisplayMessage.objects.filter(conversation=theirs).aexists()


async def test_no_session_and_no_token_is_401_and_a_bearer_token_signs_in(
    site: Any,
) -> None:
    site.script(reply("Hello."))
    scope, conversation = await new_conversation()
    anonymous = AsyncClient()
    body = run_input(str(conversation.pk), "Hi")
    status, _ = await post_run(anonymous, body)
    assert status == 401
    response = await anonymous.post(
        "/agui/",
        body,
        content_type="application/json",
        headers={"Authorization": "Bearer forged"},
    )
    assert response.status_code == 401

    token = await sync_to_async(tokens.issue)(scope.user)
    response = await anonymous.post(
        "/agui/",
        body,
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200
    text = b"".join([c async for c in response.streaming_content]).decode()
    assert parse_sse(text)[-1].event["outcome"] == {"type": "success"}


async def test_a_token_stops_working_when_the_password_changes(site: Any) -> None:
    scope, _ = await new_conversation()
    token = await sync_to_async(tokens.issue)(scope.user)
    assert (await sync_to_async(tokens.user_for)(token)).pk == scope.user.pk

    def change_password() -> None:
        scope.user.set_password("a new one")
        scope.user.save()

    await sync_to_async(change_password)()
    assert await sync_to_async(tokens.user_for)(token) is None


async def test_a_sessions_post_needs_the_csrf_token(site: Any) -> None:
    scope, conversation = await new_conversation()
    client = AsyncClient(enforce_csrf_checks=True)
    await client.aforce_login(scope.user)
    status, text = await post_run(client, run_input(str(conversation.pk), "Hi"))
    assert status == 403, text


async def test_the_capabilities_are_agui_capabilities_and_declare_resumable(
    site: Any,
) -> None:
    response = await AsyncClient().get("/agui/capabilities/")
    capabilities = AgentCapabilities.model_validate(json.loads(response.content))
    assert capabilities.transport is not None
    assert capabilities.transport.resumable is True
    assert capabilities.human_in_the_loop is not None
    assert capabilities.human_in_the_loop.interrupts is True


async def test_without_a_channel_layer_the_endpoint_says_so(
    site: Any, settings: Any
) -> None:
    scope, conversation = await new_conversation()
    client = await signed_in(scope)
    settings.CHANNEL_LAYERS = {}

    status, text = await post_run(client, run_input(str(conversation.pk), "Hi"))

    assert status == 503, text
    assert not await DisplayMessage.objects.filter(conversation=conversation).aexists()


async def test_a_read_share_may_follow_the_thread_but_not_run_it(site: Any) -> None:
    from sagents_django.sharing.services import share

    owner, conversation = await new_conversation("bob")
    reader, _ = await new_conversation("alice")
    await sync_to_async(share)(owner, conversation.pk, reader.user, "read")
    client = await signed_in(reader)

    status, _ = await post_run(client, run_input(str(conversation.pk), "Let me in"))
    assert status == 404
    response = await client.get(f"/agui/{conversation.pk}/")
    assert response.status_code == 200
    text = b"".join([c async for c in response.streaming_content]).decode()
    assert parse_sse(text)[-1].event["type"] == "RUN_FINISHED"
    assert not await DisplayMessage.objects.filter(conversation=conversation).aexists()


async def test_a_write_share_runs_a_turn_in_the_owners_conversation(site: Any) -> None:
    from sagents_django.sharing.services import share

    site.script(reply("Hello, guest."))
    owner, conversation = await new_conversation("bob")
    writer, _ = await new_conversation("alice")
    await sync_to_async(share)(owner, conversation.pk, writer.user, "write")
    client = await signed_in(writer)

    status, text = await post_run(client, run_input(str(conversation.pk), "Hi"))

    assert status == 200, text
    assert parse_sse(text)[-1].event["outcome"] == {"type": "success"}
