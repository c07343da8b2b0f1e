"""Summarization: the safe cutoff, the summary through a real Agent, what survives a
compaction, failures that keep every message, and token counting (offline)."""

from __future__ import annotations

import json
import logging
import socket
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sagents_django.core import (
    Agent,
    ConfigurationError,
    ContentPart,
    LLMError,
    Message,
    State,
    Todo,
    Tool,
    ToolCall,
    ToolResult,
    messages_to_openai,
    tokens,
)
from sagents_django.core.middleware.summarization import (
    DEFAULT_SUMMARY_PROMPT,
    FILES_PREFIX,
    MAX_TOOL_TEXT,
    SUMMARY_METADATA_KEY,
    SUMMARY_PREFIX,
    Summarization,
    find_safe_cutoff,
    is_safe_cutoff,
    is_summary_message,
    partition,
    referenced_paths,
    render_transcript,
    summary_message,
    summary_request,
)
from sagents_django.core.testing import ScriptedModel
from sagents_django.core.tokens import (
    TokenCache,
    approximate_tokens,
    count_tokens,
    has_offline_tokenizer,
)
from sagents_django.core.transports import import_litellm
from tests.core.conftest import model_for
from tests.fakes.openai_server import fault, reply


# Building conversations ---------------------------------------------------------------
def user(text: str) -> Message:
    return Message.user(text)


def said(text: str) -> Message:
    return Message.assistant(text)


def calls(*ids: str, name: str = "lookup", **arguments: Any) -> Message:
    return Message.assistant(
        tool_calls=[ToolCall(call_id=i, name=name, arguments=arguments) for i in ids]
    )


def results(*ids: str, name: str = "lookup", content: str = "ok") -> Message:
    return Message.tool(
        [ToolResult(tool_call_id=i, name=name, content=content) for i in ids]
    )


def chat(turns: int) -> list[Message]:
    """``turns`` question/answer pairs with numbered, recognisable texts."""
    out: list[Message] = []
    for n in range(1, turns + 1):
        out += [user(f"old question {n}"), said(f"old answer {n}")]
    return out


def summarizing_agent(agent_model: Any, **options: Any) -> Agent:
    return Agent(
        model=agent_model,
        middleware=[(Summarization, options)],
        replace_default_middleware=True,
    )


def is_summary_request(messages: list[dict[str, Any]]) -> bool:
    return "Conversation to summarize:" in json.dumps(messages)


def sent_texts(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m.get("content")) for m in messages]


# The safe cutoff ----------------------------------------------------------------------
def test_without_tool_calls_the_cutoff_keeps_exactly_the_last_messages() -> None:
    messages = chat(4)

    assert find_safe_cutoff(messages, 3) == 5
    assert find_safe_cutoff(messages, 0) == 8


def test_a_kept_tool_result_pulls_its_call_just_before_the_cutoff_into_the_kept_part():
    # keep=3 would cut between the call (index 1) and its result (index 2).
    messages = [user("q"), calls("c1"), results("c1"), user("q2"), said("a2")]

    cutoff = find_safe_cutoff(messages, 3)

    assert cutoff == 1
    assert messages[cutoff].tool_calls[0].call_id == "c1"
    assert not is_safe_cutoff(messages, 2)


def test_a_cut_right_after_an_assistant_message_with_calls_moves_before_it() -> None:
    # keep=2 would summarize the call and keep its result.
    messages = [user("q"), said("a"), user("q2"), calls("c1"), results("c1"), said("x")]

    assert find_safe_cutoff(messages, 2) == 3
    assert [m.role for m in messages[3:]] == ["assistant", "tool", "assistant"]


def test_parallel_calls_answered_in_one_tool_message_stay_with_their_call() -> None:
    messages = [
        user("q"),
        calls("c1", "c2", "c3"),
        results("c1", "c2", "c3"),
        said("a"),
    ]

    assert find_safe_cutoff(messages, 2) == 1


