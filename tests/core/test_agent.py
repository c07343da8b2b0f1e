"""The agent loop: max_runs, until_tool, middleware hooks, callbacks, events, modes,
cancellation, state updates from tools and the sync entry points.

Tests that involve a model run through the fake provider twice (litellm and the lean
httpx transport); ``ScriptedModel`` drives only the pure-logic tests of hook order.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sagents_django.core import (
    CALLBACK_KEYS,
    Agent,
    AgentExecution,
    CancelToken,
    ConfigurationError,
    Interrupt,
    InvalidResume,
    LLMError,
    Message,
    Middleware,
    State,
    Todo,
    Tool,
    ToolCall,
    aexecute,
    events,
    execute,
    new,
)
from sagents_django.core.testing import ScriptedModel
from tests.fakes.openai_server import reply, tool_call

ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}


def make_tool(name: str, function: Any, parameters: dict | None = None) -> Tool:
    return Tool(
        name=name,
        description=f"The {name} tool.",
        function=function,
        parameters=parameters or {"type": "object", "properties": {}},
    )


@pytest.fixture
def submit_tool() -> Tool:
    return make_tool(
        "submit", lambda args, _ctx: f"Submitted {args['answer']}", ANSWER_SCHEMA
    )


def scripted_tool_call(name: str, arguments: dict, call_id: str = "c1") -> Message:
    return Message.assistant(
        tool_calls=[ToolCall(call_id=call_id, name=name, arguments=arguments)]
    )


# max_runs ---------------------------------------------------------------------------
async def test_a_model_that_keeps_calling_tools_stops_at_max_runs_with_an_error(
    chat_model, fake_llm, add_tool
):
    fake_llm.script(default=reply(tool_calls=[tool_call("add", {"a": 1, "b": 1})]))
    agent = Agent(
        replace_default_middleware=True, model=chat_model, tools=[add_tool], max_runs=3
    )

    result = await agent.aexecute(["Loop forever"])

    assert result.status == "error"
    assert "max_runs" in result.error and "3" in result.error
    assert len(fake_llm.requests) == 3
    # The three calls all ran: the history ends with the third tool result.
    assert [m.role for m in result.state.messages].count("tool") == 3


async def test_max_runs_passed_to_execute_overrides_the_agents_limit(
    chat_model, fake_llm, add_tool
):
    fake_llm.script(default=reply(tool_calls=[tool_call("add", {"a": 1, "b": 1})]))
    agent = Agent(
        replace_default_middleware=True, model=chat_model, tools=[add_tool], max_runs=10
    )

    result = await agent.aexecute(["Loop"], max_runs=2)

    assert result.status == "error" and "max_runs (2" in result.error
    assert len(fake_llm.requests) == 2


@pytest.mark.parametrize("bad", [0, -1, 2.5, "3"])
def test_a_max_runs_that_is_not_a_positive_integer_is_a_configuration_error(bad):
    with pytest.raises(ConfigurationError, match="max_runs"):
        Agent(replace_default_middleware=True, model=ScriptedModel([]), max_runs=bad)


# until_tool -------------------------------------------------------------------------
async def test_until_tool_completes_the_turn_when_the_model_calls_the_target(
    chat_model, fake_llm, submit_tool
):
    fake_llm.script(
        reply(tool_calls=[tool_call("submit", {"answer": "42"}, id="s1")]),
        reply("never requested"),
    )
    agent = Agent(
        replace_default_middleware=True, model=chat_model, tools=[submit_tool]
    )

    result = await agent.aexecute(["Answer"], until_tool="submit")

    assert result.status == "completed", result.error
    assert result.tool_result is not None
    assert result.tool_result.name == "submit"
    assert result.tool_result.tool_call_id == "s1"
    assert result.tool_result.content == "Submitted 42"
    # The turn ends at the tool: the model is not asked to comment on it.
    assert len(fake_llm.requests) == 1


async def test_until_tool_is_an_error_when_the_model_answers_with_text_instead(
    chat_model, fake_llm, submit_tool
):
    fake_llm.script(reply("I would rather just talk."))
    agent = Agent(
        replace_default_middleware=True, model=chat_model, tools=[submit_tool]
    )

    result = await agent.aexecute(["Answer"], until_tool="submit")

    assert result.status == "error"
    assert "submit" in result.error
    assert result.tool_result is None
    assert result.last_message.text == "I would rather just talk."


async def test_until_tool_naming_an_unknown_tool_is_a_configuration_error(
    chat_model, fake_llm, submit_tool
):
    agent = Agent(
        replace_default_middleware=True, model=chat_model, tools=[submit_tool]
    )

    with pytest.raises(ConfigurationError, match="sbumit"):
        await agent.aexecute(["Answer"], until_tool="sbumit")
    assert fake_llm.requests == []


async def test_until_tool_accepts_a_list_and_stops_at_whichever_target_is_called(
    chat_model, fake_llm, submit_tool, add_tool
):
    give_up = make_tool("give_up", lambda args, _ctx: "Gave up")
    fake_llm.script(
        reply(tool_calls=[tool_call("add", {"a": 2, "b": 3})]),
        reply(tool_calls=[tool_call("give_up", {}, id="g1")]),
        reply("never requested"),
    )
    agent = Agent(
        replace_default_middleware=True,
        model=chat_model,
        tools=[submit_tool, add_tool, give_up],
    )

    result = await agent.aexecute(["Try"], until_tool=["submit", "give_up"])

    assert result.status == "completed", result.error
    assert result.tool_result.name == "give_up"
    assert result.tool_result.tool_call_id == "g1"
    assert len(fake_llm.requests) == 2


async def test_until_tool_is_not_satisfied_by_a_failed_call_of_the_target(
    chat_model, fake_llm, submit_tool
):
    fake_llm.script(
        reply(tool_calls=[tool_call("submit", {"wrong": 1})]),
        reply(tool_calls=[tool_call("submit", {"answer": "ok"}, id="s2")]),
    )
    agent = Agent(
        replace_default_middleware=True, model=chat_model, tools=[submit_tool]
    )

    result = await agent.aexecute(["Answer"], until_tool="submit")

    assert result.status == "completed", result.error
    assert result.tool_result.tool_call_id == "s2"
    assert result.state.messages[2].tool_results[0].is_error
    assert len(fake_llm.requests) == 2


# Middleware hooks -------------------------------------------------------------------
class Recorder(Middleware):
    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.log = log

    def before_model(self, state: State) -> State:
        self.log.append(f"{type(self).__name__}.before")
        return state

    def after_model(self, state: State) -> State:
        self.log.append(f"{type(self).__name__}.after")
        return state


class First(Recorder):
    pass


class Second(Recorder):
    async def before_model(self, state: State) -> State:
        await asyncio.sleep(0)
        self.log.append("Second.before")
        return state

    async def after_model(self, state: State) -> State:
        await asyncio.sleep(0)
        self.log.append("Second.after")
        return state


class Third(Recorder):
    pass


async def test_before_model_runs_in_stack_order_and_after_model_in_reverse():
    log: list[str] = []
    model = ScriptedModel([scripted_tool_call("noop", {}), "Done"])
    noop = make_tool("noop", lambda args, _ctx: "ok")
    agent = Agent(
        replace_default_middleware=True,
        model=model,
        tools=[noop],
        middleware=[First(log), Second(log), Third(log)],
    )

    result = await agent.aexecute(["Go"])

    assert result.status == "completed", result.error
    one_call = [
        "First.before",
        "Second.before",
        "Third.before",
        "Third.after",
        "Second.after",
        "First.after",
    ]
    assert log == one_call * 2


async def test_a_before_model_hook_can_change_what_the_model_receives():
    class AddNote(Middleware):
        def before_model(self, state: State) -> State:
            return state.add_message(Message.user("(note from middleware)"))

    model = ScriptedModel(["Seen"])
    result = await Agent(
        replace_default_middleware=True, model=model, middleware=[AddNote]
    ).aexecute(["Hi"])

    assert result.status == "completed", result.error
    sent = model.requests[0].messages
    assert sent[-1] == {"role": "user", "content": "(note from middleware)"}
    assert [m.text for m in result.state.messages] == [
        "Hi",
        "(note from middleware)",
        "Seen",
    ]


async def test_a_hook_that_raises_ends_the_turn_as_an_error_and_keeps_the_state():
    class Broken(Middleware):
        def after_model(self, state: State) -> State:
            raise RuntimeError("the hook broke")

    model = ScriptedModel(["An answer", "never requested"])
    agent = Agent(replace_default_middleware=True, model=model, middleware=[Broken])

    result = await agent.aexecute(["Hi"])

    assert result.status == "error"
    assert "the hook broke" in result.error and "after_model" in result.error
    assert isinstance(result.exception, RuntimeError)
    assert [m.text for m in result.state.messages] == ["Hi", "An answer"]
    assert len(model.requests) == 1


async def test_a_hook_that_returns_something_other_than_a_state_ends_the_turn_as_an_error():
    class Forgetful(Middleware):
        def before_model(self, state: State) -> State:
            return None  # type: ignore[return-value]

    model = ScriptedModel(["never requested"])
    result = await Agent(
        replace_default_middleware=True, model=model, middleware=[Forgetful]
    ).aexecute(["Hi"])

    assert result.status == "error"
    assert "NoneType" in result.error and "before_model" in result.error
    assert model.requests == []


class EndsTurn(Middleware):
    """Records each on_turn_end and leaves a mark in the state's metadata."""

    def __init__(self, *, log: list[str], name: str) -> None:
        super().__init__()
        self.log = log
        self.name = name

    async def on_turn_end(self, state: State) -> State:
        self.log.append(self.name)
        return state.put_metadata(self.name, len(state.messages))


