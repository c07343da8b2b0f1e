"""The chat pages' socket (``ws/sagents/html/``): who may connect, and the
fragments it pushes for events and resyncs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser

from sagents_django import services
from sagents_django.routing import websocket_urlpatterns
from sagents_django.runtime import groups, layer
from sagents_django.runtime.publisher import display_message_json
from sagents_django.scope import Scope

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def memory_layer(settings: Any) -> None:
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}
    }


async def connect(user: Any, path: str) -> tuple[WebsocketCommunicator, bool]:
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    return communicator, connected


async def closed_with(communicator: WebsocketCommunicator) -> int | None:
    output = await communicator.receive_output(5)
    assert output["type"] == "websocket.close"
    return output.get("code")


@sync_to_async
def person(name: str, *, staff: bool = False) -> tuple[Any, Scope, Any]:
    user = get_user_model().objects.create_user(username=name, is_staff=staff)
    scope = Scope.for_user(user)
    return user, scope, services.create_conversation(scope, title=f"{name}'s")


async def open_page(user: Any, conversation_id: Any) -> Any:
    """A chat page's socket as the page opens it: connected, then resynced (a page
    resyncs on every open; frames before that wait for it)."""
    socket, _ = await connect(user, f"/ws/sagents/html/{conversation_id}/")
    await socket.send_to(text_data=json.dumps({"action": "resync", "after": None}))
    await socket.receive_from(5)
    return socket


async def test_a_stranger_is_closed_with_4401() -> None:
    _, _, conversation = await person("alice")
    socket, _ = await connect(AnonymousUser(), f"/ws/sagents/html/{conversation.pk}/")
    assert await closed_with(socket) == 4401


async def test_another_users_conversation_closes_the_socket_with_4404() -> None:
    _, _, conversation = await person("alice")
    bob, _, _ = await person("bob", staff=True)
    for path in (
        f"/ws/sagents/html/{conversation.pk}/",
        f"/ws/sagents/html/{conversation.pk}/debug/",
    ):
        socket, _ = await connect(bob, path)
        assert await closed_with(socket) == 4404


async def test_the_debug_stream_is_for_staff_only() -> None:
    alice, _, conversation = await person("alice")
    socket, _ = await connect(alice, f"/ws/sagents/html/{conversation.pk}/debug/")
    assert await closed_with(socket) == 4404


async def test_a_resync_sends_the_rows_after_the_pages_last_and_the_panels() -> None:
    alice, scope, conversation = await person("alice")
    first = await sync_to_async(services.append_text_message)(
        scope, conversation.pk, "user", "first"
    )
    await sync_to_async(services.append_text_message)(
        scope, conversation.pk, "assistant", "second <b>bold</b>"
    )
    socket, _ = await connect(alice, f"/ws/sagents/html/{conversation.pk}/")
    await socket.send_to(text_data=json.dumps({"action": "resync", "after": first.pk}))
    html = await socket.receive_from(5)
    await socket.disconnect()
    assert 'hx-swap-oob="beforeend:#sg-messages"' in html
    assert "second &lt;b&gt;bold&lt;/b&gt;" in html
    for panel in ("sg-status", "sg-todos", "sg-files", "sg-approvals", "sg-title-text"):
        assert f'id="{panel}"' in html
    # The title's text, not its bar: a rename form open there keeps what is typed.
    assert 'id="sg-title"' not in html and "sg-rename" not in html


@pytest.mark.parametrize(
    "frame", ["not json", "[]", '{"action": "send", "text": "x"}', "x" * 5000]
)
async def test_other_client_frames_are_ignored(frame: str) -> None:
    alice, _, conversation = await person("alice")
    socket, _ = await connect(alice, f"/ws/sagents/html/{conversation.pk}/")
    await socket.send_to(text_data=frame)
    assert await socket.receive_nothing(0.3)
    await socket.disconnect()


async def test_events_become_fragments_rows_appended_and_text_escaped() -> None:
    alice, scope, conversation = await person("alice")
    socket = await open_page(alice, conversation.pk)
    row = await sync_to_async(services.append_text_message)(
        scope, conversation.pk, "user", "<script>x</script>"
    )
    group = groups.conversation_group(conversation.pk)
    base = {"type": "agent.event", "conversation": str(conversation.pk)}
    await layer.group_send(
        group,
        {
            **base,
            "event": "display_message_saved",
            "seq": 1,
            "data": {"display_message": display_message_json(row)},
        },
    )
    saved = await socket.receive_from(5)
    await layer.group_send(
        group,
        {
            **base,
            "event": "llm_deltas",
            "seq": 2,
            "data": {"deltas": [{"content": "<img src=x onerror=alert(1)>"}]},
        },
    )
    delta = await socket.receive_from(5)
    await socket.disconnect()
    assert f'id="sg-msg-{row.pk}"' in saved and "&lt;script&gt;" in saved
    assert "<script>" not in saved
    assert delta == (
        '<div hx-swap-oob="beforeend:#sg-stream-text">'
        "&lt;img src=x onerror=alert(1)&gt;</div>"
    )


async def test_a_gap_in_seq_resyncs_the_page_from_the_database() -> None:
    alice, _, conversation = await person("alice")
    socket = await open_page(alice, conversation.pk)
    group = groups.conversation_group(conversation.pk)
    base = {"type": "agent.event", "conversation": str(conversation.pk)}
    delta = {"deltas": [{"content": "a"}]}
    await layer.group_send(
        group, {**base, "event": "llm_deltas", "seq": 1, "data": delta}
    )
    await socket.receive_from(5)
    await layer.group_send(
        group, {**base, "event": "llm_deltas", "seq": 5, "data": delta}
    )
    html = await socket.receive_from(5)
    await socket.disconnect()
    assert 'id="sg-messages"' in html and 'id="sg-status"' in html


async def test_the_list_page_hears_new_titles_of_the_users_conversations() -> None:
    alice, _scope, conversation = await person("alice")
    socket, _ = await connect(alice, "/ws/sagents/html/")
    # Stored as the runtime stores a generated title: no rename (which the
    # owner's group announces, tests/web/test_live_lists.py).
    await type(conversation).objects.filter(pk=conversation.pk).aupdate(title="Lake")
    await layer.group_send(
        groups.conversation_group(conversation.pk),
        {
            "type": "agent.event",
            "conversation": str(conversation.pk),
            "event": "conversation_title_generated",
            "seq": 1,
            "data": {"title": "Lake"},
        },
    )
    html = await socket.receive_from(5)
    await socket.disconnect()
    assert f'id="sg-title-{conversation.pk}"' in html and ">Lake<" in html


async def test_a_sub_agents_work_is_drawn_inside_its_task_card() -> None:
    from sagents_django.ui.transcript import dom_id

    alice, _, conversation = await person("alice")
    socket = await open_page(alice, conversation.pk)
    base = {
        "type": "agent.event",
        "conversation": str(conversation.pk),
        "subagent": {"name": "general-purpose", "task_call_id": "task-1"},
    }
    group = groups.conversation_group(conversation.pk)
    await layer.group_send(
        group,
        {
            **base,
            "event": "tool_execution_update",
            "seq": 1,
            "data": {"status": "executing", "name": "<b>read_file</b>"},
        },
    )
    html = await socket.receive_from(5)
    await socket.disconnect()
    assert f'hx-swap-oob="beforeend:#sg-sub-{dom_id("task-1")}"' in html
    assert "&lt;b&gt;read_file&lt;/b&gt; · executing" in html


async def test_without_a_channel_layer_the_socket_closes_with_1011(
    settings: Any,
) -> None:
    from sagents_django import protocol

    settings.CHANNEL_LAYERS = {}
    alice, _, conversation = await person("alice")
    socket, _ = await connect(alice, f"/ws/sagents/html/{conversation.pk}/")
    assert await closed_with(socket) == protocol.CLOSE_NO_CHANNEL_LAYER


async def test_a_page_opened_mid_reply_gets_the_text_so_far_then_only_newer_deltas() -> (
    None
):
    from sagents_django.models import AgentRun
    from sagents_django.runtime.publisher import publish

    alice, _, conversation = await person("alice")
    run = await AgentRun.objects.acreate(conversation=conversation, status="running")
    cid = str(conversation.pk)
    await publish(cid, "run_started", {"run_id": str(run.pk), "trigger": "message"})
    await publish(cid, "llm_deltas", {"deltas": [{"content": "Hello <wor"}]})
    on_its_way = await publish(cid, "llm_deltas", {"deltas": [{"content": "ld"}]})
    socket, _ = await connect(alice, f"/ws/sagents/html/{cid}/")
    await socket.send_to(text_data=json.dumps({"action": "resync", "after": None}))
    html = await socket.receive_from(5)
    # A delta numbered before the resync read reaches the socket late: skipped.
    group = groups.conversation_group(cid)
    base = {"type": "agent.event", "conversation": cid, "event": "llm_deltas"}
    await layer.group_send(
        group, {**base, "seq": on_its_way, "data": {"deltas": [{"content": "ld"}]}}
    )
    await publish(cid, "llm_deltas", {"deltas": [{"content": "!"}]})
    live = await socket.receive_from(5)
    await socket.disconnect()

    assert 'id="sg-stream"' in html
    assert '<div id="sg-stream-text" class="sg-plain" aria-live="polite"' in html
    assert ">Hello &lt;world</div>" in html
    assert live == '<div hx-swap-oob="beforeend:#sg-stream-text">!</div>'


async def test_a_run_starting_clears_the_streaming_bubble() -> None:
    alice, _, conversation = await person("alice")
    socket = await open_page(alice, conversation.pk)
    await layer.group_send(
        groups.conversation_group(conversation.pk),
        {
            "type": "agent.event",
            "conversation": str(conversation.pk),
            "event": "run_started",
            "seq": 1,
            "data": {"run_id": "r", "trigger": "message"},
        },
    )
    html = await socket.receive_from(5)
    await socket.disconnect()
    assert '<div id="sg-stream" class="sg-stream" hx-swap-oob="true"' in html
    assert (
        '<div id="sg-stream-text" class="sg-plain" aria-live="polite" aria-atomic="false"></div>'
        in html
    )


async def test_frames_that_cross_on_the_way_are_drawn_in_order_without_a_resync() -> (
    None
):
    alice, _, conversation = await person("alice")
    socket = await open_page(alice, conversation.pk)
    group = groups.conversation_group(conversation.pk)
    base = {"type": "agent.event", "conversation": str(conversation.pk)}

    for seq in (1, 3, 2):
        data = {"deltas": [{"content": f"<{seq}>"}]}
        await layer.group_send(
            group, {**base, "event": "llm_deltas", "seq": seq, "data": data}
        )
        if seq == 1:
            first = await socket.receive_from(5)
    crossed = await socket.receive_from(5)
    await socket.disconnect()

    stream = '<div hx-swap-oob="beforeend:#sg-stream-text">{}</div>'
    assert first == stream.format("&lt;1&gt;")
    assert crossed == stream.format("&lt;2&gt;") + stream.format("&lt;3&gt;")


async def test_a_page_opened_mid_turn_draws_the_plan_the_turn_wrote_so_far() -> None:
    from sagents_django.models import AgentRun
    from sagents_django.runtime.publisher import publish

    alice, _, conversation = await person("alice")
    run = await AgentRun.objects.acreate(conversation=conversation, status="running")
    cid = str(conversation.pk)
    await publish(cid, "run_started", {"run_id": str(run.pk), "trigger": "message"})
    todos = [{"id": "1", "content": "Pack <light>", "status": "in_progress"}]
    await publish(cid, "todos_updated", {"todos": todos})

    socket, _ = await connect(alice, f"/ws/sagents/html/{cid}/")
    await socket.send_to(text_data=json.dumps({"action": "resync", "after": None}))
    html = await socket.receive_from(5)
    await socket.disconnect()

    # The stored state has no plan yet (the turn saves it when it ends).
    assert "Nothing planned right now." not in html
    assert "in progress</span> Pack &lt;light&gt;</li>" in html


async def test_frames_before_the_pages_resync_wait_for_it() -> None:
    from sagents_django.models import AgentRun
    from sagents_django.runtime.publisher import publish

    alice, _, conversation = await person("alice")
    run = await AgentRun.objects.acreate(conversation=conversation, status="running")
    cid = str(conversation.pk)
    await publish(cid, "run_started", {"run_id": str(run.pk), "trigger": "message"})
    socket, _ = await connect(alice, f"/ws/sagents/html/{cid}/")

    await publish(cid, "llm_deltas", {"deltas": [{"content": "Hello "}]})
    early = await socket.receive_nothing(0.2)
    await socket.send_to(text_data=json.dumps({"action": "resync", "after": None}))
    resync = await socket.receive_from(5)
    await publish(cid, "llm_deltas", {"deltas": [{"content": "world"}]})
    live = await socket.receive_from(5)
    await socket.disconnect()

    assert early  # nothing drawn before the page read what it missed
    assert ">Hello </div>" in resync  # the text so far, once
    assert live == '<div hx-swap-oob="beforeend:#sg-stream-text">world</div>'