def test_parallel_calls_answered_by_separate_tool_messages_are_not_split() -> None:
    messages = [
        user("q"),
        said("let me look"),
        calls("c1", "c2"),
        results("c1"),
        results("c2"),
        said("done"),
    ]

    # keep=2 lands between the two results, keep=3 between the call and the results.
    assert find_safe_cutoff(messages, 2) == 2
    assert find_safe_cutoff(messages, 3) == 2
    assert find_safe_cutoff(messages, 4) == 2


def test_a_result_is_matched_to_its_call_by_id_even_with_a_message_between() -> None:
    messages = [user("q"), calls("c1"), user("hurry"), results("c1"), said("a")]

    assert find_safe_cutoff(messages, 3) == 1


def test_a_result_with_an_unknown_call_id_stays_with_the_calls_before_it() -> None:
    messages = [user("q"), calls("c1"), results("other-id"), said("a")]

    assert find_safe_cutoff(messages, 2) == 1


def test_two_tool_exchanges_in_a_row_are_cut_between_them() -> None:
    messages = [
        user("q"),
        calls("c1"),
        results("c1"),
        calls("c2"),
        results("c2"),
        said("a"),
    ]

    assert find_safe_cutoff(messages, 2) == 3


def test_when_no_cut_is_safe_nothing_is_summarized() -> None:
    messages = [calls("c1"), results("c1")]

    assert find_safe_cutoff(messages, 1) == 0
    assert partition(messages, 1) == (messages, [], [])


def test_keeping_at_least_as_many_messages_as_there_are_summarizes_nothing() -> None:
    messages = chat(2)

    assert find_safe_cutoff(messages, 4) == 0
    assert find_safe_cutoff(messages, 10) == 0


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    messages: list[Message] = []
    ids = iter(f"call_{n}" for n in range(1000))
    shapes = ["user", "assistant", "one_result", "split_results", "interleaved"]
    for shape in draw(st.lists(st.sampled_from(shapes), max_size=12)):
        if shape == "user":
            messages.append(user("u"))
        elif shape == "assistant":
            messages.append(said("a"))
        else:
            call_ids = [next(ids) for _ in range(draw(st.integers(1, 3)))]
            messages.append(calls(*call_ids))
            if shape == "one_result":
                messages.append(results(*call_ids))
            elif shape == "split_results":
                messages.extend(results(i) for i in call_ids)
            else:
                messages += [user("meanwhile"), results(*call_ids)]
    return messages


def breaks_a_pair(messages: list[Message], cut: int) -> bool:
    """The oracle: a kept tool result whose call would be summarized."""
    kept = messages[cut:]
    kept_calls = {c.call_id for m in kept for c in m.tool_calls}
    kept_results = {r.tool_call_id for m in kept for r in m.tool_results}
    return 0 < cut < len(messages) and not kept_results <= kept_calls


@settings(max_examples=300, deadline=None)
@given(conversations(), st.integers(0, 30))
def test_the_cutoff_is_the_latest_cut_that_separates_no_call_from_its_result(
    messages: list[Message], keep: int
) -> None:
    cutoff = find_safe_cutoff(messages, keep)
    target = max(0, len(messages) - keep)

    assert 0 <= cutoff <= target
    assert not breaks_a_pair(messages, cutoff)
    assert is_safe_cutoff(messages, cutoff)
    later = range(max(cutoff, 0) + 1, target + 1)
    assert all(breaks_a_pair(messages, cut) for cut in later)


# Partition, transcript and request ----------------------------------------------------
def test_a_leading_system_message_is_kept_ahead_of_the_summary() -> None:
    messages = [Message.system("Be brief."), *chat(3)]

    head, old, kept = partition(messages, 2)

    assert head == [messages[0]]
    assert old == messages[1:5]
    assert kept == messages[5:]


def test_an_earlier_summary_is_summarized_again_with_the_newer_messages() -> None:
    earlier = summary_message("Earlier things.", summarized=chat(5))
    messages = [earlier, *chat(3)]

    head, old, _kept = partition(messages, 2)
    again = summary_message("All things.", summarized=old)

    assert head == []
    assert old[0] is earlier
    assert again.metadata[SUMMARY_METADATA_KEY]["messages"] == 10 + 4


def test_an_earlier_summary_alone_is_not_summarized_again() -> None:
    earlier = summary_message("Earlier things.", summarized=chat(5))
    messages = [earlier, *chat(1)]

    assert partition(messages, 2) == (messages, [], [])