class BreaksAtTheEnd(Middleware):
    def on_turn_end(self, state: State) -> State:
        raise RuntimeError("the end hook broke")


@pytest.mark.parametrize(
    ("replies", "status"),
    [(["Done"], "completed"), ([LLMError("provider down")], "error")],
)
async def test_on_turn_end_runs_once_in_reverse_order_and_its_state_is_the_results(
    replies: list[Any], status: str
) -> None:
    log: list[str] = []
    agent = Agent(
        replace_default_middleware=True,
        model=ScriptedModel(replies),
        middleware=[
            (EndsTurn, {"log": log, "name": "first", "id": "first"}),
            BreaksAtTheEnd,
            (EndsTurn, {"log": log, "name": "last", "id": "last"}),
        ],
    )

    result = await agent.aexecute(["Hi"])

    assert result.status == status
    assert log == ["last", "first"]  # the one that raised in between was skipped
    expected = len(result.state.messages)
    assert result.state.metadata == {"last": expected, "first": expected}


async def test_on_turn_end_runs_when_the_turn_is_cancelled() -> None:
    log: list[str] = []
    token = CancelToken()
    token.cancel()
    agent = Agent(
        replace_default_middleware=True,
        model=ScriptedModel([]),
        middleware=[(EndsTurn, {"log": log, "name": "end"})],
    )

    result = await agent.aexecute(["Hi"], cancel=token)

    assert result.status == "cancelled"
    assert log == ["end"]
    assert result.state.metadata == {"end": 1}


