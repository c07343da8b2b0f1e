"""Messages during a turn, notifications, failing providers, racing approvals."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import OperationalError, connection

from sagents_django.exceptions import Conflict, InvalidInput, RunConflict
from sagents_django.models import AgentRun
from sagents_django.runtime import agent_server
from tests.fakes.openai_server import fault, reply, tool_call
from tests.runtime import follow as follow_module
from tests.runtime.follow import (
    client_page,
    follow,
    new_conversation,
    rows_of,
    runs_of,
)

pytestmark = pytest.mark.django_db(transaction=True)

site = follow_module.site

SLOW = {"chunks": 20, "delay": 0.03}
"""A reply that streams for about half a second: long enough to talk over."""


def with_policy(settings: Any, policy: str) -> None:
    settings.SAGENTS = {**settings.SAGENTS, "DOUBLE_TEXT": policy}


# Double texting -----------------------------------------------------------------
async def test_a_message_during_a_turn_is_queued_and_answered_next(site: Any) -> None:
    site.script(reply("First answer.", **SLOW), reply("Second answer."))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)

    first = await agent_server.aadd_message(scope, conversation.pk, "one")
    await follower.until("llm_deltas")
    second = await agent_server.aadd_message(scope, conversation.pk, "two")
    queued = await follower.until("message_queued")
    await follower.until("run_finished")
    last = await follower.until("run_finished")

    assert second.queued and second.run_id == first.run_id
    assert queued["data"]["display_message"]["content"]["text"] == "two"
    assert last["data"]["trigger"] == "queued"
    assert last["data"]["status"] == "completed"
    sent = [m["content"] for m in site.requests[1].messages if m["role"] != "system"]
    assert sent == ["one", "First answer.", "two"]
    rows = await rows_of(conversation)
    assert [r.content.get("text") for r in rows] == [
        "one",
        "two",
        "First answer.",
        "Second answer.",
    ]
    # Each row names its run: the one that answers a message, or that wrote it.
    follow_up = last["data"]["run_id"]
    assert [str(r.run_id) for r in rows] == [
        first.run_id,
        follow_up,
        first.run_id,
        follow_up,
    ]
    assert queued["data"]["display_message"]["run_id"] is None  # not yet known


async def test_the_reject_policy_refuses_a_message_and_writes_nothing(
    site: Any, settings: Any
) -> None:
    with_policy(settings, "reject")
    site.script(reply("Busy answering.", **SLOW))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "one")
    await follower.until("llm_deltas")

    with pytest.raises(RunConflict):
        await agent_server.aadd_message(scope, conversation.pk, "two")
    await follower.until("run_finished")

    assert [r.content.get("text") for r in await rows_of(conversation)] == [
        "one",
        "Busy answering.",
    ]
    assert len(await runs_of(conversation)) == 1


async def test_the_interrupt_policy_stops_the_turn_and_runs_the_new_message(
    site: Any, settings: Any
) -> None:
    with_policy(settings, "interrupt")
    site.script(reply("word " * 100, chunks=100, delay=0.03), reply("New answer."))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "one")
    await follower.until("llm_deltas")

    await agent_server.aadd_message(scope, conversation.pk, "never mind, two")
    cut = await follower.until("run_finished")
    follow_up = await follower.until("run_finished")

    assert cut["data"]["status"] == "cancelled"
    assert follow_up["data"]["status"] == "completed"
    history = [m for m in site.requests[1].messages if m["role"] != "system"]
    assert history[0]["content"] == "one"
    assert history[-1]["content"] == "never mind, two"


async def test_a_burst_of_twenty_submits_loses_and_doubles_nothing(site: Any) -> None:
    site.script(*[reply(f"Answer {i}.") for i in range(21)])
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)

    submissions = await asyncio.gather(
        *(
            agent_server.aadd_message(scope, conversation.pk, f"message {i}")
            for i in range(20)
        )
    )
    finished = await follower.until("run_finished")
    while finished["data"]["next_run_id"] is not None:
        finished = await follower.until("run_finished")

    assert finished["data"]["status"] == "completed"
    assert sum(not s.queued for s in submissions) == 1
    rows = await rows_of(conversation)
    users = sorted(r.content["text"] for r in rows if r.message_type == "user")
    assert users == sorted(f"message {i}" for i in range(20))
    info = await agent_server.aget_info(scope, conversation.pk)
    in_state = sorted(m.text for m in info["state"].messages if m.role == "user")
    assert in_state == users  # each message in the agent's memory exactly once


# The limit is read where the turn ends (the worker): a setting changed inside a
# test reaches only this process.
@pytest.mark.parametrize("site", ["embedded"], indirect=True)
async def test_a_chain_of_queued_turns_stops_after_the_limit(
    site: Any, settings: Any
) -> None:
    settings.SAGENTS = {**settings.SAGENTS, "MAX_QUEUED_ROUNDS": 1}
    site.script(reply("One.", **SLOW), reply("Two.", **SLOW), reply("Three."))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "a")
    await follower.until("llm_deltas")
    await agent_server.aadd_message(scope, conversation.pk, "b")
    await follower.until("run_finished")
    await follower.until("llm_deltas")
    await agent_server.aadd_message(scope, conversation.pk, "c")
    await follower.until("run_finished")
    halted = await follower.until("run_finished")

    assert halted["data"]["status"] == "error"
    assert "queued turns in a row" in halted["data"]["error"]
    info = await agent_server.aget_info(scope, conversation.pk)
    assert [m.text for m in info["state"].messages if m.role == "user"] == [
        "a",
        "b",
        "c",
    ]
    assert len(site.requests) == 2


# Notifications ------------------------------------------------------------------
async def test_notify_while_idle_is_applied_at_once_and_saved(site: Any) -> None:
    scope, conversation = await new_conversation()

    await agent_server.anotify_middleware(
        scope, conversation.pk, "notes", {"page": "/blog"}
    )

    info = await agent_server.aget_info(scope, conversation.pk)
    assert info["state"].get_metadata("notes") == [{"page": "/blog"}]
    [run] = await runs_of(conversation)
    assert (run.trigger, run.status) == ("notify", "completed")


async def test_notify_while_running_reaches_the_next_step(site: Any) -> None:
    site.script(
        reply(tool_calls=[tool_call("ls", {})], delay=0.3),
        reply("Done."),
    )
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "look")
    await follower.until("run_started")

    await agent_server.anotify_middleware(scope, conversation.pk, "notes", "hello")
    await follower.until("run_finished")

    info = await agent_server.aget_info(scope, conversation.pk)
    assert info["state"].get_metadata("notes") == ["hello"]


@pytest.mark.parametrize(
    ("middleware_id", "message"),
    [("", {}), (None, {}), ("notes", object()), ("notes", "x" * 300_000)],
)
async def test_a_bad_notification_is_refused(
    site: Any, middleware_id: Any, message: Any
) -> None:
    scope, conversation = await new_conversation()
    with pytest.raises(InvalidInput):
        await agent_server.anotify_middleware(
            scope, conversation.pk, middleware_id, message
        )
    assert await runs_of(conversation) == []


# Failing providers --------------------------------------------------------------
@pytest.mark.parametrize(
    ("failure", "retryable"),
    [
        (fault.http(429, message="Rate limit reached"), True),
        (fault.http(500, message="Upstream exploded"), True),
        (fault.http(400, message="Bad request from you"), False),
        (fault.inband_error(reply("Part"), message="overloaded"), None),
        (fault.stall(reply("Hal", chunks=1)), None),
    ],
    ids=["429", "500", "400", "in-band", "stall"],
)
async def test_a_failing_provider_ends_the_run_with_an_error_row_and_event(
    site: Any, failure: Any, retryable: bool | None
) -> None:
    site.script(failure)
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)

    submission = await agent_server.aadd_message(scope, conversation.pk, "hi")
    error = await follower.until("error")
    finished = await follower.until("run_finished")

    assert finished["data"]["status"] == "error"
    if retryable is not None:
        assert error["data"]["retryable"] is retryable
    rows = await rows_of(conversation)
    note = rows[-1]
    assert (note.message_type, note.content_type) == ("system", "error")
    assert note.content["text"] == error["data"]["error"]
    run = await AgentRun.objects.aget(pk=submission.run_id)
    assert run.status == "error" and run.error
    assert await agent_server.aget_status(scope, conversation.pk) == "error"
    # The conversation goes on.
    site.script(reply("Better now."))
    await agent_server.aadd_message(scope, conversation.pk, "again?")
    assert (await follower.until("run_finished"))["data"]["status"] == "completed"


async def test_a_reply_cut_off_mid_stream_is_stored_as_cut_off(site: Any) -> None:
    site.script(fault.drop(reply("Half a thought", chunks=4)))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)

    await agent_server.aadd_message(scope, conversation.pk, "hi")
    await follower.until("run_finished")

    [partial] = [
        r
        for r in await rows_of(conversation)
        if r.message_type == "assistant" and r.content_type == "text"
    ]
    assert partial.content["text"] and partial.status == "stream_error"
    assert partial.metadata["stop_reason"] == "stream_error"
    # Upstream v0.12.1: the message's last item says why, with the provider's words.
    assert partial.content["stop_reason"] == "stream_error"
    assert partial.content["stop_details"]
    # The chat page says so beside the text.
    page = await sync_to_async(client_page)(scope, conversation)
    assert "Cut off: the provider&#x27;s stream broke." in page


# Approvals ----------------------------------------------------------------------
async def test_two_racing_approvals_one_wins_the_other_gets_a_conflict(
    site: Any,
) -> None:
    site.script(
        reply(
            tool_calls=[tool_call("write_file", {"file_path": "/a", "content": "x"})]
        ),
        reply("Written."),
    )
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "write")
    assert (await follower.until("run_finished"))["data"]["status"] == "interrupted"

    outcomes = await asyncio.gather(
        agent_server.aresume(scope, conversation.pk, [{"type": "approve"}]),
        agent_server.aresume(scope, conversation.pk, [{"type": "reject"}]),
        return_exceptions=True,
    )
    await follower.until("run_finished")

    won = [o for o in outcomes if isinstance(o, str)]
    lost = [o for o in outcomes if isinstance(o, Exception)]
    assert len(won) == 1 and len(lost) == 1
    assert isinstance(lost[0], Conflict)
    assert len(site.requests) == 2


@pytest.mark.parametrize(
    "decisions",
    [None, "approve", [{"type": "maybe"}], [{"type": "edit", "arguments": "x"}], [1]],
)
async def test_bad_decisions_are_refused_before_a_run_exists(
    site: Any, decisions: Any
) -> None:
    scope, conversation = await new_conversation()
    with pytest.raises(InvalidInput):
        await agent_server.aresume(scope, conversation.pk, decisions)
    assert await runs_of(conversation) == []


# Several at once ------------------------------------------------------------------
async def test_two_conversations_run_at_once(site: Any) -> None:
    site.script(reply("Left.", **SLOW), reply("Right.", **SLOW))
    scope, left = await new_conversation("alice")
    bob, right = await new_conversation("bob")
    followers = [await follow(scope, left.pk), await follow(bob, right.pk)]

    await agent_server.aadd_message(scope, left.pk, "go left")
    await agent_server.aadd_message(bob, right.pk, "go right")
    done = await asyncio.gather(*(f.until("run_finished") for f in followers))

    assert [d["data"]["status"] for d in done] == ["completed", "completed"]
    # Each subscriber saw only its own conversation.
    assert {e["conversation"] for e in followers[0].events} == {str(left.pk)}
    assert {e["conversation"] for e in followers[1].events} == {str(right.pk)}


# A database that fails the turn's ending ---------------------------------------
@pytest.mark.parametrize("site", ["embedded"], indirect=True)
async def test_a_run_whose_ending_fails_still_frees_its_conversation(
    site: Any,
) -> None:
    """The locked read that ends a run fails every time (as SQLite's shared
    in-memory database fails a reader that meets a writer): the run still ends,
    by its row alone, and the conversation takes the next message."""
    if connection.vendor != "sqlite":
        pytest.skip("the fault is injected into SQLite's one runtime thread")
    site.script(reply("word " * 40, chunks=40, delay=0.02), reply("Next."))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    failed: list[str] = []

    def locked(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        ending = connection.in_atomic_block and sql.startswith(
            'SELECT "sagents_agent_runs"."id"'
        )
        if ending:
            failed.append(sql)
            raise OperationalError("database table is locked")
        return execute(sql, params, many, context)

    def install() -> Any:
        # On the connection of the one thread that database calls from async code
        # (the runtime's too) run in.
        wrapper = connection.execute_wrapper(locked)
        wrapper.__enter__()
        return wrapper

    submission = await agent_server.aadd_message(scope, conversation.pk, "hi")
    await follower.until("llm_deltas")
    wrapper = await sync_to_async(install)()
    try:
        finished = await follower.until("run_finished")
    finally:
        await sync_to_async(wrapper.__exit__)(None, None, None)

    # The last save and the ending at once (ending.end_with_state, tried again
    # by the database hop as a call that met an OperationalError), then the
    # ending alone: the first try and three retries (runtime.ending.RETRIES), then
    # the run's row alone.
    assert len(failed) == 2 + 4
    assert finished["data"]["status"] == "completed"
    run = await AgentRun.objects.aget(pk=submission.run_id)
    assert run.status == "completed"
    await agent_server.aadd_message(scope, conversation.pk, "next")
    assert (await follower.until("run_finished"))["data"]["status"] == "completed"


@pytest.mark.parametrize(
    ("decisions", "problem"),
    [
        ([{"type": "approve"}, {"type": "approve"}], r"Expected 1 decision\(s\)"),
        ([], r"Expected 1 decision\(s\)"),
    ],
)
async def test_decisions_that_do_not_fit_the_approval_are_refused_before_a_run(
    site: Any, decisions: Any, problem: str
) -> None:
    site.script(
        reply(
            tool_calls=[tool_call("write_file", {"file_path": "/a", "content": "x"})]
        ),
        reply("Written."),
    )
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "write")
    assert (await follower.until("run_finished"))["data"]["status"] == "interrupted"

    with pytest.raises(InvalidInput, match=problem):
        await agent_server.aresume(scope, conversation.pk, decisions)

    assert len(await runs_of(conversation)) == 1  # no run was made
    await agent_server.aresume(scope, conversation.pk, [{"type": "approve"}])
    assert (await follower.until("run_finished"))["data"]["status"] == "completed"


async def test_middleware_shapes_what_the_transcript_shows_not_the_state(
    site: Any,
) -> None:
    site.script(reply("The code is SECRET-42 today."), reply("Noted."))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)

    await agent_server.aadd_message(scope, conversation.pk, "Code?")
    saved = await follower.until("display_message_saved")  # the person's
    saved = await follower.until("display_message_saved")  # the reply's
    await follower.until("run_finished")

    assert saved["data"]["display_message"]["content"]["text"] == (
        "The code is [redacted] today."
    )
    [row] = [r for r in await rows_of(conversation) if r.message_type == "assistant"]
    assert row.content["text"] == "The code is [redacted] today."
    assert row.metadata["redacted"] is True
    # The model reads the original next turn.
    await agent_server.aadd_message(scope, conversation.pk, "Again?")
    await follower.until("run_finished")
    assert "The code is SECRET-42 today." in [
        m["content"] for m in site.requests[1].messages
    ]