def test_the_transcript_renders_text_tool_calls_and_results() -> None:
    messages = [
        user("Read the plan"),
        Message(
            role="assistant",
            content=[ContentPart.thinking("secret musing"), ContentPart.text("Sure.")],
            tool_calls=[
                ToolCall(call_id="c1", name="read_file", arguments={"path": "plan.md"})
            ],
        ),
        Message.tool(
            [
                ToolResult(
                    tool_call_id="c1",
                    name="read_file",
                    content="missing",
                    is_error=True,
                )
            ]
        ),
        Message.user([ContentPart.text("and this"), ContentPart.image("aGk=")]),
    ]

    text = render_transcript(messages)

    assert text == (
        "User: Read the plan\n\n"
        "Assistant: Sure.\n\n"
        'Assistant called read_file({"path": "plan.md"})\n\n'
        "Tool error (read_file): missing\n\n"
        "User: and this\n[image]"
    )
    assert "secret musing" not in text


def test_long_tool_results_are_clipped_in_the_transcript() -> None:
    big = "x" * (MAX_TOOL_TEXT + 500)

    text = render_transcript([calls("c1"), results("c1", content=big)])

    assert "x" * MAX_TOOL_TEXT in text
    assert "x" * (MAX_TOOL_TEXT + 1) not in text
    assert "[500 characters cut]" in text


def test_file_paths_are_found_in_tool_call_arguments_and_in_earlier_summaries() -> None:
    earlier = summary_message(
        "Earlier.", summarized=[calls("c0", name="write_file", file_path="a.md")]
    )
    messages = [
        earlier,
        calls("c1", name="write_file", file_path="notes/plan.md", content="x"),
        calls("c2", name="move_file", source="b.txt", destination_path="c.txt"),
        calls("c3", name="edit", edits=[{"path": "deep/d.py"}], path="notes/plan.md"),
        calls("c4", name="search", pattern="*.md", query="text"),
    ]

    assert referenced_paths(messages) == [
        "a.md",
        "notes/plan.md",
        "b.txt",
        "c.txt",
        "deep/d.py",
    ]


def test_the_default_request_puts_the_transcript_and_the_paths_in_the_prompt() -> None:
    old = [user("hello"), calls("c1", name="write_file", path="out/report.md")]

    request = summary_request(old)

    assert len(request) == 1 and request[0]["role"] == "user"
    content = request[0]["content"]
    assert content.startswith(DEFAULT_SUMMARY_PROMPT.split("{conversation}")[0])
    assert "User: hello" in content
    assert "Files referenced in these messages" in content
    assert "out/report.md" in content


def test_a_prompt_without_a_placeholder_is_the_system_message() -> None:
    request = summary_request([user("hello")], prompt="Summarize tersely.")

    assert request == [
        {"role": "system", "content": "Summarize tersely."},
        {"role": "user", "content": "User: hello"},
    ]


def test_the_summary_message_is_a_marked_system_message_listing_the_paths() -> None:
    old = [user("q"), calls("c1", name="write_file", file_path="notes.md")]

    message = summary_message("  We wrote notes.  ", summarized=old)

    assert message.role == "system"
    assert is_summary_message(message)
    assert message.text == (
        f"{SUMMARY_PREFIX}\n\nWe wrote notes.\n\n{FILES_PREFIX} notes.md"
    )
    assert message.metadata[SUMMARY_METADATA_KEY] == {
        "messages": 2,
        "paths": ["notes.md"],
    }
    assert Message.from_dict(message.to_dict()) == message