async def test_after_model_returning_interrupt_ends_the_turn_interrupted_with_its_data():
    ran: list[dict] = []

    class AskFirst(Middleware):
        def after_model(self, state: State) -> State | Interrupt:
            last = state.messages[-1]
            if last.tool_calls:
                return Interrupt(state=state, data={"type": "ask", "question": "Sure?"})
            return state

    model = ScriptedModel([scripted_tool_call("act", {"x": 1}), "never requested"])
    act = make_tool("act", lambda args, _ctx: ran.append(args) or "acted")
    agent = Agent(
        replace_default_middleware=True, model=model, tools=[act], middleware=[AskFirst]
    )

    result = await agent.aexecute(["Act"])

    assert result.status == "interrupted"
    assert result.interrupt_data == {"type": "ask", "question": "Sure?"}
    assert result.state.interrupt_data == {"type": "ask", "question": "Sure?"}
    assert result.last_message.tool_calls[0].name == "act"
    assert ran == []
    # No middleware claims this interrupt on resume.
    with pytest.raises(InvalidResume, match="No middleware handles"):
        await agent.aresume(result.state, "yes")


async def test_the_system_prompt_joins_the_base_prompt_and_middleware_prompts(
    chat_model, fake_llm
):
    class Terse(Middleware):
        def system_prompt(self) -> str:
            return "Be terse."

    class Rules(Middleware):
        def system_prompt(self) -> list[str]:
            return ["Rule one.", "", "Rule two."]

    class Silent(Middleware):
        pass

    fake_llm.script(reply("ok"))
    agent = Agent(
        replace_default_middleware=True,
        model=chat_model,
        base_system_prompt="You are a helper.",
        middleware=[Terse, Silent, Rules],
    )

    await agent.aexecute(["Hi"])

    expected = "You are a helper.\n\nBe terse.\n\nRule one.\n\nRule two."
    assert agent.assembled_system_prompt == expected
    sent = fake_llm.last_request["messages"]
    assert sent[0] == {"role": "system", "content": expected}
    assert [m["role"] for m in sent] == ["system", "user"]


