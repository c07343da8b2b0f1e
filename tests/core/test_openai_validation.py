"""validate_openai_messages, and the OpenAI form of replies that did not finish."""

from __future__ import annotations

from typing import Any

import pytest

from sagents_django.core import ContentPart, Message, State, ToolCall, ToolResult
from sagents_django.core.openai_format import (
    INTERRUPTED_NOTES,
    messages_from_openai,
    messages_to_openai,
)
from sagents_django.core.testing import validate_openai_messages


def call(call_id: str = "c1", name: str = "add", arguments: Any = "{}") -> dict:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def asking(*calls: dict) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


def answer(call_id: str = "c1") -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": "3"}


USER = {"role": "user", "content": "Add 1 and 2"}


def test_a_well_formed_conversation_with_parallel_calls_passes() -> None:
    validate_openai_messages(
        [
            {"role": "system", "content": "Be brief."},
            USER,
            asking(call("a"), call("b")),
            answer("b"),
            answer("a"),
            {"role": "assistant", "content": "3 and 3", "reasoning_content": "sum"},
            {"role": "user", "content": [{"type": "text", "text": "thanks"}]},
        ]
    )


def test_a_state_and_message_objects_are_checked_as_the_agent_sends_them() -> None:
    calls = [ToolCall(call_id="c1", name="add", arguments={"a": 1})]
    messages = [
        Message.user("Add"),
        Message.assistant(tool_calls=calls),
        Message.tool([ToolResult(tool_call_id="c1", name="add", content="1")]),
    ]
    validate_openai_messages(messages)
    validate_openai_messages(State(messages=messages))
    with pytest.raises(ValueError, match="'c1' has no tool message"):
        validate_openai_messages(State(messages=messages[:2]))


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([], "no messages"),
        ([USER, {"role": "assistant", "content": None}], "null content and no tool"),
        ([USER, asking(call())], "'c1' has no tool message right after it"),
        ([USER, asking(call()), USER, answer()], "'c1' has no tool message"),
        ([USER, answer()], "answers 'c1', which is not a call"),
        ([USER, asking(call()), answer(), answer()], "answers 'c1', which is not"),
        ([USER, asking(call("a")), answer("b")], "answers 'b'"),
        ([{"role": "robot", "content": "hi"}], "unknown role 'robot'"),
        ([{"role": "user", "content": "hi", "extra": 1}], "unknown keys ['extra']"),
        ([{"role": "user"}], "no content key"),
        ([{"role": "user", "content": None}], "null content"),
        ([{"role": "user", "content": []}], "non-empty list"),
        ([{"role": "user", "content": [{"type": "audio"}]}], "bad type 'audio'"),
        ([{"role": "user", "content": [{"type": "text"}]}], "no text string"),
        ([{"role": "user", "content": [{"type": "image_url"}]}], "no image url"),
        ([{"role": "system", "content": [{"type": "image_url"}]}], "bad type"),
        ([{"role": "user", "content": "hi", "name": "a b"}], "bad name 'a b'"),
        ([USER, {"role": "assistant", "content": "x", "tool_calls": []}], "non-empty"),
        ([USER, asking({"type": "function"})], "has no id"),
        ([USER, asking(call(name="bad name!"))], "bad function name"),
        ([USER, asking(call(arguments={"a": 1})), answer()], "JSON string"),
        (
            [USER, asking({**call(), "type": "code"}), answer()],
            "type 'code', not 'function'",
        ),
        (
            [USER, asking(call()), answer(), asking(call()), answer()],
            "reuses the id 'c1'",
        ),
        ([USER, "hello"], "not an object"),
    ],
)
def test_each_way_of_breaking_the_format_is_named(messages, problem) -> None:
    with pytest.raises(ValueError, match="Not a valid OpenAI conversation") as caught:
        validate_openai_messages(messages)

    assert problem in str(caught.value)


def test_every_problem_is_listed_not_only_the_first() -> None:
    with pytest.raises(ValueError) as caught:
        validate_openai_messages(
            [{"role": "robot"}, USER, {"role": "assistant", "content": None}]
        )

    assert str(caught.value).count("\n- ") == 2


# Replies that did not finish ---------------------------------------------------------
@pytest.mark.parametrize("status", ["cancelled", "stream_error"])
def test_a_cut_off_reply_is_sent_with_a_note_and_read_back_without_it(status) -> None:
    message = Message.assistant("The answer is", status=status)

    (sent,) = message.to_openai()

    assert sent == {
        "role": "assistant",
        "content": f"The answer is\n\n{INTERRUPTED_NOTES[status]}",
    }
    assert messages_from_openai([sent]) == [message]


def test_a_cut_off_reply_without_text_is_sent_as_its_note_alone() -> None:
    # Such a message is no longer kept by the loop, but states saved before may have
    # one: it must not be sent as null content (which OpenAI refuses with a 400).
    conversation = [Message.user("Hi"), Message.assistant("", status="cancelled")]

    sent = messages_to_openai(conversation)

    assert sent[1] == {"role": "assistant", "content": INTERRUPTED_NOTES["cancelled"]}
    validate_openai_messages(sent)


def test_an_empty_finished_reply_is_sent_as_empty_text_not_null() -> None:
    thinking_only = Message.assistant([ContentPart.thinking("Hmm")])

    (sent,) = thinking_only.to_openai()

    assert sent == {"role": "assistant", "content": "", "reasoning_content": "Hmm"}
    validate_openai_messages([{"role": "user", "content": "?"}, sent])
    assert messages_from_openai([sent]) == [thinking_only]


def test_a_finished_reply_ending_like_a_note_keeps_its_text() -> None:
    text = "Quoting: " + INTERRUPTED_NOTES["cancelled"]  # no blank line before it

    (read,) = messages_from_openai([{"role": "assistant", "content": text}])

    assert (read.text, read.status) == (text, "complete")