# Through an Agent -------------------------------------------------------------------
async def test_at_the_threshold_the_next_request_carries_the_summary_and_the_kept_messages(
    fake_llm, transport
) -> None:
    messages = [*chat(4), user("newest question")]

    def step(body: dict[str, Any]) -> Any:
        if is_summary_request(body["messages"]):
            return reply("They discussed four old questions.")
        return reply("final answer")

    fake_llm.script(default=step)
    agent = summarizing_agent(
        model_for(fake_llm, transport),
        max_tokens_before_summary=approximate_tokens(messages),
        messages_to_keep=3,
    )

    result = await agent.aexecute(State(messages=messages))

    assert result.status == "completed", result.error
    summary_call, main_call = fake_llm.requests
    assert is_summary_request(summary_call.messages)
    assert "old question 1" in json.dumps(summary_call.messages)
    assert "old answer 3" in json.dumps(summary_call.messages)
    sent = main_call.messages
    assert sent[0] == {
        "role": "system",
        "content": f"{SUMMARY_PREFIX}\n\nThey discussed four old questions.",
    }
    assert sent_texts(sent[1:]) == ["old question 4", "old answer 4", "newest question"]
    for n in (1, 2, 3):
        assert f"old question {n}" not in json.dumps(sent)
    assert result.state.messages[0].metadata[SUMMARY_METADATA_KEY]["messages"] == 6
    assert [m.text for m in result.state.messages[-2:]] == [
        "newest question",
        "final answer",
    ]


async def test_one_token_below_the_threshold_nothing_is_summarized() -> None:
    messages = [*chat(4), user("newest question")]
    model = ScriptedModel(["final answer"])
    agent = summarizing_agent(
        model,
        max_tokens_before_summary=approximate_tokens(messages) + 1,
        messages_to_keep=3,
    )

    result = await agent.aexecute(State(messages=messages))

    assert result.status == "completed", result.error
    assert len(model.requests) == 1
    assert model.requests[0].messages == messages_to_openai(messages)
    assert result.state.messages[:-1] == messages


async def test_a_compacted_history_is_not_summarized_again_later_in_the_turn() -> None:
    lookup = Tool(
        name="lookup",
        description="Look something up.",
        function=lambda args, context: "found it",
        parameters={"type": "object", "properties": {}},
    )
    messages = [*chat(4), user("newest question")]
    model = ScriptedModel(
        [
            "Summary of four questions.",
            Message.assistant(tool_calls=[ToolCall(call_id="t1", name="lookup")]),
            "final answer",
        ]
    )
    agent = Agent(
        model=model,
        tools=[lookup],
        middleware=[
            (
                Summarization,
                {
                    "max_tokens_before_summary": approximate_tokens(messages),
                    "messages_to_keep": 1,
                },
            )
        ],
        replace_default_middleware=True,
    )

    result = await agent.aexecute(State(messages=messages))

    assert result.status == "completed", result.error
    assert len(model.requests) == 3
    assert [is_summary_request(r.messages) for r in model.requests] == [
        True,
        False,
        False,
    ]
    assert sum(is_summary_message(m) for m in result.state.messages) == 1


async def test_todos_and_file_paths_survive_compaction() -> None:
    todos = [
        Todo(content="Draft the plan", status="completed"),
        Todo(content="Review the plan", status="in_progress"),
    ]
    messages = [
        user("Write a plan"),
        Message.assistant(
            tool_calls=[
                ToolCall(
                    call_id="w1",
                    name="write_file",
                    arguments={"file_path": "notes/plan.md", "content": "1. start"},
                )
            ]
        ),
        results("w1", name="write_file", content="Wrote notes/plan.md"),
        said("The plan is written."),
        user("Now review it"),
    ]
    model = ScriptedModel(["We worked on a plan.", "Reviewed."])
    agent = summarizing_agent(model, max_tokens_before_summary=1, messages_to_keep=1)

    result = await agent.aexecute(State(messages=messages, todos=todos))

    assert result.status == "completed", result.error
    assert result.state.todos == todos
    summary_input = json.dumps(model.requests[0].messages)
    assert "notes/plan.md" in summary_input
    first_sent = model.requests[1].messages[0]
    assert first_sent["role"] == "system"
    assert first_sent["content"].endswith(f"{FILES_PREFIX} notes/plan.md")
    assert "We worked on a plan." in first_sent["content"]


