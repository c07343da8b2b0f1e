"""The JSON WebSocket protocol on the embedded default (in-memory layer, inline
executor, the fake provider): turns followed over the socket, refusals, bad frames."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.contrib.auth import get_user_model

from sagents_django import protocol
from sagents_django.approvals.records import arguments_hash
from sagents_django.core.events import EVENTS
from sagents_django.models import DisplayMessage
from sagents_django.runtime import agent_server, groups, viewers
from sagents_django.scope import Scope
from tests.fakes.openai_server import reply, tool_call
from tests.runtime import follow as follow_module
from tests.runtime.follow import follow, new_conversation
from tests.runtime.ws_client import connect, streamed

pytestmark = pytest.mark.django_db(transaction=True)

site = follow_module.site


def seqs_are_contiguous(frames: list[dict[str, Any]]) -> bool:
    seqs = [f["seq"] for f in frames]
    return seqs == list(range(seqs[0], seqs[0] + len(seqs)))


async def test_a_turn_followed_over_the_socket_arrives_in_order_without_gaps(
    site: Any,
) -> None:
    site.script(reply("Hello over the socket.", chunks=6))
    scope, conversation = await new_conversation()
    sock = await connect(scope.user)

    subscribed = await sock.send("subscribe", conversation=str(conversation.pk))
    sent = await sock.send("send", conversation=str(conversation.pk), text="Hi")
    finished = await sock.event("run_finished")
    await sock.disconnect()

    assert subscribed["ok"] and subscribed["reply"] == "subscribe"
    assert subscribed["status"] in ("idle", "not_running")
    assert subscribed["todos"] == []
    assert sent["ok"] and sent["run_id"] and sent["queued"] is False
    assert finished["data"]["status"] == "completed"
    assert finished["data"]["run_id"] == sent["run_id"]
    events = sock.events()
    assert seqs_are_contiguous(events)
    assert {e["conversation"] for e in events} == {str(conversation.pk)}
    names = [e["event"] for e in events]
    # Subscribed before anything happened: nothing in flight, counted from 0.
    assert events[0]["event"] == "in_flight" and events[0]["seq"] == 0
    assert events[0]["data"] == {
        "run_id": None,
        "text": "",
        "thinking": "",
        "tool_calls": [],
        "todos": [],
    }
    assert names[1] == "display_message_saved"
    assert names.index("run_started") < names.index("llm_deltas")
    assert names.index("llm_deltas") < names.index("llm_message")
    assert set(names) - {"in_flight"} <= set(EVENTS)  # in_flight: the socket's own
    assert streamed(events) == "Hello over the socket."
    user_row = events[1]["data"]["display_message"]
    assert user_row["message_type"] == "user" and user_row["content"]["text"] == "Hi"


async def test_history_gives_the_display_rows_a_resyncing_client_needs(
    site: Any,
) -> None:
    site.script(reply("Stored."))
    scope, conversation = await new_conversation()
    sock = await connect(scope.user)
    await sock.send("subscribe", conversation=str(conversation.pk))
    await sock.send("send", conversation=str(conversation.pk), text="Keep this")
    await sock.event("run_finished")

    page = await sock.send("history", conversation=str(conversation.pk))
    after_first = await sock.send(
        "history",
        conversation=str(conversation.pk),
        after=int(page["messages"][0]["id"]),
    )
    await sock.disconnect()

    texts = [(m["message_type"], m["content"]["text"]) for m in page["messages"]]
    assert texts == [("user", "Keep this"), ("assistant", "Stored.")]
    assert [m["id"] for m in after_first["messages"]] == [page["messages"][1]["id"]]


async def test_an_anonymous_socket_is_closed_with_4401() -> None:
    from django.contrib.auth.models import AnonymousUser

    sock = await connect(AnonymousUser())

    assert await sock.closed() == protocol.CLOSE_UNAUTHENTICATED


async def test_a_site_without_a_channel_layer_closes_the_socket_with_1011(
    settings: Any,
) -> None:
    from django.contrib.auth.models import AnonymousUser

    settings.CHANNEL_LAYERS = {}
    sock = await connect(AnonymousUser())

    assert await sock.closed() == protocol.CLOSE_NO_CHANNEL_LAYER


@pytest.mark.parametrize(
    "action, fields",
    [
        ("subscribe", {}),
        ("send", {"text": "let me in"}),
        ("cancel", {}),
        ("resume", {"decisions": [{"type": "approve"}]}),
        ("dismiss", {}),
        ("history", {}),
        ("history", {"before": 1}),
        ("unsubscribe", {}),
    ],
)
async def test_another_users_conversation_closes_the_socket_and_leaks_nothing(
    site: Any, action: str, fields: dict[str, Any]
) -> None:
    site.script(reply("Private words for alice."))
    alice, conversation = await new_conversation("alice")
    mallory, own = await new_conversation("mallory")
    sock = await connect(mallory.user)
    await sock.send("subscribe", conversation=str(own.pk))

    await sock.communicator.send_json_to(
        {"action": action, "conversation": str(conversation.pk), **fields}
    )
    code = await sock.closed()
    # Alice's turn runs to its end; nothing of it reaches mallory's socket.
    watcher = await follow(alice, conversation.pk)
    await agent_server.aadd_message(alice, conversation.pk, "secret")
    await watcher.until("run_finished")
    late = await sock.communicator.receive_nothing(0.2)
    await sock.disconnect()

    assert code == protocol.CLOSE_NOT_FOUND
    assert late
    assert not [f for f in sock.frames if f.get("conversation") == str(conversation)]
    # Only mallory's own conversation's in_flight frame, from her subscribe.
    assert [f["event"] for f in sock.frames if "event" in f] == ["in_flight"]
    assert (
        await DisplayMessage.objects.filter(conversation=conversation.pk).acount() == 2
    )
    assert await viewers.acount(str(conversation.pk)) == 1  # alice's follower only


async def test_a_conversation_that_does_not_exist_closes_the_socket_the_same_way(
    site: Any,
) -> None:
    scope, _ = await new_conversation()
    sock = await connect(scope.user)

    await sock.communicator.send_json_to(
        {"action": "subscribe", "conversation": "00000000-0000-4000-8000-000000000000"}
    )

    assert await sock.closed() == protocol.CLOSE_NOT_FOUND


@pytest.mark.parametrize(
    "text, code",
    [
        ("not json", "bad_frame"),
        ("[1, 2]", "bad_frame"),
        ('"subscribe"', "bad_frame"),
        ('{"action": "dance"}', "unknown_action"),
        ("{}", "unknown_action"),
        ('{"action": "subscribe"}', "invalid_input"),
        ('{"action": "subscribe", "conversation": "not-a-uuid"}', "invalid_input"),
        ('{"action": "subscribe", "conversation": 42}', "invalid_input"),
        ('{"action": "send", "id": [1], "conversation": "x"}', "invalid_input"),
        ('{"action": "send", "id": "' + "i" * 65 + '"}', "invalid_input"),
        (json.dumps({"action": "send", "text": "x" * (2 * 1024 * 1024)}), "too_large"),
        ("[" * 100_000 + "]" * 100_000, "bad_frame"),
    ],
)
async def test_a_malformed_frame_gets_an_error_frame_and_the_socket_stays_open(
    site: Any, text: str, code: str
) -> None:
    scope, conversation = await new_conversation()
    sock = await connect(scope.user)

    error = await sock.send_raw(text)
    still_open = await sock.send("subscribe", conversation=str(conversation.pk))
    await sock.disconnect()

    assert error["ok"] is False
    assert error["error"]["code"] == code
    assert error["error"]["message"]
    assert still_open["ok"] is True


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"decisions": "approve"}, "list"),
        ({"decisions": [{"type": "maybe"}]}, "maybe"),
        ({}, "decisions is required"),
        ({"decisions": [{"type": "approve"}]}, "Nothing to resume"),
    ],
)
async def test_bad_decisions_are_answered_with_an_error_frame_naming_the_problem(
    site: Any, fields: dict[str, Any], message: str
) -> None:
    scope, conversation = await new_conversation()
    sock = await connect(scope.user)

    error = await sock.send("resume", conversation=str(conversation.pk), **fields)
    await sock.disconnect()

    assert error["ok"] is False and error["reply"] == "resume"
    assert error["error"]["code"] in ("invalid_input", "conflict")
    assert message in error["error"]["message"]


async def test_a_bad_message_text_is_an_error_frame_and_writes_nothing(
    site: Any,
) -> None:
    scope, conversation = await new_conversation()
    sock = await connect(scope.user)

    error = await sock.send("send", conversation=str(conversation.pk), text="")
    missing = await sock.send("send", conversation=str(conversation.pk))
    await sock.disconnect()

    assert error["error"]["code"] == missing["error"]["code"] == "invalid_input"
    assert (
        await DisplayMessage.objects.filter(conversation=conversation.pk).acount() == 0
    )


async def test_cancel_over_the_socket_stops_the_stream_mid_way(site: Any) -> None:
    site.script(reply("word " * 200, chunks=200, delay=0.02))
    scope, conversation = await new_conversation()
    sock = await connect(scope.user)
    await sock.send("subscribe", conversation=str(conversation.pk))
    await sock.send("send", conversation=str(conversation.pk), text="Talk")
    await sock.event("llm_deltas")

    cancelled = await sock.send("cancel", conversation=str(conversation.pk))
    finished = await sock.event("run_finished")
    again = await sock.send("cancel", conversation=str(conversation.pk))
    await sock.disconnect()

    assert cancelled["ok"] and cancelled["cancelled"] is True
    assert finished["data"]["status"] == "cancelled"
    assert 0 < len(streamed(sock.events())) < len("word " * 200)
    assert again["cancelled"] is False
    assert seqs_are_contiguous(sock.events())


async def test_an_approval_is_resumed_over_the_socket_and_a_second_resume_conflicts(
    site: Any,
) -> None:
    site.script(
        reply(
            tool_calls=[
                tool_call("write_file", {"file_path": "/a.txt", "content": "hi"})
            ]
        ),
        reply("Written."),
        reply("Hello!"),
    )
    scope, conversation = await new_conversation()
    cid = str(conversation.pk)
    sock = await connect(scope.user)
    await sock.send("subscribe", conversation=cid)
    await sock.send("send", conversation=cid, text="Write it")
    paused = await sock.event("run_finished")
    waiting = await sock.send("send", conversation=cid, text="hello?")

    resumed = await sock.send(
        "resume", conversation=cid, decisions=[{"type": "approve"}]
    )
    finished = await sock.until(
        lambda f: (
            f.get("event") == "run_finished"
            and f["data"]["run_id"] == resumed.get("run_id")
        )
    )
    second = await sock.send(
        "resume", conversation=cid, decisions=[{"type": "approve"}]
    )
    await sock.disconnect()

    assert paused["data"]["status"] == "interrupted"
    interrupted = [
        e
        for e in sock.events()
        if e["event"] == "status_changed" and e["data"]["status"] == "interrupted"
    ]
    requests = interrupted[0]["data"]["data"]["action_requests"]
    assert [r["tool_name"] for r in requests] == ["write_file"]
    # Held on the paused run, answered after the decision.
    assert waiting["ok"] and waiting["queued"]
    assert waiting["run_id"] == paused["data"]["run_id"]
    assert resumed["ok"] and resumed["run_id"]
    assert finished["data"]["status"] == "completed"
    assert second["ok"] is False and second["error"]["code"] == "conflict"
    assert seqs_are_contiguous(sock.events())


async def test_a_resume_names_the_arguments_it_saw_and_a_stale_one_is_refused(
    site: Any,
) -> None:
    site.script(
        reply(
            tool_calls=[
                tool_call("write_file", {"file_path": "/a.txt", "content": "hi"})
            ]
        ),
        reply("Written."),
    )
    scope, conversation = await new_conversation()
    cid = str(conversation.pk)
    sock = await connect(scope.user)
    await sock.send("subscribe", conversation=cid)
    await sock.send("send", conversation=cid, text="Write it")
    paused = await sock.until(
        lambda f: (
            f.get("event") == "status_changed" and f["data"]["status"] == "interrupted"
        )
    )
    live = paused["data"]["data"]
    # A second client joining now is told what to decide, hashes included.
    late = await connect(scope.user)
    joined = await late.send("subscribe", conversation=cid)
    await late.disconnect()
    seen = [r["arguments_hash"] for r in live["action_requests"]]

    stale = await sock.send(
        "resume",
        conversation=cid,
        decisions=[{"type": "approve"}],
        arguments_hashes=["0" * 64],
    )
    malformed = await sock.send(
        "resume", conversation=cid, decisions=[{"type": "approve"}], arguments_hashes=7
    )
    still = await sock.send("subscribe", conversation=cid)
    resumed = await sock.send(
        "resume",
        conversation=cid,
        decisions=[{"type": "approve"}],
        arguments_hashes=seen,
    )
    finished = await sock.until(
        lambda f: (
            f.get("event") == "run_finished"
            and f["data"]["run_id"] == resumed.get("run_id")
        )
    )
    await sock.disconnect()

    assert seen == [arguments_hash({"file_path": "/a.txt", "content": "hi"})]
    assert joined["status"] == "interrupted"
    assert joined["interrupt"]["action_requests"] == live["action_requests"]
    assert stale["ok"] is False and stale["error"]["code"] == "invalid_input"
    assert "not the ones you saw" in stale["error"]["message"]
    assert malformed["ok"] is False and malformed["error"]["code"] == "invalid_input"
    assert still["status"] == "interrupted"  # nothing changed
    assert resumed["ok"] and finished["data"]["status"] == "completed"


async def test_a_pending_approval_is_dismissed_over_the_socket(site: Any) -> None:
    site.script(
        reply(
            tool_calls=[
                tool_call("write_file", {"file_path": "/a.txt", "content": "hi"})
            ]
        ),
        reply("No file, then."),
    )
    scope, conversation = await new_conversation()
    cid = str(conversation.pk)
    sock = await connect(scope.user)
    await sock.send("subscribe", conversation=cid)
    await sock.send("send", conversation=cid, text="Write it")
    await sock.event("run_finished")
    held = await sock.send("send", conversation=cid, text="or not?")

    dismissed = await sock.send("dismiss", conversation=cid)
    answered = await sock.until(
        lambda f: (
            f.get("event") == "run_finished"
            and f["data"]["run_id"] == dismissed.get("run_id")
        )
    )
    again = await sock.send("dismiss", conversation=cid)
    await sock.disconnect()

    assert held["ok"] and held["held"] and held["queued"]
    assert dismissed["ok"] and dismissed["run_id"]
    assert answered["data"]["status"] == "completed"
    assert again["ok"] is False and again["error"]["code"] == "conflict"
    rows = [
        f["data"]["display_message"]
        for f in sock.events()
        if f["event"] in ("display_message_saved", "display_message_updated")
    ]
    assert any(
        r["content_type"] == "tool_call" and r["status"] == "cancelled" for r in rows
    )
    assert any(r["metadata"].get("kind") == "approval_dismissed" for r in rows)
    assert seqs_are_contiguous(sock.events())


async def test_one_socket_follows_two_conversations_each_frame_naming_its_own(
    site: Any,
) -> None:
    def by_question(request: Any) -> Any:
        asked = request["messages"][-1]["content"]
        return reply(f"Answer to {asked}.", chunks=4)

    site.script(by_question, by_question)
    scope, first = await new_conversation()
    second = await sync_to_async(_second_conversation)(scope)
    sock = await connect(scope.user)
    for conversation in (first, second):
        await sock.send("subscribe", conversation=str(conversation.pk))

    await sock.send("send", conversation=str(first.pk), text="one")
    await sock.send("send", conversation=str(second.pk), text="two")
    # Either may finish first: wait until both have.
    await sock.until(
        lambda _frame: all(
            any(e["event"] == "run_finished" for e in sock.events(c.pk))
            for c in (first, second)
        )
    )
    await sock.disconnect()

    for conversation, asked in ((first, "one"), (second, "two")):
        events = sock.events(conversation.pk)
        assert seqs_are_contiguous(events)
        assert streamed(events) == f"Answer to {asked}."
    assert len(sock.events()) == len(sock.events(first.pk)) + len(
        sock.events(second.pk)
    )


def _second_conversation(scope: Scope) -> Any:
    from sagents_django import services

    return services.create_conversation(scope)


async def test_viewers_are_counted_and_released_on_unsubscribe_and_disconnect(
    site: Any,
) -> None:
    scope, conversation = await new_conversation()
    cid = str(conversation.pk)
    listener = await get_channel_layer().new_channel()
    await get_channel_layer().group_add(groups.conversation_group(cid), listener)
    one = await connect(scope.user)
    two = await connect(scope.user)

    await one.send("subscribe", conversation=cid)
    await two.send("subscribe", conversation=cid)
    await two.send("subscribe", conversation=cid)  # twice: still one viewer
    both = await viewers.acount(cid)
    status_watched = await agent_server.aget_inactivity_status(scope, cid)
    await one.send("unsubscribe", conversation=cid)
    after_unsubscribe = await viewers.acount(cid)
    await two.disconnect()
    after_disconnect = await viewers.acount(cid)
    shutdown = await get_channel_layer().receive(listener)
    await one.disconnect()

    assert (both, after_unsubscribe, after_disconnect) == (2, 1, 0)
    assert status_watched["timer_active"] is False
    assert shutdown["event"] == "agent_shutdown"
    assert shutdown["data"]["reason"] == "no_viewers"
    assert shutdown["data"]["agent_id"] == f"conversation-{cid}"
    assert shutdown["data"]["interrupt_restorable"] is None  # no approval pending
    assert (await agent_server.aget_inactivity_status(scope, cid))["timer_active"]


async def test_a_shutdown_says_whether_the_pending_approval_is_restorable(
    site: Any,
) -> None:
    site.script(
        reply(tool_calls=[tool_call("write_file", {"file_path": "/a", "content": "x"})])
    )
    scope, conversation = await new_conversation()
    cid = str(conversation.pk)
    follower = await follow(scope, cid)
    await agent_server.aadd_message(scope, cid, "write it")
    assert (await follower.until("run_finished"))["data"]["status"] == "interrupted"
    await agent_server.aunsubscribe(scope, cid, follower.channel)
    listener = await get_channel_layer().new_channel()  # a listener, no viewer
    await get_channel_layer().group_add(groups.conversation_group(cid), listener)
    socket = await connect(scope.user)
    await socket.send("subscribe", conversation=cid)

    await socket.disconnect()
    shutdown = await get_channel_layer().receive(listener)

    assert shutdown["event"] == "agent_shutdown"
    assert shutdown["data"]["interrupt_restorable"] is True


async def test_a_viewer_that_stops_renewing_ages_out(site: Any) -> None:
    _, conversation = await new_conversation()
    cid = str(conversation.pk)
    import time

    await sync_to_async(viewers.add)(
        cid, "specific.crashed!1", now=time.time() - viewers.VIEWER_TTL - 1
    )
    await sync_to_async(viewers.add)(cid, "specific.alive!1")

    assert await viewers.acount(cid) == 1
    assert await viewers.aremove(cid, "specific.alive!1") == 0


async def test_debug_streams_are_for_staff_and_a_late_subscriber_gets_the_todos(
    site: Any,
) -> None:
    plan = {"todos": [{"content": "Check the socket", "status": "pending"}]}
    site.script(reply(tool_calls=[tool_call("write_todos", plan)]), reply("Planned."))
    scope, conversation = await new_conversation()
    cid = str(conversation.pk)
    sock = await connect(scope.user)
    refused = await sock.send("subscribe_debug", conversation=cid)
    await sync_to_async(get_user_model().objects.filter(pk=scope.user.pk).update)(
        is_staff=True
    )
    scope.user.is_staff = True

    allowed = await sock.send("subscribe_debug", conversation=cid)
    await sock.send("subscribe", conversation=cid)
    await sock.send("send", conversation=cid, text="Hi")
    await sock.event("run_finished")
    await sock.disconnect()
    late = await connect(scope.user)
    joined = await late.send("subscribe", conversation=cid)
    await late.disconnect()

    assert refused["error"]["code"] == "forbidden"
    # A subscriber joining later gets the current plan in the subscribe reply.
    assert [t["content"] for t in joined["todos"]] == ["Check the socket"]
    assert "todos_updated" in [e["event"] for e in sock.events()]
    assert allowed["ok"] is True
    debug = [e for e in sock.events() if e.get("debug")]
    plain = [e for e in sock.events() if not e.get("debug")]
    assert "agent_state_update" in [e["event"] for e in debug]
    assert seqs_are_contiguous(debug) and seqs_are_contiguous(plain)
    assert set(e["event"] for e in debug) <= set(EVENTS)
