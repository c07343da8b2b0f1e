"""The chain through the fake provider: streaming, assembly, faults, retries, fallbacks.

Every test runs twice, through litellm and through the lean httpx transport, so both
paths honour the same contract.
"""

from __future__ import annotations

import pytest

from sagents_django.core import (
    Agent,
    CancelToken,
    Message,
    State,
    StreamError,
    Tool,
)
from tests.core.conftest import model_for
from tests.fakes.openai_server import fault, reply, tool_call


async def test_streamed_text_is_assembled_and_every_delta_reaches_the_callbacks(
    chat_model, fake_llm
):
    fake_llm.script(reply("Hello there, friend", chunks=5, usage=(11, 4)))
    deltas, usages, messages = [], [], []
    agent = Agent(replace_default_middleware=True, model=chat_model)
    result = await agent.aexecute(
        ["Hi"],
        callbacks=[
            {
                "on_llm_new_delta": lambda ex, d: deltas.extend(d),
                "on_llm_token_usage": lambda ex, u: usages.append(u),
                "on_llm_new_message": lambda ex, m: messages.append(m),
            }
        ],
    )
    assert result.status == "completed", result.error
    assert result.last_message.text == "Hello there, friend"
    assert result.last_message.status == "complete"
    assert "".join(d.content for d in deltas) == "Hello there, friend"
    assert len([d for d in deltas if d.content]) == 5
    assert usages[0].input == 11 and usages[0].output == 4
    assert result.usage.input == 11
    assert messages == [result.last_message]


async def test_reasoning_content_becomes_a_thinking_part(chat_model, fake_llm):
    fake_llm.script(reply("42", reasoning="Think of the answer", reasoning_chunks=3))
    result = await Agent(replace_default_middleware=True, model=chat_model).aexecute(
        ["Question?"]
    )
    assert result.last_message.thinking == "Think of the answer"
    assert result.last_message.text == "42"


async def test_the_system_prompt_and_history_reach_the_provider_in_openai_format(
    chat_model, fake_llm
):
    fake_llm.script(reply("ok"))
    agent = Agent(
        replace_default_middleware=True,
        model=chat_model,
        base_system_prompt="You are terse.",
    )
    await agent.aexecute([Message.user("one"), Message.assistant("two"), "three"])
    sent = fake_llm.last_request["messages"]
    assert sent[0] == {"role": "system", "content": "You are terse."}
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[-1]["content"] == "three"


async def test_a_multi_step_tool_loop_feeds_results_back_until_the_model_answers(
    chat_model, fake_llm, add_tool
):
    fake_llm.script(
        reply(tool_calls=[tool_call("add", {"a": 1, "b": 2}, id="c1")], args_chunks=4),
        reply(tool_calls=[tool_call("add", {"a": 3, "b": 4}, id="c2")], args_chunks=3),
        reply("1+2 is 3 and 3+4 is 7", chunks=3),
    )
    result = await Agent(
        replace_default_middleware=True, model=chat_model, tools=[add_tool]
    ).aexecute(["Add things"])
    assert result.status == "completed", result.error
    roles = [m.role for m in result.state.messages]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert result.state.messages[1].tool_calls[0].arguments == {"a": 1, "b": 2}
    assert result.state.messages[2].tool_results[0].content == "3"
    assert result.state.messages[4].tool_results[0].content == "7"
    third = fake_llm.requests[2]["messages"]
    assert {"role": "tool", "tool_call_id": "c2", "content": "7"} in third
    assert fake_llm.requests[0]["tools"][0]["function"]["name"] == "add"


async def test_parallel_tool_calls_of_one_response_run_concurrently(
    chat_model, fake_llm
):
    import asyncio

    arrived: list[str] = []
    both_here = asyncio.Event()

    async def meet(args: dict, _ctx: object) -> str:
        arrived.append(args["who"])
        if len(arrived) == 2:
            both_here.set()
        # Only finishes if the other call runs at the same time.
        await asyncio.wait_for(both_here.wait(), timeout=2)
        return f"{args['who']} met"

    meet_tool = Tool(
        name="meet",
        description="Meet.",
        function=meet,
        parameters={"type": "object", "properties": {"who": {"type": "string"}}},
    )
    fake_llm.script(
        reply(
            tool_calls=[
                tool_call("meet", {"who": "ann"}, id="a"),
                tool_call("meet", {"who": "bob"}, id="b"),
            ],
            args_chunks=2,
            interleave=True,
        ),
        reply("They met."),
    )
    result = await Agent(
        replace_default_middleware=True, model=chat_model, tools=[meet_tool]
    ).aexecute(["Go"])
    assert result.status == "completed", result.error
    results = result.state.messages[2].tool_results
    assert [(r.tool_call_id, r.content, r.is_error) for r in results] == [
        ("a", "ann met", False),
        ("b", "bob met", False),
    ]