async def test_a_summary_model_answering_http_500_keeps_every_message(
    fake_llm, transport, caplog
) -> None:
    messages = [*chat(4), user("newest question")]
    fake_llm.script(fault.http(500), reply("final answer"))
    agent = summarizing_agent(
        model_for(fake_llm, transport, max_retries=0),
        max_tokens_before_summary=1,
        messages_to_keep=2,
    )

    with caplog.at_level(logging.WARNING):
        result = await agent.aexecute(State(messages=messages))

    assert result.status == "completed", result.error
    assert len(fake_llm.requests) == 2
    assert sent_texts(fake_llm.requests[1].messages) == [m.text for m in messages]
    assert result.state.messages[:-1] == messages
    assert result.last_message.text == "final answer"
    assert any("Summarization failed" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    "failure",
    [LLMError("summary model down"), "   "],
    ids=["llm-error", "empty-text"],
)
async def test_a_failed_summary_keeps_every_message_and_the_turn_goes_on(
    failure: Any, caplog
) -> None:
    messages = [*chat(4), user("newest question")]
    model = ScriptedModel([failure, "final answer"])
    agent = summarizing_agent(model, max_tokens_before_summary=1, messages_to_keep=2)

    with caplog.at_level(logging.WARNING):
        result = await agent.aexecute(State(messages=messages))

    assert result.status == "completed", result.error
    assert model.requests[1].messages == messages_to_openai(messages)
    assert result.state.messages == [*messages, result.last_message]
    assert result.last_message.text == "final answer"
    assert any("Summarization failed" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
async def test_a_custom_token_counter_and_prompt_are_used(asynchronous: bool) -> None:
    counted: list[int] = []

    def count(messages: list[Message]) -> int:
        counted.append(len(messages))
        return 50 if len(messages) > 4 else 5

    async def count_async(messages: list[Message]) -> int:
        return count(messages)

    messages = [*chat(3), user("newest question")]
    model = ScriptedModel(["short summary", "final answer"])
    agent = summarizing_agent(
        model,
        max_tokens_before_summary=50,
        messages_to_keep=2,
        token_counter=count_async if asynchronous else count,
        summary_prompt="Squeeze this:\n{conversation}\nEND",
    )

    result = await agent.aexecute(State(messages=messages))

    assert result.status == "completed", result.error
    assert counted == [7]
    assert model.requests[0].messages == [
        {
            "role": "user",
            "content": "Squeeze this:\nUser: old question 1\n\nAssistant: old answer 1"
            "\n\nUser: old question 2\n\nAssistant: old answer 2"
            "\n\nUser: old question 3\nEND",
        }
    ]
    assert model.requests[1].messages[0]["content"].endswith("short summary")


async def test_a_summary_model_option_writes_the_summary_instead_of_the_agents_model():
    main = ScriptedModel(["final answer"], name="main")
    small = ScriptedModel(["cheap summary"], name="small")
    messages = [*chat(3), user("newest question")]
    agent = summarizing_agent(
        main, model=small, max_tokens_before_summary=1, messages_to_keep=2
    )

    result = await agent.aexecute(State(messages=messages))

    assert result.status == "completed", result.error
    assert len(small.requests) == 1 and len(main.requests) == 1
    assert main.requests[0].messages[0]["content"].endswith("cheap summary")


async def test_the_summary_reaches_no_turn_callback_and_is_announced_as_debug_events():
    deltas: list[Any] = []
    new_messages: list[Message] = []
    announced: list[tuple[str, dict[str, Any]]] = []
    model = ScriptedModel(["SECRET SUMMARY", "final answer"])
    agent = summarizing_agent(model, max_tokens_before_summary=1, messages_to_keep=1)

    result = await agent.aexecute(
        State(messages=[*chat(2), user("newest question")]),
        callbacks=[
            {
                "on_llm_new_delta": lambda ex, d: deltas.extend(d),
                "on_llm_new_message": lambda ex, m: new_messages.append(m),
                "on_agent_event": lambda ex, n, d: announced.append((n, d)),
            }
        ],
    )

    assert result.status == "completed", result.error
    assert "SECRET" not in "".join(d.content for d in deltas)
    assert [m.text for m in new_messages] == ["final answer"]
    debug = [data for name, data in announced if name == "debug"]
    assert [d["event"] for d in debug] == [
        "summarization_started",
        "summarization_completed",
    ]
    assert debug[1]["data"]["before"] == 5 and debug[1]["data"]["after"] == 2


async def test_used_alone_the_middleware_keeps_a_leading_system_message() -> None:
    middleware = Summarization(
        model=ScriptedModel(["the gist"]),
        max_tokens_before_summary=1,
        messages_to_keep=2,
    )
    system = Message.system("Be brief.")
    state = State(messages=[system, *chat(2), user("last")], todos=[Todo(content="t")])

    compacted = await middleware.before_model(state)

    assert compacted.messages[0] is system
    assert compacted.messages[1].text == f"{SUMMARY_PREFIX}\n\nthe gist"
    assert compacted.messages[2:] == state.messages[-2:]
    assert compacted.todos == state.todos
    assert len(state.messages) == 6  # the given state is unchanged


def test_the_defaults_follow_the_reference_and_the_agents_models_summarize() -> None:
    main, fallback = ScriptedModel([], name="main"), ScriptedModel([], name="backup")
    agent = Agent(
        model=main,
        fallback_models=[fallback],
        middleware=[Summarization],
        replace_default_middleware=True,
    )
    middleware = agent.middleware[0].middleware
    assert isinstance(middleware, Summarization)

    assert middleware.max_tokens_before_summary == 170_000
    assert middleware.messages_to_keep == 6
    assert middleware.summary_prompt == DEFAULT_SUMMARY_PROMPT
    assert middleware.summary_models == [main, fallback]
    assert middleware.model_name == "main"
    assert middleware.debug_summary()["custom_prompt"] is False
    with pytest.raises(ConfigurationError, match="no model"):
        _ = Summarization().summary_models


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"max_tokens_before_summary": 0}, "0"),
        ({"max_tokens_before_summary": True}, "True"),
        ({"messages_to_keep": -1}, "-1"),
        ({"messages_to_keep": 2.5}, "2.5"),
        ({"summary_prompt": " "}, "' '"),
        ({"token_counter": 3}, "3"),
        ({"model": 42}, "42"),
    ],
)
def test_bad_options_are_configuration_errors_naming_the_value(
    options: dict[str, Any], named: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Summarization(**options)

    assert named in str(caught.value)


async def test_a_short_conversation_is_never_counted_with_a_tokenizer(
    monkeypatch,
) -> None:
    def no_tokenizer(*args: Any, **kwargs: Any) -> int:
        raise AssertionError("a tokenizer was used for a short conversation")

    monkeypatch.setattr(tokens, "count_tokens", no_tokenizer)
    model = ScriptedModel(["final answer"], name="gpt-4o")
    agent = summarizing_agent(model)
    messages = [*chat(4), user("newest question")]

    result = await agent.aexecute(State(messages=messages))

    assert result.status == "completed", result.error
    assert len(model.requests) == 1


async def test_a_long_conversation_for_an_openai_model_is_counted_exactly() -> None:
    agent = summarizing_agent(
        ScriptedModel([], name="gpt-4o"), max_tokens_before_summary=1
    )
    middleware = agent.middleware[0].middleware
    assert isinstance(middleware, Summarization)
    messages = [*chat(3), calls("c1", path="x.md"), results("c1", content="é" * 40)]

    counted = await middleware.acount_tokens(messages)

    litellm = import_litellm()
    exact = litellm.token_counter(model="gpt-4o", messages=messages_to_openai(messages))
    assert counted == exact
    assert counted != approximate_tokens(messages)


# Token counting -----------------------------------------------------------------------
@pytest.fixture
def connections(monkeypatch) -> list[Any]:
    """Every connection or name lookup attempted while the test runs."""
    attempts: list[Any] = []
    connect = socket.socket.connect
    getaddrinfo = socket.getaddrinfo

    def recording_connect(self: socket.socket, address: Any) -> Any:
        attempts.append(address)
        return connect(self, address)

    def recording_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        attempts.append(host)
        return getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", recording_connect)
    monkeypatch.setattr(socket, "getaddrinfo", recording_getaddrinfo)
    return attempts


@pytest.mark.parametrize(
    "model_name", ["gpt-4o", "openai/gpt-4o-mini", "claude-sonnet-4-5-20250929"]
)
def test_openai_and_claude_models_are_counted_exactly_without_the_network(
    model_name: str, connections: list[Any]
) -> None:
    messages = [
        Message.system("You are terse."),
        user("What is in plan.md?"),
        calls("c1", name="read_file", path="plan.md"),
        results("c1", name="read_file", content="1. Write tests\n2. Ship"),
        said("It lists two steps."),
    ]

    counted = count_tokens(messages, model_name)

    litellm = import_litellm()
    bare = model_name.rsplit("/", 1)[-1]
    assert counted == litellm.token_counter(
        model=bare, messages=messages_to_openai(messages)
    )
    assert connections == []


def test_an_image_counts_as_a_flat_estimate_and_its_url_is_never_fetched(
    connections: list[Any],
) -> None:
    picture = Message.user(
        [ContentPart.text("look"), ContentPart.image_url("https://example.com/a.png")]
    )

    counted = count_tokens([picture], "gpt-4o")

    assert counted == count_tokens([user("look")], "gpt-4o") + tokens.MEDIA_PART_TOKENS
    assert connections == []


@pytest.mark.parametrize(
    ("model_name", "offline"),
    [
        ("gpt-4o", True),
        ("openai/gpt-4.1-mini", True),
        ("o3-mini", True),
        ("azure/gpt-4o", True),
        ("claude-3-5-haiku-latest", True),
        ("anthropic/claude-sonnet-4-5", True),
        ("openrouter/anthropic/claude-3.5-sonnet", True),
        ("openai/fake-model", False),
        ("ollama/llama3", False),
        ("together_ai/meta-llama/Llama-3-70b-chat-hf", False),
        ("sagents/demo", False),
        ("gemini/gemini-2.0-flash", False),
        ("", False),
        (None, False),
    ],
)
def test_only_openai_and_claude_names_have_an_offline_tokenizer(
    model_name: str | None, offline: bool
) -> None:
    assert has_offline_tokenizer(model_name) is offline


def test_other_models_are_approximated_at_four_characters_per_token() -> None:
    messages = [
        user("x" * 40),
        Message.assistant(
            tool_calls=[ToolCall(call_id="c", name="add", arguments={"a": 1})]
        ),
        results("c", name="add", content="y" * 8),
        Message.user([ContentPart.image("aGk=")]),
    ]

    # framing 4 per message; a call or result 10 more; an image a flat 1000.
    assert approximate_tokens(messages) == (4 + 10) + (4 + 10 + 1 + 2) + (
        4 + 10 + 2
    ) + (4 + 1000)
    assert count_tokens(messages, "ollama/llama3") == approximate_tokens(messages)
    assert count_tokens([], "gpt-4o") == 0


def test_non_ascii_text_is_counted_by_bytes_so_it_is_not_undercounted() -> None:
    assert tokens.approximate_text_tokens("我" * 30) == 30
    assert tokens.approximate_text_tokens("abcd" * 30) == 30


def test_openai_format_dicts_are_counted_like_messages() -> None:
    as_dicts = [{"role": "user", "content": "hello there"}]

    assert approximate_tokens(as_dicts) == approximate_tokens([user("hello there")])


def test_a_token_cache_counts_only_messages_it_has_not_seen() -> None:
    seen: list[Message] = []

    def per_message(message: Message) -> int:
        seen.append(message)
        return 5

    cache = TokenCache()
    first, second, third = user("a"), user("b"), user("c")

    assert cache.count([first, second], per_message) == 10
    assert cache.count([first, second, third], per_message) == 15
    assert seen == [first, second, third]
    assert cache.count([user("a")], per_message) == 5  # equal, not the same object
    assert len(seen) == 4
    assert cache.count([first], per_message, key="another method") == 5
    assert len(seen) == 5
    assert len(cache) == 1


def test_a_cached_exact_count_equals_an_uncached_one() -> None:
    messages = [*chat(3), user("é" * 50)]
    cache = TokenCache()

    first = count_tokens(messages, "gpt-4o", cache=cache)
    again = count_tokens([*messages, said("more")], "gpt-4o", cache=cache)

    assert first == count_tokens(messages, "gpt-4o")
    assert again == count_tokens([*messages, said("more")], "gpt-4o")
    assert again > first
