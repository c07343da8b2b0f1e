"""ConversationTitle: a title generated while the model answers, stored and announced."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from sagents_django.core import (
    Agent,
    ChatModel,
    LLMError,
    Message,
    State,
    SubAgent,
    SubAgentConfig,
    Tool,
    ToolCall,
)
from sagents_django.core.events import event_handlers
from sagents_django.core.llm import ModelRequest
from sagents_django.core.middleware.conversation_title import ConversationTitle
from sagents_django.core.testing import ScriptedModel, message_deltas
from tests.fakes.openai_server import FakeOpenAIServer, Fault, Reply, fault, reply

Events = list[tuple[str, dict[str, Any]]]


def is_title_request(body: dict[str, Any]) -> bool:
    return "<user_text>" in json.dumps(body.get("messages"))


def routed(server: FakeOpenAIServer, title: Reply | Fault, main: Reply) -> list[bool]:
    """Answer title requests with ``title`` and the rest with ``main``; the returned
    list records, per title request, whether the main call was still unfinished."""
    overlaps: list[bool] = []

    def step(body: dict[str, Any]) -> Reply | Fault:
        if is_title_request(body):
            overlaps.append(
                not any(
                    r.outcome != "pending" and not is_title_request(r.json)
                    for r in server.requests
                )
            )
            return title
        return main

    server.script(default=step)
    return overlaps


def title_agent(model: Any, *specs: Any) -> Agent:
    return Agent(
        model=model,
        middleware=list(specs) or [ConversationTitle],
        replace_default_middleware=True,
    )


async def execute(agent: Agent, state: State | list[Any]) -> tuple[Any, Events]:
    events: Events = []
    result = await agent.aexecute(
        state,
        callbacks=[
            {"on_agent_event": lambda ex, name, data: events.append((name, data))}
        ],
    )
    return result, events


def title_events(events: Events) -> list[dict[str, Any]]:
    return [data for name, data in events if name == "conversation_title_generated"]


class SlowModel:
    """A title model that answers after ``seconds``."""

    max_retries = 0
    name = "slow"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def request(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> ModelRequest:
        return ModelRequest(model_name=self.name, messages=messages, tools=tools)

    async def stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        await asyncio.sleep(self.seconds)
        for delta in message_deltas(Message.assistant("Too late")):
            yield delta


class GatedModel:
    """A title model that answers ``text`` once ``gate`` is set."""

    max_retries = 0
    name = "gated"

    def __init__(self, text: str) -> None:
        self.text = text
        self.gate = asyncio.Event()
        self.requests: list[ModelRequest] = []
        self.cancelled = 0

    def request(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> ModelRequest:
        return ModelRequest(model_name=self.name, messages=messages, tools=tools)

    async def stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        self.requests.append(request)
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        for delta in message_deltas(Message.assistant(self.text)):
            yield delta


def debug_actions(events: Events) -> list[str]:
    return [
        data["data"]["action"]
        for name, data in events
        if name == "debug" and data.get("event") == "middleware_action"
    ]


def title_tasks() -> list[asyncio.Task[Any]]:
    """Title calls still running anywhere on this loop."""
    return [
        t
        for t in asyncio.all_tasks()
        if not t.done() and "_generate" in repr(t.get_coro())
    ]


# Through the fake provider -----------------------------------------------------------


async def test_a_title_is_generated_while_the_model_answers_and_is_stored_and_announced(
    chat_model: ChatModel, fake_llm: FakeOpenAIServer
) -> None:
    overlaps = routed(
        fake_llm,
        title=reply('"Lisbon Trip in May."'),
        main=reply("Lisbon is lovely in May.", chunks=4, delay=0.05),
    )
    agent = title_agent(chat_model)

    result, events = await execute(
        agent, ["Please help me plan a trip to Lisbon in May"]
    )

    assert result.status == "completed", result.error
    assert result.last_message.text == "Lisbon is lovely in May."
    assert result.state.metadata["conversation_title"] == "Lisbon Trip in May"
    assert title_events(events) == [
        {"title": "Lisbon Trip in May", "agent_id": agent.agent_id}
    ]
    assert overlaps == [True]  # the title call ran while the main call streamed
    title_request = next(r for r in fake_llm.requests if is_title_request(r.json))
    system, user = title_request.messages
    assert "short title" in system["content"]
    assert "- Debug payment processing error" in system["content"]
    assert "Please help me plan a trip to Lisbon in May" in user["content"]
    assert not title_request.get("tools")


@pytest.mark.parametrize("status", [400, 500])
async def test_a_failing_title_model_changes_nothing_and_the_turn_completes(
    chat_model: ChatModel,
    fake_llm: FakeOpenAIServer,
    status: int,
    caplog: pytest.LogCaptureFixture,
) -> None:
    routed(fake_llm, title=fault.http(status), main=reply("Hello!"))
    agent = title_agent(chat_model)

    with caplog.at_level(logging.WARNING):
        result, events = await execute(agent, ["Hi there"])

    assert result.status == "completed", result.error
    assert result.last_message.text == "Hello!"
    assert "conversation_title" not in result.state.metadata
    assert title_events(events) == []
    assert any("Title generation failed" in r.getMessage() for r in caplog.records)


async def test_a_stalled_title_model_is_cancelled_when_the_reply_is_done(
    chat_model: ChatModel, fake_llm: FakeOpenAIServer
) -> None:
    routed(fake_llm, title=fault.stall(), main=reply("Hello!"))
    agent = title_agent(chat_model, (ConversationTitle, {"turn_end_grace": 0}))

    result, events = await execute(agent, ["Hi there"])

    # The turn completed while the title call was still blocked; that call was
    # cancelled with it (its connection closed), so nothing outlives the turn.
    assert result.status == "completed", result.error
    assert result.last_message.text == "Hello!"
    assert "conversation_title" not in result.state.metadata
    assert title_events(events) == []
    assert debug_actions(events) == [
        "title_generation_started",
        "title_generation_cancelled",
    ]
    assert title_tasks() == []
    title_request = next(r for r in fake_llm.requests if is_title_request(r.json))
    assert await asyncio.to_thread(title_request.done.wait, 5)
    assert title_request.outcome == "client_disconnected"


# In process --------------------------------------------------------------------------


async def test_the_offline_demo_model_titles_the_conversation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SAGENTS_DEMO_DELAY_MS", "0")
    agent = title_agent("sagents/demo")

    result, events = await execute(
        agent, ["please help me plan a trip to Lisbon in May"]
    )

    assert result.status == "completed", result.error
    assert result.state.metadata["conversation_title"] == "Please help me plan a trip"
    assert [e["title"] for e in title_events(events)] == ["Please help me plan a trip"]


async def test_a_title_already_present_is_not_generated_again() -> None:
    title_model = ScriptedModel([])
    agent = title_agent(
        ScriptedModel(["Answer"]), (ConversationTitle, {"chat_model": title_model})
    )
    state = State(
        messages=[Message.user("Hello")], metadata={"conversation_title": "Kept"}
    )

    result, events = await execute(agent, state)

    assert result.state.metadata["conversation_title"] == "Kept"
    assert title_model.requests == []
    assert title_events(events) == []


async def test_a_title_is_requested_once_across_tool_loops_and_turns() -> None:
    title_model = ScriptedModel(["Loop title"])
    echo = Tool(name="echo", description="Echo.", function=lambda args, ctx: "echo")
    agent = Agent(
        model=ScriptedModel(
            [
                Message.assistant(tool_calls=[ToolCall(call_id="1", name="echo")]),
                "One",
                "Two",
            ]
        ),
        tools=[echo],
        middleware=[(ConversationTitle, {"chat_model": title_model})],
        replace_default_middleware=True,
    )

    first, first_events = await execute(agent, ["Go"])
    second, second_events = await execute(
        agent, first.state.add_message(Message.user("More"))
    )

    assert first.last_message.text == "One"
    assert second.state.metadata["conversation_title"] == "Loop title"
    assert len(title_model.requests) == 1
    assert len(title_events(first_events)) == 1
    assert title_events(second_events) == []


async def test_two_instances_with_their_own_ids_keep_their_own_titles() -> None:
    agent = title_agent(
        ScriptedModel(["Bonjour"]),
        (ConversationTitle, {"id": "title_en", "chat_model": ScriptedModel(["Hi"])}),
        (
            ConversationTitle,
            {
                "id": "title_fr",
                "chat_model": ScriptedModel(["Salut"]),
                "metadata_key": "conversation_title_fr",
                "prompt_template": "Donne un titre court en français.",
            },
        ),
    )

    result, events = await execute(agent, ["Say hello"])

    assert result.state.metadata["conversation_title"] == "Hi"
    assert result.state.metadata["conversation_title_fr"] == "Salut"
    assert sorted(title_events(events), key=lambda e: e["title"]) == [
        {"title": "Hi", "agent_id": agent.agent_id},
        {
            "title": "Salut",
            "agent_id": agent.agent_id,
            "metadata_key": "conversation_title_fr",
        },
    ]
    french = agent.get_middleware("title_fr").middleware
    assert french.title_messages("x")[0]["content"] == (
        "Donne un titre court en français."
    )


async def test_the_title_comes_from_the_latest_user_message() -> None:
    title_model = ScriptedModel(["Real question"])
    agent = title_agent(
        ScriptedModel(["Answer"]), (ConversationTitle, {"chat_model": title_model})
    )
    state = State(
        messages=[
            Message.user("An example request"),
            Message.assistant("An example answer"),
            Message.user("The real question about tides"),
        ]
    )

    await execute(agent, state)

    sent = title_model.requests[0].messages[-1]["content"]
    assert "The real question about tides" in sent
    assert "An example request" not in sent


async def test_a_title_model_that_times_out_changes_nothing() -> None:
    agent = title_agent(
        ScriptedModel(["Answer"]),
        (ConversationTitle, {"chat_model": SlowModel(5), "timeout": 0.05}),
    )

    result, events = await execute(agent, ["Hello"])

    assert result.status == "completed", result.error
    assert "conversation_title" not in result.state.metadata
    assert title_events(events) == []


@pytest.mark.parametrize("answer", ["", "  \n ", '""'])
async def test_an_empty_title_changes_nothing(answer: str) -> None:
    agent = title_agent(
        ScriptedModel(["Answer"]),
        (ConversationTitle, {"chat_model": ScriptedModel([answer])}),
    )

    result, events = await execute(agent, ["Hello"])

    assert result.status == "completed", result.error
    assert "conversation_title" not in result.state.metadata
    assert title_events(events) == []


async def test_a_title_that_comes_while_a_turn_fails_is_kept_in_its_state() -> None:
    title_model = ScriptedModel(["Early title"])
    agent = title_agent(
        ScriptedModel([LLMError("provider down")]),
        (ConversationTitle, {"chat_model": title_model}),
    )

    failed, events = await execute(agent, ["Hello"])

    assert failed.status == "error"
    assert failed.state.metadata["conversation_title"] == "Early title"
    assert [e["title"] for e in title_events(events)] == ["Early title"]


async def test_a_blocked_title_call_holds_up_neither_the_reply_nor_its_tools() -> None:
    title_model = GatedModel("Unblocked title")
    order: list[str] = []

    def release(args: dict[str, Any], ctx: Any) -> str:
        order.append("tool ran")
        title_model.gate.set()  # only a tool of this turn can unblock the title
        return "released"

    agent = Agent(
        model=ScriptedModel(
            [
                Message.assistant(tool_calls=[ToolCall(call_id="1", name="release")]),
                "Done",
            ]
        ),
        tools=[Tool(name="release", description="Release.", function=release)],
        middleware=[(ConversationTitle, {"chat_model": title_model})],
        replace_default_middleware=True,
    )
    events: Events = []

    def on_event(ex: Any, name: str, data: dict[str, Any]) -> None:
        events.append((name, data))
        if name == "conversation_title_generated":
            order.append("title")

    result = await agent.aexecute(
        ["Go"],
        callbacks=[
            {
                "on_llm_new_message": lambda ex, message: order.append("reply"),
                "on_agent_event": on_event,
            }
        ],
    )

    assert result.status == "completed", result.error
    assert order[:2] == ["reply", "tool ran"]  # the tool did not wait for the title
    assert order.count("title") == 1 and order.index("title") > 1
    assert result.state.metadata["conversation_title"] == "Unblocked title"
    assert (len(title_model.requests), title_model.cancelled) == (1, 0)
    assert title_events(events) == [
        {"title": "Unblocked title", "agent_id": agent.agent_id}
    ]
    assert title_tasks() == []


async def test_a_title_pending_when_the_turn_ends_is_cancelled_and_asked_again() -> (
    None
):
    title_model = GatedModel("Second try")

    async def until_title_asked(args: dict[str, Any], ctx: Any) -> str:
        while not title_model.requests:
            await asyncio.sleep(0)
        return "asked"

    agent = Agent(
        model=ScriptedModel(
            [Message.assistant(tool_calls=[ToolCall(call_id="1", name="wait")]), "One"]
        ),
        tools=[Tool(name="wait", description="Wait.", function=until_title_asked)],
        middleware=[
            (ConversationTitle, {"chat_model": title_model, "turn_end_grace": 0})
        ],
        replace_default_middleware=True,
    )

    first, first_events = await execute(agent, ["Hello"])

    assert first.status == "completed", first.error
    assert (len(title_model.requests), title_model.cancelled) == (1, 1)
    assert "conversation_title" not in first.state.metadata
    assert title_events(first_events) == []
    assert title_tasks() == []

    title_model.gate.set()
    agent = title_agent(
        ScriptedModel(["Two"]), (ConversationTitle, {"chat_model": title_model})
    )
    second, second_events = await execute(
        agent, first.state.add_message(Message.user("More"))
    )

    assert second.state.metadata["conversation_title"] == "Second try"
    assert len(title_model.requests) == 2
    assert [e["title"] for e in title_events(second_events)] == ["Second try"]


async def test_sub_agents_generate_no_title_of_their_own() -> None:
    title_model = ScriptedModel(["Parent title", "Sub title", "Other sub title"])
    researcher = SubAgentConfig(
        name="researcher",
        description="Researches.",
        middleware=[(ConversationTitle, {"chat_model": title_model})],
    )

    def task(call_id: str, subagent_type: str) -> Message:
        arguments = {"instructions": "Look it up", "subagent_type": subagent_type}
        return Message.assistant(
            tool_calls=[ToolCall(call_id=call_id, name="task", arguments=arguments)]
        )

    agent = Agent(
        # The general-purpose sub-agent inherits the parent's ConversationTitle; the
        # researcher lists its own. Both use the parent's scripted model.
        model=ScriptedModel(
            [
                task("1", "general-purpose"),
                "General answer",
                task("2", "researcher"),
                "Research answer",
                "Final",
            ]
        ),
        middleware=[
            (ConversationTitle, {"chat_model": title_model}),
            (SubAgent, {"subagents": [researcher]}),
        ],
        replace_default_middleware=True,
    )

    result, events = await execute(agent, ["Research the tides"])

    assert result.status == "completed", result.error
    assert [
        m.tool_results[0].text for m in result.state.messages if m.role == "tool"
    ] == [
        "General answer",
        "Research answer",
    ]
    assert len(title_model.requests) == 1
    assert result.state.metadata["conversation_title"] == "Parent title"
    assert title_events(events) == [
        {"title": "Parent title", "agent_id": agent.agent_id}
    ]
    from_subagents = [d for name, d in events if name == "subagent_event"]
    assert from_subagents  # their progress is forwarded, so a title would be too
    assert {d["event"] for d in from_subagents} == {"llm_deltas", "llm_message"}


async def test_no_title_is_requested_without_a_user_message() -> None:
    title_model = ScriptedModel([])
    middleware = ConversationTitle(chat_model=title_model)

    state = State(messages=[Message.assistant("Welcome!")])

    assert await middleware.before_model(state) is state
    assert await middleware.after_model(state) is state
    assert title_model.requests == []


# Options and helpers -----------------------------------------------------------------


def test_the_title_model_defaults_to_the_agents_model_and_fallbacks() -> None:
    agent = Agent(
        model="openai/gpt-4o-mini",
        fallback_models=["anthropic/claude-3-5-haiku-latest"],
        middleware=[ConversationTitle],
        replace_default_middleware=True,
    )

    middleware = agent.middleware[0].middleware
    assert middleware.models == agent.models
    assert middleware.debug_summary() == {
        "models": ["openai/gpt-4o-mini", "anthropic/claude-3-5-haiku-latest"],
        "metadata_key": "conversation_title",
        "timeout": 30.0,
        "turn_end_grace": 2.0,
    }


def test_a_title_model_given_as_a_string_gets_its_own_fallbacks() -> None:
    agent = Agent(
        model="openai/gpt-4o",
        fallback_models=["openai/gpt-4o-mini"],
        middleware=[
            (
                ConversationTitle,
                {"chat_model": "openai/gpt-4o-mini", "fallbacks": ["sagents/demo"]},
            )
        ],
        replace_default_middleware=True,
    )

    models = agent.middleware[0].middleware.models
    assert [m.name for m in models] == ["openai/gpt-4o-mini", "sagents/demo"]


def test_custom_examples_are_listed_in_the_prompt() -> None:
    middleware = ConversationTitle(examples=["Fix login bug"])

    system = middleware.title_messages("text")[0]["content"]

    assert system.endswith("- Fix login bug")
    assert "Debug payment" not in system
    no_examples = ConversationTitle(examples=[]).title_messages("t")[0]["content"]
    assert "examples" not in no_examples


@pytest.mark.parametrize(
    ("raw", "title"),
    [
        ('"Plan a Trip."', "Plan a Trip"),
        ("Title: Budget review!", "Budget review"),
        ("**Quarterly goals**\nBecause the user asked…", "Quarterly goals"),
        ("\u201cSmart quotes\u201d", "Smart quotes"),
        ("  spaced    out   words  ", "spaced out words"),
    ],
)
def test_a_raw_answer_is_cleaned_into_a_title(raw: str, title: str) -> None:
    assert ConversationTitle().clean(raw) == title


def test_a_long_title_is_cut_at_a_word_boundary() -> None:
    middleware = ConversationTitle(max_length=20)

    assert middleware.clean("A very long title that goes on and on") == (
        "A very long title"
    )
    assert middleware.clean("x" * 30) == "x" * 20


@pytest.mark.parametrize(
    "message",
    [
        ("title_generated", "From a task"),
        ["title_generated", "From a task"],
        {"type": "title_generated", "title": "From a task"},
    ],
    ids=["tuple", "list", "dict"],
)
def test_a_title_generated_message_stores_and_announces_the_title(
    message: Any,
) -> None:
    seen: Events = []
    state = State(agent_id="agent-1")

    with event_handlers(lambda name, data: seen.append((name, data))):
        updated = ConversationTitle().handle_message(message, state)

    assert updated.metadata == {"conversation_title": "From a task"}
    assert title_events(seen) == [{"title": "From a task", "agent_id": "agent-1"}]


def test_a_title_generation_failed_message_is_logged_and_changes_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    state = State()

    with caplog.at_level(logging.WARNING):
        updated = ConversationTitle().handle_message(
            ("title_generation_failed", "timeout"), state
        )

    assert updated is state
    assert "timeout" in caplog.text
    assert ConversationTitle().handle_message("unrelated", state) is state