async def test_no_prompt_at_all_sends_no_system_message(chat_model, fake_llm):
    fake_llm.script(reply("ok"))
    await Agent(replace_default_middleware=True, model=chat_model).aexecute(["Hi"])
    assert [m["role"] for m in fake_llm.last_request["messages"]] == ["user"]


async def test_tools_from_middleware_are_offered_to_the_model_and_run(
    chat_model, fake_llm
):
    calls: list[dict] = []

    class Clock(Middleware):
        def tools(self) -> list[Tool]:
            return [make_tool("now", lambda args, _ctx: calls.append(args) or "noon")]

    fake_llm.script(reply(tool_calls=[tool_call("now", {})]), reply("It is noon."))
    agent = Agent(replace_default_middleware=True, model=chat_model, middleware=[Clock])

    result = await agent.aexecute(["Time?"])

    assert result.status == "completed", result.error
    offered = [t["function"]["name"] for t in fake_llm.requests[0]["tools"]]
    assert offered == ["now"]
    assert calls == [{}]
    assert result.state.messages[2].tool_results[0].content == "noon"


def test_two_tools_with_the_same_name_are_a_configuration_error(add_tool):
    class AlsoAdd(Middleware):
        def tools(self) -> list[Tool]:
            return [make_tool("add", lambda args, _ctx: "0")]

    with pytest.raises(ConfigurationError, match="'add'"):
        Agent(
            replace_default_middleware=True,
            model=ScriptedModel([]),
            tools=[add_tool],
            middleware=[AlsoAdd],
        )


# Callbacks --------------------------------------------------------------------------
#: The keys one ordinary turn fires: a tool call (which announces an event), its
#: result, then a text answer, with usage and rate-limit headers on each response.
NORMAL_TURN_KEYS = frozenset(
    {
        "on_llm_new_delta",
        "on_llm_new_message",
        "on_llm_ratelimit_info",
        "on_llm_token_usage",
        "on_llm_response_headers",
        "on_message_processed",
        "on_tool_call_identified",
        "on_tool_execution_started",
        "on_tool_execution_completed",
        "on_tool_response_created",
        "on_after_middleware",
        "on_step_end",
        "on_agent_event",
    }
)
#: What only failures fire (retries, broken streams, failing tools).
FAILURE_KEYS = frozenset(
    {
        "on_message_processing_error",
        "on_error_message_created",
        "on_tool_execution_failed",
        "on_retries_exceeded",
    }
)


def test_the_normal_and_failure_keys_cover_every_callback_key():
    assert NORMAL_TURN_KEYS | FAILURE_KEYS == CALLBACK_KEYS
    assert not NORMAL_TURN_KEYS & FAILURE_KEYS


def recording_map(seen: list[str]) -> dict[str, Any]:
    def handler_for(key: str):
        def handler(*args: Any) -> None:
            seen.append(key)

        return handler

    return {key: handler_for(key) for key in CALLBACK_KEYS}