async def test_a_tool_that_raises_becomes_an_error_result_the_model_reads(
    chat_model, fake_llm
):
    def explode(args: dict, _ctx: object) -> str:
        raise RuntimeError("disk on fire")

    boom = Tool(name="boom", description="Fails.", function=explode)
    failed = []
    fake_llm.script(
        reply(tool_calls=[tool_call("boom", {})]), reply("Sorry, it failed.")
    )
    result = await Agent(
        replace_default_middleware=True, model=chat_model, tools=[boom]
    ).aexecute(
        ["Try"],
        callbacks=[{"on_tool_execution_failed": lambda ex, c, r: failed.append(r)}],
    )
    assert result.status == "completed", result.error
    tool_result = result.state.messages[2].tool_results[0]
    assert tool_result.is_error
    assert "disk on fire" in tool_result.content
    assert failed == [tool_result]
    sent = fake_llm.requests[1]["messages"]
    assert "disk on fire" in sent[-1]["content"]


async def test_malformed_tool_argument_json_is_an_error_result_not_a_crash(
    chat_model, fake_llm, add_tool
):
    fake_llm.script(
        reply(raw_arguments='{"a": 1, "b": ', tool_name="add"),
        reply("I will fix my JSON."),
    )
    result = await Agent(
        replace_default_middleware=True, model=chat_model, tools=[add_tool]
    ).aexecute(["Add"])
    assert result.status == "completed", result.error
    call = result.state.messages[1].tool_calls[0]
    assert call.raw_arguments == '{"a": 1, "b": '
    tool_result = result.state.messages[2].tool_results[0]
    assert tool_result.is_error and "Invalid JSON" in tool_result.content
    # The model sees exactly what it sent.
    sent_call = fake_llm.requests[1]["messages"][1]["tool_calls"][0]
    assert sent_call["function"]["arguments"] == '{"a": 1, "b": '


async def test_a_provider_500_is_retried_and_the_retry_succeeds(chat_model, fake_llm):
    fake_llm.script(fault.http(500), reply("Recovered"))
    result = await Agent(replace_default_middleware=True, model=chat_model).aexecute(
        ["Hi"]
    )
    assert result.status == "completed", result.error
    assert result.last_message.text == "Recovered"
    assert len(fake_llm.requests) == 2


async def test_a_rate_limit_is_retried_after_the_retry_after_header(
    chat_model, fake_llm
):
    fake_llm.script(fault.http(429, retry_after=0), reply("Later"))
    result = await Agent(replace_default_middleware=True, model=chat_model).aexecute(
        ["Hi"]
    )
    assert result.status == "completed", result.error
    assert result.last_message.text == "Later"


async def test_retries_exhausted_end_the_turn_as_an_error_with_the_providers_message(
    fake_llm, transport
):
    model = model_for(fake_llm, transport, max_retries=1)
    fake_llm.script(fault.http(503), fault.http(503))
    exceeded = []
    state = State(messages=[Message.user("Hi")])
    result = await Agent(replace_default_middleware=True, model=model).aexecute(
        state, callbacks=[{"on_retries_exceeded": lambda ex, e: exceeded.append(e)}]
    )
    assert result.status == "error"
    assert "503" in result.error
    assert "overloaded" in result.error
    assert exceeded and "503" in exceeded[0]
    assert result.state.messages == state.messages
    assert len(fake_llm.requests) == 2


