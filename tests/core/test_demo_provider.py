"""The offline demo model: its decisions, and litellm calling it as ``sagents/demo``."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sagents_django.core.providers.demo import (
    DEMO_MODEL,
    DEMO_PROVIDER,
    SUBAGENT_INSTRUCTIONS,
    DemoReply,
    plan_reply,
    register_demo_provider,
)

REQUEST = "Explain how bees make honey"
DEMO_TOOLS = ("write_todos", "write_file", "task")


def tool_schema(name: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool.",
            "parameters": {"type": "object", "properties": {}},
        },
    }


def tools_named(*names: str) -> list[dict[str, Any]]:
    return [tool_schema(name) for name in names]


def conversation(text: str = REQUEST) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are a helpful agent."},
        {"role": "user", "content": text},
    ]


def answered(
    messages: list[dict[str, Any]], reply: DemoReply, result: str = "ok"
) -> list[dict[str, Any]]:
    """The messages after the reply, with every tool call answered by ``result``."""
    assistant: dict[str, Any] = {"role": "assistant", "content": reply.text}
    assistant["tool_calls"] = [c.to_openai() for c in reply.tool_calls]
    results = [
        {"role": "tool", "tool_call_id": c.id, "content": result}
        for c in reply.tool_calls
    ]
    return [*messages, assistant, *results]


def walk(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], **results: str
) -> tuple[list[str], list[dict[str, Any]], DemoReply]:
    """Follow the demo until it stops calling tools; ``results`` overrides per tool."""
    names: list[str] = []
    for _ in range(10):
        reply = plan_reply(messages, tools)
        if not reply.tool_calls:
            return names, messages, reply
        name = reply.tool_calls[0].name
        names.append(name)
        messages = answered(messages, reply, results.get(name, "ok"))
    raise AssertionError(f"the demo never stopped calling tools: {names}")


@pytest.fixture(autouse=True)
def no_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAGENTS_DEMO_DELAY_MS", "0")


@pytest.fixture
def litellm() -> Any:
    register_demo_provider()
    import litellm

    return litellm


# --- plan_reply ------------------------------------------------------------------------


def test_importing_the_demo_module_does_not_import_litellm() -> None:
    code = (
        "import sys, sagents_django.core.providers.demo; "
        "assert 'litellm' not in sys.modules, 'litellm was imported'"
    )
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root, timeout=60)


def test_with_every_tool_offered_the_first_step_plans_three_todos() -> None:
    reply = plan_reply(conversation(), tools_named(*DEMO_TOOLS))

    assert [c.name for c in reply.tool_calls] == ["write_todos"]
    assert reply.tool_calls[0].id == "demo_call_1"
    assert reply.tool_calls[0].arguments == {
        "todos": [
            {"id": "1", "content": "Outline the answer", "status": "in_progress"},
            {"id": "2", "content": "Write it to a file", "status": "pending"},
            {"id": "3", "content": "Ask a sub-agent to review it", "status": "pending"},
        ]
    }
    assert reply.finish_reason == "tool_calls"


def test_the_second_step_writes_markdown_notes_that_echo_the_request() -> None:
    tools = tools_named(*DEMO_TOOLS)
    first = plan_reply(conversation(), tools)

    reply = plan_reply(answered(conversation(), first), tools)

    call = reply.tool_calls[0]
    assert (call.name, call.id) == ("write_file", "demo_call_2")
    assert call.arguments["file_path"] == "/notes/demo.md"
    assert call.arguments["content"].startswith("# Demo notes\n")
    assert REQUEST in call.arguments["content"]


def test_the_third_step_asks_a_general_purpose_sub_agent_for_a_review() -> None:
    names, messages, _ = walk(conversation(), tools_named(*DEMO_TOOLS))
    third = messages[6]["tool_calls"][0]

    assert names[2] == "task"
    assert json.loads(third["function"]["arguments"]) == {
        "instructions": SUBAGENT_INSTRUCTIONS,
        "subagent_type": "general-purpose",
    }


def test_the_walk_closes_the_todos_then_summarises_the_tool_results() -> None:
    names, messages, reply = walk(
        conversation(), tools_named(*DEMO_TOOLS), task="The notes are clear."
    )
    closing = json.loads(messages[-2]["tool_calls"][0]["function"]["arguments"])

    assert names == ["write_todos", "write_file", "task", "write_todos"]
    assert [t["status"] for t in closing["todos"]] == ["completed"] * 3
    assert reply.tool_calls == ()
    assert reply.finish_reason == "stop"
    assert "The notes are clear." in reply.text
    assert "/notes/demo.md" in reply.text


def test_a_rejected_file_write_is_acknowledged_and_its_todo_cancelled() -> None:
    _, messages, reply = walk(
        conversation(),
        tools_named(*DEMO_TOOLS),
        write_file="Tool call rejected by the user.",
    )
    closing = json.loads(messages[-2]["tool_calls"][0]["function"]["arguments"])

    assert [t["status"] for t in closing["todos"]] == [
        "completed",
        "cancelled",
        "completed",
    ]
    assert "not written" in reply.text
    assert "rejected by the user" in reply.text


def test_a_tool_that_is_not_offered_is_skipped() -> None:
    names, _, reply = walk(conversation(), tools_named("write_file", "task"))

    assert names == ["write_file", "task"]
    assert "offline demo model" in reply.text


def test_with_only_unrelated_tools_it_answers_in_text_at_once() -> None:
    reply = plan_reply(conversation(), tools_named("ls", "read_file"))

    assert reply.tool_calls == ()
    assert REQUEST in reply.text


def test_a_new_user_message_starts_a_new_walk_with_fresh_call_ids() -> None:
    tools = tools_named(*DEMO_TOOLS)
    _, messages, reply = walk(conversation(), tools)
    messages = [
        *messages,
        {"role": "assistant", "content": reply.text},
        {"role": "user", "content": "Again please"},
    ]

    again = plan_reply(messages, tools)

    assert again.tool_calls[0].name == "write_todos"
    assert again.tool_calls[0].id == "demo_call_5"


def test_the_same_messages_always_get_the_same_reply() -> None:
    tools = tools_named(*DEMO_TOOLS)

    assert plan_reply(conversation(), tools) == plan_reply(conversation(), tools)


def test_without_tools_it_echoes_the_user_and_explains_how_to_configure_a_model() -> (
    None
):
    reply = plan_reply(conversation("What is the capital of France?"))

    assert reply.tool_calls == ()
    assert "What is the capital of France?" in reply.text
    assert "offline demo model" in reply.text
    assert 'SAGENTS["MODEL"] in your settings' in reply.text


def test_asked_for_a_title_it_answers_with_six_words_of_the_first_message() -> None:
    messages = [
        {"role": "system", "content": "Summarize the request as a short title."},
        {
            "role": "user",
            "content": "<user_request>please help me plan a trip to Lisbon in May"
            "</user_request>",
        },
    ]

    reply = plan_reply(messages)

    assert reply.text == "Please help me plan a trip"


def test_acting_as_the_sub_agent_it_answers_one_sentence_despite_tools() -> None:
    messages = [
        {"role": "system", "content": "You are a general-purpose sub-agent."},
        {"role": "user", "content": SUBAGENT_INSTRUCTIONS},
    ]

    reply = plan_reply(messages, tools_named(*DEMO_TOOLS))

    assert reply.tool_calls == ()
    assert reply.text.count(".") == 1
    assert reply.text.endswith(".")


def test_every_text_reply_says_it_is_the_offline_demo_model() -> None:
    _, messages, final = walk(conversation(), tools_named(*DEMO_TOOLS))
    step_texts = [m["content"] for m in messages if m["role"] == "assistant"]
    other = [
        plan_reply(conversation()).text,
        plan_reply([{"role": "user", "content": SUBAGENT_INSTRUCTIONS}]).text,
    ]

    for text in [*step_texts, final.text, *other]:
        assert "offline demo model" in text


def test_content_given_as_a_list_of_parts_is_read() -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": "Hello parts"}]}]

    assert "Hello parts" in plan_reply(messages).text


# --- through litellm -------------------------------------------------------------------


def assemble(chunks: list[Any]) -> tuple[str, list[dict[str, Any]], Any, str | None]:
    """Text, tool calls, usage and finish reason, put together from stream chunks."""
    text, calls, usage, finish = "", {}, None, None
    for chunk in chunks:
        usage = getattr(chunk, "usage", None) or usage
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        finish = choice.finish_reason or finish
        text += choice.delta.content or ""
        for delta in choice.delta.tool_calls or ():
            call = calls.setdefault(delta.index, {"id": None, "name": "", "args": ""})
            call["id"] = call["id"] or delta.id
            call["name"] += delta.function.name or ""
            call["args"] += delta.function.arguments or ""
    return text, [calls[i] for i in sorted(calls)], usage, finish


async def stream(litellm: Any, messages: list[dict[str, Any]], tools: Any) -> Any:
    response = await litellm.acompletion(
        model=DEMO_MODEL,
        messages=messages,
        tools=tools,
        stream=True,
        stream_options={"include_usage": True},
    )
    return [chunk async for chunk in response]


async def test_acompletion_streams_words_then_a_tool_call_with_json_arguments(
    litellm: Any,
) -> None:
    chunks = await stream(litellm, conversation(), tools_named(*DEMO_TOOLS))
    text, calls, usage, finish = assemble(chunks)
    expected = plan_reply(conversation(), tools_named(*DEMO_TOOLS))

    assert len(chunks) > 10
    assert text == expected.text
    assert [(c["id"], c["name"]) for c in calls] == [("demo_call_1", "write_todos")]
    assert json.loads(calls[0]["args"]) == expected.tool_calls[0].arguments
    assert finish == "tool_calls"
    assert usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_sync_streaming_yields_the_same_reply_as_plan_reply(litellm: Any) -> None:
    chunks = list(
        litellm.completion(model=DEMO_MODEL, messages=conversation(), stream=True)
    )
    text, calls, _, finish = assemble(chunks)

    assert text == plan_reply(conversation()).text
    assert calls == []
    assert finish == "stop"


def test_completion_without_streaming_returns_text_tool_calls_and_usage(
    litellm: Any,
) -> None:
    tools = tools_named(*DEMO_TOOLS)

    response = litellm.completion(
        model=DEMO_MODEL, messages=conversation(), tools=tools
    )

    message = response.choices[0].message
    assert message.content == plan_reply(conversation(), tools).text
    assert message.tool_calls[0].function.name == "write_todos"
    assert json.loads(message.tool_calls[0].function.arguments)["todos"]
    assert response.choices[0].finish_reason == "tool_calls"
    assert response.usage.total_tokens > 0
    assert litellm.completion_cost(response) == 0


async def test_acompletion_without_streaming_answers_in_text(litellm: Any) -> None:
    response = await litellm.acompletion(model=DEMO_MODEL, messages=conversation())

    assert response.choices[0].message.content == plan_reply(conversation()).text


async def test_a_full_walk_through_litellm_runs_the_sub_agent_on_the_demo_too(
    litellm: Any,
) -> None:
    tools = tools_named(*DEMO_TOOLS)
    messages = conversation()
    names: list[str] = []
    for _ in range(6):
        text, calls, _, _ = assemble(await stream(litellm, messages, tools))
        if not calls:
            break
        call = calls[0]
        names.append(call["name"])
        arguments = json.loads(call["args"])
        result = "ok"
        if call["name"] == "task":
            sub_messages = [{"role": "user", "content": arguments["instructions"]}]
            result, _, _, _ = assemble(await stream(litellm, sub_messages, tools))
        messages += [
            {
                "role": "assistant",
                "content": text,
                "tool_calls": [
                    {
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["name"], "arguments": call["args"]},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call["id"], "content": result},
        ]

    assert names == ["write_todos", "write_file", "task", "write_todos"]
    assert "Acting as a sub-agent" in text
    assert "offline demo model" in text


async def test_the_pause_between_chunks_comes_from_the_environment(
    litellm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAGENTS_DEMO_DELAY_MS", "4")
    started = time.perf_counter()

    chunks = await stream(litellm, conversation(), None)

    assert time.perf_counter() - started >= 0.004 * (len(chunks) - 3)


def test_registering_many_times_from_threads_adds_the_provider_once(
    litellm: Any,
) -> None:
    threads = [threading.Thread(target=register_demo_provider) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    entries = [
        item
        for item in litellm.custom_provider_map
        if item["provider"] == DEMO_PROVIDER
    ]
    assert len(entries) == 1
    assert DEMO_PROVIDER in litellm.provider_list


def test_warming_imports_litellm_once_on_a_thread_of_its_own() -> None:
    """What the chat page and a starting worker call: the import (seconds) runs
    beside them, once per process, and leaves litellm ready with the demo model."""
    import subprocess
    import sys

    code = """
import sys
from sagents_django.core import transports
assert "litellm" not in sys.modules  # importing the transports imports nothing
transports.warm_litellm()
first = transports._warming
transports.warm_litellm()
first.join(300)
print(transports._warming is first, "litellm" in sys.modules, transports._demo_registered)
transports.warm_litellm()
print(transports._warming.is_alive())
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True", "False"]