async def test_every_callback_of_a_normal_tool_turn_reaches_every_handler_map(
    chat_model, fake_llm
):
    def announce(args: dict, _ctx: object) -> str:
        events.emit("debug", {"event": "announced", "data": None})
        return "announced"

    headers = {"x-ratelimit-remaining-requests": "9"}
    fake_llm.script(
        reply(
            tool_calls=[tool_call("announce", {})],
            usage=(10, 2),
            include_usage=True,
            headers=headers,
        ),
        reply("Done", chunks=2, usage=(12, 1), include_usage=True, headers=headers),
    )
    first: list[str] = []
    second: list[str] = []
    agent = Agent(
        replace_default_middleware=True,
        model=chat_model,
        tools=[make_tool("announce", announce)],
    )

    result = await agent.aexecute(
        ["Go"], callbacks=[recording_map(first), recording_map(second)]
    )

    assert result.status == "completed", result.error
    assert set(first) == NORMAL_TURN_KEYS
    assert first == second


async def test_middleware_callbacks_fire_before_the_callers_handlers(
    chat_model, fake_llm
):
    order: list[str] = []

    class Watching(Middleware):
        def callbacks(self) -> dict[str, Any]:
            return {"on_llm_new_message": lambda ex, m: order.append("middleware")}

    fake_llm.script(reply("ok"))
    await Agent(
        replace_default_middleware=True, model=chat_model, middleware=[Watching]
    ).aexecute(
        ["Hi"], callbacks=[{"on_llm_new_message": lambda ex, m: order.append("caller")}]
    )

    assert order == ["middleware", "caller"]


async def test_on_after_middleware_receives_the_state_the_hooks_prepared(
    chat_model, fake_llm
):
    class Prepare(Middleware):
        def before_model(self, state: State) -> State:
            return state.put_metadata("prepared", True)

    fake_llm.script(reply("ok"))
    seen: list[State] = []
    agent = Agent(
        replace_default_middleware=True, model=chat_model, middleware=[Prepare]
    )

    await agent.aexecute(["Hi"], callbacks=[{"on_after_middleware": seen.append}])

    assert len(seen) == 1
    assert isinstance(seen[0], State)
    assert seen[0].metadata == {"prepared": True}
    assert [m.text for m in seen[0].messages] == ["Hi"]
    assert seen[0].agent_id == agent.agent_id


async def test_a_callback_handler_that_raises_does_not_break_the_turn(
    chat_model, fake_llm, add_tool
):
    def broken(*args: Any) -> None:
        raise RuntimeError("observer broke")

    after: list[str] = []
    fake_llm.script(
        reply(tool_calls=[tool_call("add", {"a": 1, "b": 2})]), reply("It is 3.")
    )

    result = await Agent(
        replace_default_middleware=True, model=chat_model, tools=[add_tool]
    ).aexecute(
        ["Add"],
        callbacks=[
            {key: broken for key in CALLBACK_KEYS},
            {"on_llm_new_message": lambda ex, m: after.append(m.text)},
        ],
    )

    assert result.status == "completed", result.error
    assert result.last_message.text == "It is 3."
    # The handlers after the broken one still ran.
    assert after == ["", "It is 3."]


async def test_an_async_callback_handler_is_awaited(chat_model, fake_llm):
    seen: list[str] = []

    async def on_message(ex: Any, message: Message) -> None:
        await asyncio.sleep(0)
        seen.append(message.text)

    fake_llm.script(reply("Hello"))
    await Agent(replace_default_middleware=True, model=chat_model).aexecute(
        ["Hi"], callbacks=[{"on_llm_new_message": on_message}]
    )

    assert seen == ["Hello"]


async def test_an_unknown_callback_key_is_a_configuration_error(chat_model, fake_llm):
    agent = Agent(replace_default_middleware=True, model=chat_model)

    with pytest.raises(ConfigurationError, match="on_llm_new_mesage"):
        await agent.aexecute(["Hi"], callbacks=[{"on_llm_new_mesage": print}])
    assert fake_llm.requests == []