async def test_a_failing_primary_gives_way_to_the_fallback_model(fake_llm, transport):
    from tests.fakes.openai_server import FakeOpenAIServer

    with FakeOpenAIServer() as backup:
        backup.script(reply("From the fallback"))
        primary = model_for(fake_llm, transport, max_retries=0)
        fallback = model_for(backup, transport)
        seen = []

        def before_fallback(request):
            seen.append(request.model_name)
            request.messages = [
                *request.messages,
                {"role": "user", "content": "(retry)"},
            ]
            return request

        fake_llm.script(fault.http(401))
        agent = Agent(
            replace_default_middleware=True,
            model=primary,
            fallback_models=[fallback],
            before_fallback=before_fallback,
        )
        result = await agent.aexecute(["Hi"])
        assert result.status == "completed", result.error
        assert result.last_message.text == "From the fallback"
        assert len(seen) == 2
        assert backup.last_request["messages"][-1]["content"] == "(retry)"


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param(
            lambda: fault.drop(after=reply("Partial answer", chunks=2)), id="drop"
        ),
        pytest.param(
            lambda: fault.inband_error(after=reply("Partial answer", chunks=2)),
            id="inband-error",
        ),
        pytest.param(
            lambda: fault.stall(after=reply("Partial answer", chunks=2)), id="stall"
        ),
        pytest.param(
            lambda: fault.malformed_chunk(after=reply("Partial answer", chunks=2)),
            id="malformed",
        ),
        pytest.param(
            lambda: fault.no_done(reply("Partial answer", chunks=2)), id="no-done"
        ),
    ],
)
async def test_a_stream_that_breaks_midway_ends_the_turn_as_a_visible_error_with_the_partial_text(
    fake_llm, transport, broken
):
    model = model_for(fake_llm, transport, stream_idle_timeout=1.0)
    fake_llm.script(broken(), reply("should never be requested"))
    errors = []
    result = await Agent(replace_default_middleware=True, model=model).aexecute(
        ["Hi"], callbacks=[{"on_error_message_created": lambda ex, m: errors.append(m)}]
    )
    assert result.status == "error"
    assert isinstance(result.exception, StreamError)
    last = result.last_message
    assert last.role == "assistant"
    assert last.status == "stream_error"
    assert last.text == "Partial answer"
    assert errors == [last]
    # Text already shown to people is never replayed by a retry.
    assert len(fake_llm.requests) == 1


async def test_a_stall_before_any_byte_is_retried(fake_llm, transport):
    model = model_for(fake_llm, transport, stream_idle_timeout=1.0)
    fake_llm.script(fault.stall(), reply("Second try"))
    result = await Agent(replace_default_middleware=True, model=model).aexecute(["Hi"])
    assert result.status == "completed", result.error
    assert result.last_message.text == "Second try"


async def test_a_slow_first_byte_within_the_idle_timeout_is_fine(fake_llm, transport):
    model = model_for(fake_llm, transport, stream_idle_timeout=2.0)
    fake_llm.script(fault.slow_first_byte(0.3, then=reply("Worth the wait")))
    result = await Agent(replace_default_middleware=True, model=model).aexecute(["Hi"])
    assert result.status == "completed", result.error
    assert result.last_message.text == "Worth the wait"


async def test_cancellation_mid_stream_keeps_the_partial_text_with_a_cancelled_stop_reason(
    chat_model, fake_llm
):
    fake_llm.script(reply("one two three four five six", chunks=6, delay=0.05))
    seen = []
    token = CancelToken()

    def on_delta(ex, deltas):
        seen.extend(deltas)
        if len(seen) >= 2:
            token.cancel()

    result = await Agent(replace_default_middleware=True, model=chat_model).aexecute(
        ["Count"], callbacks=[{"on_llm_new_delta": on_delta}], cancel=token
    )
    assert result.status == "cancelled"
    last = result.last_message
    assert last.status == "cancelled"
    assert last.text == "".join(d.content for d in seen)
    assert 0 < len(last.text) < len("one two three four five six")


async def test_length_and_content_filter_finish_reasons_become_stop_reasons(
    chat_model, fake_llm
):
    fake_llm.script(reply("cut", finish_reason="length"))
    result = await Agent(replace_default_middleware=True, model=chat_model).aexecute(
        ["Long"]
    )
    assert result.last_message.status == "length"
    fake_llm.script(reply("", finish_reason="content_filter"))
    result = await Agent(replace_default_middleware=True, model=chat_model).aexecute(
        ["Bad"]
    )
    assert result.last_message.status == "content_filtered"


async def test_response_headers_and_rate_limit_info_reach_their_callbacks(
    chat_model, fake_llm
):
    fake_llm.script(reply("ok", headers={"x-ratelimit-remaining-requests": "99"}))
    headers, limits = [], []
    await Agent(replace_default_middleware=True, model=chat_model).aexecute(
        ["Hi"],
        callbacks=[
            {
                "on_llm_response_headers": lambda ex, h: headers.append(h),
                "on_llm_ratelimit_info": lambda ex, r: limits.append(r),
            }
        ],
    )
    assert headers and headers[0].get("x-ratelimit-remaining-requests") == "99"
    assert limits == [{"x-ratelimit-remaining-requests": "99"}]
