"""PatchToolCalls: dangling tool calls get synthetic results before the model is called."""

from __future__ import annotations

from sagents_django.core import Agent, Message, State, ToolCall, ToolResult
from sagents_django.core.events import event_handlers
from sagents_django.core.middleware.patch_tool_calls import (
    PatchToolCalls,
    patch_dangling_tool_calls,
)
from sagents_django.core.testing import ScriptedModel


def call(call_id: str, name: str = "search") -> ToolCall:
    return ToolCall(call_id=call_id, name=name, arguments={"q": "test"})


def result(call_id: str, name: str = "search", content: str = "found") -> ToolResult:
    return ToolResult(tool_call_id=call_id, name=name, content=content)


def cancelled(call_id: str, name: str = "search") -> str:
    return (
        f"Tool call {name} with id {call_id} was cancelled - another message came in "
        "before it could be completed."
    )


def test_a_dangling_call_gets_a_cancelled_result_right_after_its_message() -> None:
    messages = [
        Message.system("You are helpful"),
        Message.assistant(tool_calls=[call("123")]),
        Message.user("Never mind"),
    ]

    patched = patch_dangling_tool_calls(messages)

    assert [m.role for m in patched] == ["system", "assistant", "tool", "user"]
    assert patched[2].tool_results == [
        ToolResult(
            tool_call_id="123",
            name="search",
            content=(
                "Tool call search with id 123 was cancelled - another message came "
                "in before it could be completed."
            ),
        )
    ]
    assert patched[1] is messages[1] and patched[3] is messages[2]
    assert len(messages) == 3  # the input list is not changed


def test_a_history_without_dangling_calls_is_returned_as_the_same_list() -> None:
    messages = [
        Message.user("Find it"),
        Message.assistant(tool_calls=[call("1")]),
        Message.tool([result("1")]),
        Message.assistant("Here it is"),
    ]

    assert patch_dangling_tool_calls(messages) is messages
    assert patch_dangling_tool_calls([]) == []


def test_patching_is_idempotent() -> None:
    messages = [
        Message.user("Go"),
        Message.assistant(tool_calls=[call("1"), call("2", "fetch")]),
        Message.user("Stop"),
    ]

    once = patch_dangling_tool_calls(messages)

    assert patch_dangling_tool_calls(once) is once


def test_missing_results_join_the_tool_message_that_follows_in_call_order() -> None:
    messages = [
        Message.user("Go"),
        Message.assistant(tool_calls=[call("1"), call("2", "fetch"), call("3")]),
        Message.tool([result("3")]),
        Message.user("Stop"),
    ]

    patched = patch_dangling_tool_calls(messages)

    assert [m.role for m in patched] == ["user", "assistant", "tool", "user"]
    results = patched[2].tool_results
    assert [r.tool_call_id for r in results] == ["1", "2", "3"]
    assert results[0].content == cancelled("1")
    assert results[1].content == cancelled("2", "fetch")
    assert results[2] is messages[2].tool_results[0]


def test_only_the_calls_without_a_later_result_are_patched() -> None:
    messages = [
        Message.user("One"),
        Message.assistant(tool_calls=[call("a")]),
        Message.user("Two"),
        Message.assistant(tool_calls=[call("b")]),
        Message.tool([result("b")]),
        Message.assistant("Done"),
    ]

    patched = patch_dangling_tool_calls(messages)

    assert [m.role for m in patched] == [
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert [r.tool_call_id for r in patched[2].tool_results] == ["a"]
    assert patched[5] is messages[4]


def test_a_result_before_the_call_does_not_count() -> None:
    messages = [
        Message.tool([result("x")]),
        Message.assistant(tool_calls=[call("x")]),
        Message.user("Next"),
    ]

    patched = patch_dangling_tool_calls(messages)

    assert patched[2].tool_results[0].content == cancelled("x")


def test_the_pending_calls_of_a_final_assistant_message_are_left_alone() -> None:
    messages = [Message.user("Go"), Message.assistant(tool_calls=[call("1")])]

    assert patch_dangling_tool_calls(messages) is messages
    patched = patch_dangling_tool_calls(messages, include_last=True)
    assert patched[-1].tool_results[0].content == cancelled("1")


def test_calls_of_a_truncated_response_are_reported_as_cut_off_errors() -> None:
    messages = [
        Message.user("Write a lot"),
        Message.assistant(tool_calls=[call("1", "write_file")], status="length"),
        Message.user("Well?"),
    ]

    patched = patch_dangling_tool_calls(messages)

    [synthetic] = patched[2].tool_results
    assert synthetic.is_error
    assert synthetic.content.startswith(
        "Tool call write_file with id 1 was not executed - your response hit the "
        "output token limit"
    )


async def test_the_model_receives_a_patched_history_and_the_state_keeps_it() -> None:
    model = ScriptedModel(["All right."])
    agent = Agent(
        model=model, middleware=[PatchToolCalls], replace_default_middleware=True
    )
    state = State(
        messages=[
            Message.user("Search for cats"),
            Message.assistant(tool_calls=[call("c1")]),
            Message.user("Never mind, dogs"),
        ]
    )

    result = await agent.aexecute(state)

    assert result.status == "completed", result.error
    sent = model.requests[0].messages
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
    assert sent[2] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": cancelled("c1"),
    }
    roles = [m.role for m in result.state.messages]
    assert roles == ["user", "assistant", "tool", "user", "assistant"]
    assert len(state.messages) == 3  # the caller's state is untouched


def test_before_model_returns_the_same_state_when_nothing_dangles() -> None:
    state = State(messages=[Message.user("Hi")])

    assert PatchToolCalls().before_model(state) is state


def test_patching_is_announced_as_a_debug_event() -> None:
    seen: list[tuple[str, dict]] = []
    state = State(
        messages=[
            Message.assistant(tool_calls=[call("1"), call("2")]),
            Message.user("Stop"),
        ]
    )

    with event_handlers(lambda name, data: seen.append((name, data))):
        PatchToolCalls().before_model(state)

    assert seen == [
        (
            "debug",
            {
                "event": "middleware_action",
                "data": {
                    "middleware": "PatchToolCalls",
                    "action": "dangling_tool_calls_patched",
                    "detail": "2 cancelled tool call(s)",
                },
            },
        )
    ]