# Events -----------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_events_emitted_by_a_tool_reach_on_agent_event_handlers(
    chat_model, fake_llm, kind
):
    def announce(args: dict, _ctx: object) -> str:
        events.emit("debug", {"event": "step", "data": args["n"]})
        return "ok"

    async def announce_async(args: dict, _ctx: object) -> str:
        return announce(args, _ctx)

    function = announce if kind == "sync" else announce_async
    tool = make_tool(
        "announce",
        function,
        {"type": "object", "properties": {"n": {"type": "integer"}}},
    )
    fake_llm.script(reply(tool_calls=[tool_call("announce", {"n": 7})]), reply("ok"))
    plain: list[tuple] = []
    awaited: list[tuple] = []

    async def async_handler(ex: Any, name: str, data: dict) -> None:
        await asyncio.sleep(0)
        awaited.append((name, data))

    agent = Agent(replace_default_middleware=True, model=chat_model, tools=[tool])
    result = await agent.aexecute(
        ["Go"],
        callbacks=[
            {"on_agent_event": lambda ex, name, data: plain.append((ex, name, data))},
            {"on_agent_event": async_handler},
        ],
    )

    assert result.status == "completed", result.error
    assert [(name, data) for _ex, name, data in plain] == [
        ("debug", {"event": "step", "data": 7})
    ]
    assert plain[0][0].agent is agent
    assert awaited == [("debug", {"event": "step", "data": 7})]


def test_emit_outside_an_execution_does_nothing():
    events.emit("debug", {"event": "nobody listens", "data": None})


# Cancellation -----------------------------------------------------------------------
async def test_cancellation_between_steps_ends_the_turn_before_the_next_model_call(
    chat_model, fake_llm
):
    ran: list[str] = []
    token = CancelToken()

    def work_then_stop(args: dict, _ctx: Any) -> str:
        ran.append("work")
        token.cancel()  # from the tool's worker thread
        return "worked"

    work = make_tool("work", work_then_stop)
    fake_llm.script(reply(tool_calls=[tool_call("work", {})]), reply("never"))

    result = await Agent(
        replace_default_middleware=True, model=chat_model, tools=[work]
    ).aexecute(["Work"], cancel=token)

    assert result.status == "cancelled"
    assert ran == ["work"]
    assert len(fake_llm.requests) == 1
    assert result.last_message.role == "tool"
    assert result.last_message.tool_results[0].content == "worked"


async def test_cancellation_before_the_first_step_sends_no_request(
    chat_model, fake_llm
):
    token = CancelToken()
    token.cancel("stopped early")
    result = await Agent(replace_default_middleware=True, model=chat_model).aexecute(
        ["Hi"], cancel=token
    )

    assert result.status == "cancelled"
    assert fake_llm.requests == []
    assert [m.text for m in result.state.messages] == ["Hi"]


# Modes ------------------------------------------------------------------------------
async def test_a_custom_mode_recomposed_from_the_standard_steps_runs_its_own_step(
    chat_model, fake_llm, add_tool
):
    loops: list[int] = []

    async def count_loop(ex: Any) -> None:
        loops.append(ex.run_count)
        return None

    class Counting(AgentExecution):
        steps = (count_loop, *AgentExecution.steps)

    fake_llm.script(
        reply(tool_calls=[tool_call("add", {"a": 1, "b": 2})]), reply("It is 3.")
    )
    agent = Agent(
        replace_default_middleware=True,
        model=chat_model,
        tools=[add_tool],
        mode=Counting(),
    )

    result = await agent.aexecute(["Add"])

    assert result.status == "completed", result.error
    assert result.last_message.text == "It is 3."
    assert loops == [0, 1]


async def test_a_custom_step_can_end_the_turn_with_its_own_result(
    chat_model, fake_llm, add_tool
):
    async def stop_after_tools(ex: Any):
        if ex.last_tool_results:
            return ex.result("completed")
        return None

    class OneRound(AgentExecution):
        steps = (*AgentExecution.steps[:-1], stop_after_tools)

    fake_llm.script(
        reply(tool_calls=[tool_call("add", {"a": 1, "b": 2})]), reply("never")
    )
    agent = Agent(
        replace_default_middleware=True,
        model=chat_model,
        tools=[add_tool],
        mode=OneRound(),
    )

    result = await agent.aexecute(["Add"])

    assert result.status == "completed"
    assert result.last_message.role == "tool"
    assert len(fake_llm.requests) == 1


# Entry points -----------------------------------------------------------------------
def test_execute_runs_a_turn_from_sync_code(chat_model, fake_llm):
    fake_llm.script(reply("From sync"))

    result = Agent(replace_default_middleware=True, model=chat_model).execute(["Hi"])

    assert result.status == "completed", result.error
    assert result.last_message.text == "From sync"


