"""Stop lands wherever the turn waits, and leaves a state a provider accepts.

One test per place (tests/core/cancel_places.py): the fake server makes the turn wait
there for LONG seconds, Stop is pressed from another thread, and the turn must return
long before that wait would have ended. The < 1 s bound is deliberately loose (a
loaded 2-core CI machine); bench/cancel_latency.py measures the real latency (the
target is under 100 ms).
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from sagents_django.core import (
    Agent,
    CancelToken,
    ConfigurationError,
    Message,
    Tool,
    ToolCall,
)
from sagents_django.core.cancellation import Cancelled
from sagents_django.core.openai_format import INTERRUPTED_NOTES
from sagents_django.core.testing import ScriptedModel, validate_openai_messages
from tests.core.cancel_places import SYNC_TOOL_SECONDS, TEXT, Outcome, run_place
from tests.core.conftest import model_for
from tests.fakes.openai_server import reply, tool_call

LONG = 10.0
PROMPT_BOUND = 1.0  # seconds; LONG / 10


def assert_prompt_and_valid(outcome: Outcome) -> None:
    assert outcome.result.status == "cancelled", outcome.result.error
    assert outcome.latency < PROMPT_BOUND
    validate_openai_messages(outcome.result.state)


async def test_stop_while_waiting_for_the_first_byte_sends_nothing_more(
    fake_llm, transport
):
    outcome = await run_place("first_byte", fake_llm, transport, long=LONG)

    assert_prompt_and_valid(outcome)
    assert [m.role for m in outcome.result.state.messages] == ["user"]
    assert outcome.requests == 1
    # The connection is closed, not left waiting (litellm closes it in a callback:
    # wait off the loop).
    assert await asyncio.to_thread(fake_llm.requests[0].done.wait, 5)
    assert fake_llm.requests[0].outcome == "client_disconnected"


async def test_stop_mid_stream_keeps_the_partial_text_marked_cancelled(
    fake_llm, transport
):
    outcome = await run_place("mid_stream", fake_llm, transport, long=LONG)

    assert_prompt_and_valid(outcome)
    last = outcome.result.last_message
    assert (last.role, last.status) == ("assistant", "cancelled")
    assert last.text == "".join(d.content for d in outcome.marks["deltas"])
    assert 0 < len(last.text) < len(TEXT) and TEXT.startswith(last.text)


async def test_stop_in_a_silent_gap_of_the_stream_lands_without_waiting_for_data(
    fake_llm, transport
):
    outcome = await run_place("gap", fake_llm, transport, long=LONG)

    assert_prompt_and_valid(outcome)
    last = outcome.result.last_message
    assert (last.text, last.status) == ("Hello ", "cancelled")


async def test_stop_while_tool_call_arguments_stream_leaves_no_empty_assistant_message(
    fake_llm, transport
):
    outcome = await run_place("tool_call_arguments", fake_llm, transport, long=LONG)

    assert_prompt_and_valid(outcome)
    # The half-sent call is dropped with the reply: nothing to answer, nothing ran.
    assert [m.role for m in outcome.result.state.messages] == ["user"]
    assert outcome.marks["identified"][0].name == "add"
    assert outcome.marks["ran"] == []


async def test_stop_during_a_retry_backoff_makes_no_further_attempt(
    fake_llm, transport
):
    outcome = await run_place("retry_backoff", fake_llm, transport, long=LONG)

    assert_prompt_and_valid(outcome)
    assert outcome.requests == 1
    assert [m.role for m in outcome.result.state.messages] == ["user"]


async def test_stop_while_an_async_tool_runs_cancels_it_and_answers_its_call(
    fake_llm, transport
):
    outcome = await run_place("async_tool", fake_llm, transport, long=LONG)

    assert_prompt_and_valid(outcome)
    assert outcome.marks["interrupted"] is True
    assert outcome.requests == 1
    (result,) = outcome.result.last_message.tool_results
    assert result.tool_call_id == "wait_1" and result.is_error
    assert "cancelled before it finished" in result.content


async def test_a_running_sync_tool_finishes_and_nothing_starts_after_it(
    fake_llm, transport
):
    outcome = await run_place("sync_tool", fake_llm, transport, long=LONG)

    assert_prompt_and_valid(outcome)
    assert outcome.returned_at - outcome.cancelled_at < SYNC_TOOL_SECONDS + 1.0
    (result,) = outcome.result.last_message.tool_results
    assert (result.content, result.is_error) == ("work done", False)
    assert outcome.requests == 1  # the model is not asked again


async def test_stop_reaches_a_sub_agent_of_a_sub_agent(fake_llm, transport):
    outcome = await run_place("subagent_depth_2", fake_llm, transport, long=LONG)

    assert_prompt_and_valid(outcome)
    assert outcome.requests == 3  # parent, manager, worker: nobody asks again
    (task_result,) = outcome.result.last_message.tool_results
    assert task_result.tool_call_id == "task_parent" and task_result.is_error
    assert "cancelled" in task_result.content


async def test_the_next_model_call_reads_that_the_cancelled_reply_was_cut_off(
    fake_llm, transport
):
    outcome = await run_place("mid_stream", fake_llm, transport, long=LONG)
    partial = outcome.result.last_message.text
    fake_llm.script(reply("Where was I?"))
    agent = Agent(model=model_for(fake_llm, transport), replace_default_middleware=True)
    state = outcome.result.state.add_message(Message.user("Go on"))

    result = await agent.aexecute(state)

    assert result.status == "completed", result.error
    sent = fake_llm.last_request["messages"]
    assert sent[-2] == {
        "role": "assistant",
        "content": f"{partial}\n\n{INTERRUPTED_NOTES['cancelled']}",
    }
    validate_openai_messages(sent)


async def test_calls_of_a_finished_reply_get_cancelled_results_when_stop_comes_before_they_run(
    fake_llm, transport
):
    token = CancelToken()
    ran: list[str] = []
    fake_llm.script(
        reply(
            tool_calls=[tool_call("note", {}, id="n1"), tool_call("note", {}, id="n2")]
        )
    )
    note = Tool(name="note", description="Note.", function=lambda a, c: ran.append(1))

    def stop_on_reply(ex, message):
        token.cancel()

    result = await Agent(
        model=model_for(fake_llm, transport),
        tools=[note],
        replace_default_middleware=True,
    ).aexecute(["Go"], callbacks=[{"on_llm_new_message": stop_on_reply}], cancel=token)

    assert result.status == "cancelled"
    assert ran == []
    results = result.last_message.tool_results
    assert [(r.tool_call_id, r.is_error) for r in results] == [
        ("n1", True),
        ("n2", True),
    ]
    assert all("cancelled before it ran" in r.content for r in results)
    validate_openai_messages(result.state)


# The token itself -------------------------------------------------------------------
async def test_a_token_cancelled_from_a_thread_wakes_its_waiters():
    token = CancelToken()
    waiting = asyncio.ensure_future(token.wait())
    await asyncio.sleep(0)
    assert not waiting.done()

    threading.Thread(target=token.cancel, args=("from a thread",)).start()
    await asyncio.wait_for(waiting, 5)

    assert token.cancelled and token.reason == "from a thread"


async def test_the_first_cancel_wins_and_later_ones_change_nothing():
    token = CancelToken()

    assert token.cancel("first") is True
    assert token.cancel("second") is False
    assert token.reason == "first"
    await asyncio.wait_for(token.wait(), 1)  # already cancelled: returns at once


async def test_a_scope_turns_the_token_into_cancelled_and_leaves_the_task_uncancelled():
    token = CancelToken()
    asyncio.get_running_loop().call_later(0.01, token.cancel, "stop")

    with pytest.raises(Cancelled, match="stop"):
        async with token.scope():
            await asyncio.sleep(30)

    assert asyncio.current_task().cancelling() == 0
    await asyncio.sleep(0)  # this task is not cancelled any more


async def test_a_scope_entered_after_the_cancel_never_runs_its_block():
    token = CancelToken()
    token.cancel()
    ran = []

    with pytest.raises(Cancelled):
        async with token.scope():
            ran.append(1)

    assert ran == []


async def test_a_cancel_of_the_task_from_elsewhere_is_not_swallowed_by_a_scope():
    token = CancelToken()

    async def inner() -> None:
        async with token.scope():
            await asyncio.sleep(30)

    task = asyncio.ensure_future(inner())
    await asyncio.sleep(0.01)
    task.cancel()
    token.cancel()  # both at once: the outside cancel must still win

    with pytest.raises(asyncio.CancelledError):
        await task


async def test_only_the_innermost_scope_of_a_task_is_interrupted():
    token = CancelToken()
    seen = []
    asyncio.get_running_loop().call_later(0.01, token.cancel)

    async with token.scope():
        try:
            async with token.scope():
                await asyncio.sleep(30)
        except Cancelled:
            seen.append("inner")
        seen.append("outer goes on")

    assert seen == ["inner", "outer goes on"]


@pytest.mark.parametrize("bad", ["yes", True, lambda: True, 1])
async def test_cancel_takes_only_a_cancel_token(bad):
    agent = Agent(model=ScriptedModel(["Hi"]), replace_default_middleware=True)

    with pytest.raises(ConfigurationError, match="CancelToken"):
        await agent.aexecute(["Hi"], cancel=bad)


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "3"])
async def test_max_runs_below_one_or_not_an_integer_raises_on_execute_as_on_agent(
    bad,
):
    model = ScriptedModel(["Hi"])
    agent = Agent(model=model, replace_default_middleware=True)

    with pytest.raises(ConfigurationError, match="max_runs"):
        await agent.aexecute(["Hi"], max_runs=bad)
    with pytest.raises(ConfigurationError, match="max_runs"):
        Agent(model=model, replace_default_middleware=True, max_runs=bad)
    assert model.requests == []


async def test_a_resume_stopped_before_the_approved_call_runs_answers_it_as_cancelled():
    ran: list[str] = []
    delete = Tool(
        name="delete", description="Delete.", function=lambda a, c: ran.append("x")
    )
    model = ScriptedModel(
        [Message.assistant(tool_calls=[ToolCall(call_id="d1", name="delete")])]
    )
    agent = Agent(
        model=model,
        tools=[delete],
        interrupt_on={"delete": True},
        replace_default_middleware=True,
    )
    paused = await agent.aexecute(["Delete it"])
    assert paused.status == "interrupted"
    token = CancelToken()
    token.cancel()

    result = await agent.aresume(paused.state, [{"type": "approve"}], cancel=token)

    assert result.status == "cancelled"
    assert ran == []
    (answer,) = result.last_message.tool_results
    assert answer.tool_call_id == "d1" and "cancelled before it ran" in answer.content
    assert result.state.interrupt_data is None
    validate_openai_messages(result.state)


def test_the_sync_form_returns_a_cancelled_turn_without_joining_abandoned_threads():
    """A thread the turn stopped waiting for (here an async tool's blocking helper;
    in life litellm's first import) must not hold up ``execute``'s return."""
    release = threading.Event()
    started = threading.Event()
    token = CancelToken()

    finished = threading.Event()

    def helper() -> None:
        release.wait(60)
        finished.set()

    async def wait_in_a_thread(args, context):
        started.set()
        await asyncio.to_thread(helper)
        return "done"

    slow = Tool(name="slow", description="Slow.", function=wait_in_a_thread)
    model = ScriptedModel(
        [Message.assistant(tool_calls=[ToolCall(call_id="s1", name="slow")])]
    )
    agent = Agent(model=model, tools=[slow], replace_default_middleware=True)
    threading.Thread(target=lambda: started.wait(30) and token.cancel()).start()
    try:
        result = agent.execute(["Go"], cancel=token)
        # Returned while the helper thread still waits: execute did not join it.
        assert not finished.is_set()
    finally:
        release.set()

    assert result.status == "cancelled"
    (answer,) = result.last_message.tool_results
    assert answer.tool_call_id == "s1" and "cancelled" in answer.content
