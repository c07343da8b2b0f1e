"""DisplayHelpers: what of a message a person sees, as the reference's examples show."""

from __future__ import annotations

import json

from sagents_django.core.display import extract_display_items
from sagents_django.core.messages import ContentPart, Message, ToolCall, ToolResult


def test_assistant_text_and_two_tool_calls_give_three_items_in_order() -> None:
    message = Message.assistant(
        [ContentPart.text("Let me search...")],
        tool_calls=[
            ToolCall(call_id="1", name="search", arguments={"q": "elixir"}),
            ToolCall(call_id="2", name="weather", arguments={"city": "NYC"}),
        ],
    )

    assert extract_display_items(message) == [
        {
            "type": "text",
            "message_type": "assistant",
            "content": {"text": "Let me search..."},
        },
        {
            "type": "tool_call",
            "message_type": "assistant",
            "content": {"call_id": "1", "name": "search", "arguments": {"q": "elixir"}},
        },
        {
            "type": "tool_call",
            "message_type": "assistant",
            "content": {
                "call_id": "2",
                "name": "weather",
                "arguments": {"city": "NYC"},
            },
        },
    ]


def test_a_tool_message_with_two_results_gives_two_tool_result_items() -> None:
    message = Message.tool(
        [
            ToolResult(
                tool_call_id="1", name="search", content="Found...", is_error=False
            ),
            ToolResult(
                tool_call_id="2", name="weather", content="Sunny", is_error=False
            ),
        ]
    )

    assert extract_display_items(message) == [
        {
            "type": "tool_result",
            "message_type": "tool",
            "content": {
                "tool_call_id": "1",
                "name": "search",
                "content": "Found...",
                "is_error": False,
            },
        },
        {
            "type": "tool_result",
            "message_type": "tool",
            "content": {
                "tool_call_id": "2",
                "name": "weather",
                "content": "Sunny",
                "is_error": False,
            },
        },
    ]


def test_an_error_result_is_marked_and_part_content_shows_its_text() -> None:
    message = Message.tool(
        [
            ToolResult(
                tool_call_id="9",
                name="read",
                content=[
                    ContentPart.text("No such "),
                    ContentPart.image("QUJD"),
                    ContentPart.text("file"),
                ],
                is_error=True,
            )
        ]
    )

    (item,) = extract_display_items(message)

    assert item["content"] == {
        "tool_call_id": "9",
        "name": "read",
        "content": "No such file",
        "is_error": True,
    }


def test_thinking_comes_out_as_a_thinking_item_before_the_text() -> None:
    message = Message.assistant(
        [ContentPart.thinking("Considering"), ContentPart.text("Answer")]
    )

    assert extract_display_items(message) == [
        {
            "type": "thinking",
            "message_type": "assistant",
            "content": {"text": "Considering"},
        },
        {"type": "text", "message_type": "assistant", "content": {"text": "Answer"}},
    ]


def test_user_text_is_one_text_item_of_message_type_user() -> None:
    assert extract_display_items(Message.user("Hello")) == [
        {"type": "text", "message_type": "user", "content": {"text": "Hello"}}
    ]


def test_system_text_is_a_text_item_of_message_type_system() -> None:
    (item,) = extract_display_items(Message.system("Be brief."))

    assert item["message_type"] == "system"


def test_empty_text_and_thinking_and_images_are_skipped() -> None:
    message = Message.assistant(
        [
            ContentPart.text(""),
            ContentPart.thinking(""),
            ContentPart.image("QUJD"),
            ContentPart.text("kept"),
        ]
    )

    assert extract_display_items(message) == [
        {"type": "text", "message_type": "assistant", "content": {"text": "kept"}}
    ]


def test_a_message_with_nothing_to_show_gives_no_items() -> None:
    assert extract_display_items(Message.assistant("")) == []


def test_the_order_of_parts_is_preserved_and_items_are_json_ready() -> None:
    message = Message.assistant(
        [
            ContentPart.text("one"),
            ContentPart.thinking("two"),
            ContentPart.text("three"),
        ],
        tool_calls=[ToolCall(call_id="c", name="n", arguments={"nested": {"ü": [1]}})],
    )

    items = extract_display_items(message)

    assert [i.get("content", {}).get("text") or i["type"] for i in items] == [
        "one",
        "two",
        "three",
        "tool_call",
    ]
    assert json.loads(json.dumps(items)) == items


def test_sequence_numbers_are_the_item_positions() -> None:
    message = Message.assistant("a", tool_calls=[ToolCall(call_id="1", name="x")])

    rows = [
        {**item, "sequence": n} for n, item in enumerate(extract_display_items(message))
    ]

    assert [(r["sequence"], r["type"]) for r in rows] == [(0, "text"), (1, "tool_call")]