async def test_execute_inside_a_running_event_loop_raises(chat_model, fake_llm):
    agent = Agent(replace_default_middleware=True, model=chat_model)

    with pytest.raises(RuntimeError, match="await aexecute"):
        agent.execute(["Hi"])
    assert fake_llm.requests == []


def test_the_top_level_new_and_execute_run_a_turn(chat_model, fake_llm, add_tool):
    fake_llm.script(
        reply(tool_calls=[tool_call("add", {"a": 2, "b": 2})]), reply("It is 4.")
    )
    agent = new(model=chat_model, tools=[add_tool], base_system_prompt="Count.")

    result = execute(agent, ["Add"])

    assert isinstance(agent, Agent)
    assert result.status == "completed", result.error
    assert result.state.messages[2].tool_results[0].content == "4"
    # new() builds the default stack: its prompts follow the base prompt, its tools
    # are offered beside the agent's own.
    assert fake_llm.requests[0]["messages"][0]["content"].startswith("Count.\n\n")
    offered = {t["function"]["name"] for t in fake_llm.requests[0]["tools"]}
    assert {"add", "write_todos", "write_file", "task"} <= offered


async def test_the_top_level_aexecute_runs_a_turn(chat_model, fake_llm):
    fake_llm.script(reply("Async hello"))
    agent = new(model=chat_model)

    result = await aexecute(agent, ["Hi"], max_runs=1)

    assert result.status == "completed", result.error
    assert result.last_message.text == "Async hello"


async def test_execute_accepts_openai_style_dicts_and_plain_strings(
    chat_model, fake_llm
):
    history = [
        {"role": "user", "content": "Add 1 and 2"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "old1",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "old1", "content": "3"},
        {"role": "assistant", "content": "It is 3."},
        "And now?",
    ]
    fake_llm.script(reply("Still 3."))

    result = await Agent(replace_default_middleware=True, model=chat_model).aexecute(
        history
    )

    assert result.status == "completed", result.error
    roles = [m.role for m in result.state.messages]
    assert roles == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert result.state.messages[1].tool_calls[0].arguments == {"a": 1, "b": 2}
    sent = fake_llm.last_request["messages"]
    assert sent[2] == {"role": "tool", "tool_call_id": "old1", "content": "3"}
    assert sent[-1] == {"role": "user", "content": "And now?"}


@pytest.mark.parametrize("bad", ["just a string", [42]])
async def test_execute_refuses_input_that_is_not_messages(chat_model, fake_llm, bad):
    with pytest.raises(TypeError):
        await Agent(replace_default_middleware=True, model=chat_model).aexecute(bad)
    assert fake_llm.requests == []


# Tools and state --------------------------------------------------------------------
async def test_state_updates_returned_by_tools_are_merged_into_the_final_state(
    chat_model, fake_llm
):
    def remember(args: dict, _ctx: object) -> tuple[str, dict]:
        return "noted", {"metadata": {"prefs": {"color": "blue"}}}

    def plan(args: dict, _ctx: object) -> tuple[str, State]:
        update = State(
            metadata={"prefs": {"size": "L"}},
            todos=[Todo(id="t1", content="Buy paint")],
        )
        return "planned", update

    fake_llm.script(
        reply(
            tool_calls=[
                tool_call("remember", {}, id="r1"),
                tool_call("plan", {}, id="p1"),
            ]
        ),
        reply("All set."),
    )
    agent = Agent(
        replace_default_middleware=True,
        model=chat_model,
        tools=[make_tool("remember", remember), make_tool("plan", plan)],
    )
    start = State(
        messages=[Message.user("Set me up")], metadata={"prefs": {"lang": "en"}}
    )

    result = await agent.aexecute(start)

    assert result.status == "completed", result.error
    assert result.state.metadata == {
        "prefs": {"lang": "en", "color": "blue", "size": "L"}
    }
    assert [(t.id, t.content) for t in result.state.todos] == [("t1", "Buy paint")]
    assert [r.content for r in result.state.messages[2].tool_results] == [
        "noted",
        "planned",
    ]
    # The update is in-process only: the model reads the text.
    assert fake_llm.requests[1]["messages"][2]["content"] == "noted"
    # The caller's state is untouched.
    assert start.metadata == {"prefs": {"lang": "en"}}
    assert start.todos == []


async def test_a_state_update_with_unknown_keys_ends_the_turn_as_an_error(
    chat_model, fake_llm
):
    def sloppy(args: dict, _ctx: object) -> tuple[str, dict]:
        return "done", {"metdata": {"x": 1}}

    fake_llm.script(reply(tool_calls=[tool_call("sloppy", {})]), reply("never"))

    result = await Agent(
        replace_default_middleware=True,
        model=chat_model,
        tools=[make_tool("sloppy", sloppy)],
    ).aexecute(["Go"])

    assert result.status == "error"
    assert "sloppy" in result.error and "metdata" in result.error
    assert len(fake_llm.requests) == 1


async def test_tool_context_values_reach_the_tool_as_attributes_and_as_a_dict(
    chat_model, fake_llm
):
    seen: dict[str, Any] = {}

    def whoami(args: dict, context: Any) -> str:
        seen["attribute"] = context.user_id
        seen["dict"] = dict(context.tool_context)
        seen["agent_id"] = context.agent_id
        seen["call_id"] = context.tool_call.call_id
        seen["messages"] = [m.role for m in context.state.messages]
        return f"user {context.user_id}"

    fake_llm.script(reply(tool_calls=[tool_call("whoami", {}, id="w1")]), reply("ok"))
    agent = Agent(
        replace_default_middleware=True,
        model=chat_model,
        tools=[make_tool("whoami", whoami)],
        tool_context={"user_id": 7, "team": "blue"},
    )

    result = await agent.aexecute(["Who am I?"])

    assert result.status == "completed", result.error
    assert seen == {
        "attribute": 7,
        "dict": {"user_id": 7, "team": "blue"},
        "agent_id": agent.agent_id,
        "call_id": "w1",
        "messages": ["user", "assistant"],
    }
    assert result.state.messages[2].tool_results[0].content == "user 7"


async def test_a_tool_slower_than_async_tool_timeout_becomes_an_error_result(
    chat_model, fake_llm
):
    async def slow(args: dict, _ctx: object) -> str:
        await asyncio.sleep(5)
        return "too late"

    fake_llm.script(reply(tool_calls=[tool_call("slow", {})]), reply("It timed out."))
    agent = Agent(
        replace_default_middleware=True,
        model=chat_model,
        tools=[make_tool("slow", slow)],
        async_tool_timeout=0.05,
    )

    result = await agent.aexecute(["Go"])

    assert result.status == "completed", result.error
    tool_result = result.state.messages[2].tool_results[0]
    assert tool_result.is_error
    assert "timed out" in tool_result.content
    assert "timed out" in fake_llm.requests[1]["messages"][-1]["content"]


async def test_execute_on_a_state_waiting_for_decisions_raises_invalid_resume(
    chat_model, fake_llm
):
    state = State(messages=[Message.user("Hi")], interrupt_data={"action_requests": []})

    with pytest.raises(InvalidResume, match="resume"):
        await Agent(replace_default_middleware=True, model=chat_model).aexecute(state)
    assert fake_llm.requests == []


async def test_the_result_carries_the_token_usage_of_every_model_call(
    chat_model, fake_llm, add_tool
):
    fake_llm.script(
        reply(
            tool_calls=[tool_call("add", {"a": 1, "b": 1})],
            usage=(10, 3),
            include_usage=True,
        ),
        reply("2", usage=(20, 1), include_usage=True),
    )

    result = await Agent(
        replace_default_middleware=True, model=chat_model, tools=[add_tool]
    ).aexecute(["Add"])

    assert result.status == "completed", result.error
    assert (result.usage.input, result.usage.output) == (30, 4)


@pytest.mark.parametrize(
    "options",
    [
        {"model": None},
        {"model": 5},
        {"model": "  "},
        {"model": {"model": "x", "no_such_field": 1}},
        {"model": "sagents/demo", "tools": ["not a tool"]},
    ],
)
def test_bad_agent_options_are_configuration_errors(options):
    with pytest.raises(ConfigurationError):
        Agent(replace_default_middleware=True, **options)
