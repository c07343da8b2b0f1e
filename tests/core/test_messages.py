"""Messages: constructors, the OpenAI edge and the stored-JSON edge."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sagents_django.core.messages import (
    ContentPart,
    Message,
    TokenUsage,
    ToolCall,
    ToolResult,
)
from sagents_django.core.openai_format import (
    messages_from_openai,
    messages_to_openai,
    parse_tool_arguments,
)

# Strategies -----------------------------------------------------------------------

# Every code point but surrogates (which cannot be encoded), so NUL, emoji and RTL text
# all occur; a few samples are forced in so they are always tried.
any_text = st.one_of(
    st.text(st.characters(exclude_categories=("Cs",)), max_size=20),
    st.sampled_from(
        ["\x00", "héllo 👋🏽", "مرحبا بالعالم", "שלום", "a\x00b", "\u202eevil"]
    ),
)
nonempty_text = any_text.filter(bool)
ids = st.text("abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=12)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    any_text,
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(any_text, children, max_size=4),
    ),
    max_leaves=12,
)
json_objects = st.dictionaries(any_text, json_values, max_size=4)
media_types = st.sampled_from(["image/png", "image/jpeg", "image/webp", "image/gif"])
base64_data = st.text(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=", max_size=24
)
details = st.sampled_from([None, "low", "high", "auto"])
urls = st.builds(lambda path: f"https://example.com/{path}.png", ids)


@st.composite
def image_parts(draw: st.DrawFn) -> ContentPart:
    if draw(st.booleans()):
        return ContentPart.image(
            draw(base64_data), media=draw(media_types), detail=draw(details)
        )
    return ContentPart.image_url(draw(urls), detail=draw(details))


file_parts = st.builds(
    lambda data, media, filename: ContentPart.file(
        data, media=media, filename=filename
    ),
    base64_data,
    st.sampled_from(["application/pdf", "text/plain"]),
    st.one_of(st.none(), st.builds(lambda n: f"{n}.pdf", ids)),
)
text_parts = st.builds(ContentPart.text, nonempty_text)
thinking_parts = st.builds(
    lambda text, sig: ContentPart.thinking(text, signature=sig),
    any_text,
    st.one_of(st.none(), ids),
)
any_parts = st.one_of(text_parts, thinking_parts, image_parts(), file_parts)


@st.composite
def user_content(draw: st.DrawFn) -> list[ContentPart]:
    """Content that has an OpenAI form: text and images, never empty."""
    return draw(st.lists(st.one_of(text_parts, image_parts()), min_size=1, max_size=4))


tool_calls = st.builds(
    lambda call_id, name, arguments: ToolCall(
        call_id=call_id, name=name, arguments=arguments
    ),
    ids,
    ids,
    json_objects,
)


@st.composite
def assistant_messages(draw: st.DrawFn, call_ids: st.SearchStrategy[str]) -> Message:
    """Thinking first, then at most one text part, then tool calls (the OpenAI shape)."""
    thinking = draw(
        st.lists(st.tuples(nonempty_text, st.one_of(st.none(), ids)), max_size=2)
    )
    if len(thinking) == 2 and not (thinking[0][1] or thinking[1][1]):
        # Unsigned thinking has one OpenAI field (reasoning_content): at most one part.
        thinking = thinking[:1]
    parts = [ContentPart.thinking(text, signature=sig) for text, sig in thinking]
    if draw(st.booleans()):
        parts.append(ContentPart.text(draw(nonempty_text)))
    calls = [
        ToolCall(call_id=draw(call_ids), name=draw(ids), arguments=draw(json_objects))
        for _ in range(draw(st.integers(0, 3)))
    ]
    return Message(role="assistant", content=parts, tool_calls=calls)


@st.composite
def tool_result_content(draw: st.DrawFn) -> str | list[ContentPart]:
    if draw(st.booleans()):
        return draw(any_text)
    # A list of exactly one text part is sent as a plain string; use two or more parts.
    return draw(st.lists(st.one_of(text_parts, image_parts()), min_size=2, max_size=3))


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    counter = iter(range(10_000))
    call_ids = st.builds(lambda: f"call_{next(counter)}")
    messages: list[Message] = []
    if draw(st.booleans()):
        messages.append(Message(role="system", content=draw(user_content())))
    for _ in range(draw(st.integers(0, 4))):
        messages.append(
            Message(
                role="user",
                content=draw(user_content()),
                name=draw(st.one_of(st.none(), ids)),
            )
        )
        assistant = draw(assistant_messages(call_ids))
        messages.append(assistant)
        if assistant.tool_calls:
            messages.append(
                Message.tool(
                    [
                        ToolResult(
                            tool_call_id=call.call_id,
                            name=call.name,
                            content=draw(tool_result_content()),
                        )
                        for call in assistant.tool_calls
                    ]
                )
            )
    return messages


@st.composite
def tool_results(draw: st.DrawFn) -> ToolResult:
    content = draw(st.one_of(any_text, st.lists(any_parts, max_size=3)))
    return ToolResult(
        tool_call_id=draw(ids),
        name=draw(any_text),
        content=content,
        display_text=draw(st.one_of(st.none(), any_text)),
        is_error=draw(st.booleans()),
        is_interrupt=draw(st.booleans()),
        interrupt_data=draw(st.one_of(st.none(), json_objects)),
    )


@st.composite
def any_messages(draw: st.DrawFn) -> Message:
    calls = draw(
        st.lists(
            st.builds(
                lambda call_id, name, arguments, raw: ToolCall(
                    call_id=call_id, name=name, arguments=arguments, raw_arguments=raw
                ),
                ids,
                any_text,
                json_objects,
                st.one_of(st.none(), any_text),
            ),
            max_size=3,
        )
    )
    return Message(
        role=draw(st.sampled_from(["system", "user", "assistant", "tool"])),
        content=draw(st.lists(any_parts, max_size=4)),
        tool_calls=calls,
        tool_results=draw(st.lists(tool_results(), max_size=3)),
        status=draw(
            st.sampled_from(
                ["complete", "length", "cancelled", "content_filtered", "stream_error"]
            )
        ),
        name=draw(st.one_of(st.none(), any_text)),
        metadata=draw(json_objects),
    )


# Constructors and reading ---------------------------------------------------------


def test_a_string_given_to_a_constructor_becomes_one_text_part() -> None:
    message = Message.user("Hello")

    assert message.role == "user"
    assert message.content == [ContentPart(type="text", content="Hello")]


def test_an_empty_string_gives_a_message_without_parts() -> None:
    assert Message.assistant("").content == []
    assert Message(role="user", content="").content == []  # type: ignore[arg-type]


def test_a_list_of_parts_is_kept_as_given() -> None:
    parts = [ContentPart.text("a"), ContentPart.image("QUJD", media="image/jpeg")]

    assert Message.user(parts).content == parts


def test_the_system_constructor_sets_the_role_and_text() -> None:
    message = Message.system("Be brief.")

    assert (message.role, message.text) == ("system", "Be brief.")


def test_the_user_constructor_keeps_a_name() -> None:
    assert Message.user("hi", name="ada").name == "ada"


def test_the_assistant_constructor_takes_tool_calls_and_a_status() -> None:
    call = ToolCall(call_id="1", name="search", arguments={"q": "x"})
    message = Message.assistant("Looking", tool_calls=[call], status="length")

    assert message.tool_calls == [call]
    assert message.status == "length"
    assert message.stop_reason == "length"


def test_the_tool_constructor_copies_the_results_list() -> None:
    results = [ToolResult(tool_call_id="1", name="search", content="found")]
    message = Message.tool(results)
    results.append(ToolResult(tool_call_id="2", name="other"))

    assert message.role == "tool"
    assert len(message.tool_results) == 1


def test_text_joins_the_text_parts_and_skips_thinking_and_images() -> None:
    message = Message.assistant(
        [
            ContentPart.thinking("hmm"),
            ContentPart.text("Hello, "),
            ContentPart.image("QUJD"),
            ContentPart.text("world"),
            ContentPart.thinking(" more"),
        ]
    )

    assert message.text == "Hello, world"
    assert message.thinking == "hmm more"


def test_a_tool_results_text_is_its_string_or_its_text_parts() -> None:
    as_string = ToolResult(tool_call_id="1", name="t", content="plain")
    as_parts = ToolResult(
        tool_call_id="1",
        name="t",
        content=[
            ContentPart.text("a"),
            ContentPart.image("QUJD"),
            ContentPart.text("b"),
        ],
    )

    assert as_string.text == "plain"
    assert as_parts.text == "ab"


def test_part_constructors_fill_their_options() -> None:
    assert ContentPart.thinking("t", signature="sig").options == {"signature": "sig"}
    assert ContentPart.thinking("t").options == {}
    assert ContentPart.image("QUJD", media="image/jpeg", detail="low").options == {
        "media": "image/jpeg",
        "detail": "low",
    }
    assert ContentPart.image_url("https://x/y.png").options == {"url": True}
    assert ContentPart.file(
        "QUJD", media="application/pdf", filename="a.pdf"
    ).options == {
        "media": "application/pdf",
        "filename": "a.pdf",
    }


# To OpenAI -----------------------------------------------------------------------


def test_a_system_message_with_one_text_part_becomes_a_plain_string() -> None:
    assert Message.system("Be brief.").to_openai() == [
        {"role": "system", "content": "Be brief."}
    ]


def test_a_user_message_keeps_its_name() -> None:
    assert Message.user("hi", name="ada").to_openai() == [
        {"role": "user", "content": "hi", "name": "ada"}
    ]


def test_a_message_without_content_sends_an_empty_string() -> None:
    assert Message(role="user").to_openai() == [{"role": "user", "content": ""}]


def test_an_image_with_data_becomes_a_data_url() -> None:
    message = Message.user(
        [
            ContentPart.text("What is this?"),
            ContentPart.image("QUJD", media="image/jpeg", detail="high"),
        ]
    )

    assert message.to_openai() == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {
                    "type": "image_url",
                    "image_url": {
                        "url": "data:image/jpeg;base64,QUJD",
                        "detail": "high",
                    },
                },
            ],
        }
    ]


def test_an_image_given_by_url_is_sent_as_that_url() -> None:
    message = Message.user([ContentPart.image_url("https://example.com/cat.png")])

    assert message.to_openai()[0]["content"] == [
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    ]


def test_a_file_becomes_a_file_part_with_a_data_url_and_its_filename() -> None:
    message = Message.user(
        [ContentPart.file("JVBER", media="application/pdf", filename="a.pdf")]
    )

    assert message.to_openai()[0]["content"] == [
        {
            "type": "file",
            "file": {
                "file_data": "data:application/pdf;base64,JVBER",
                "filename": "a.pdf",
            },
        }
    ]


def test_an_assistant_message_sends_text_and_tool_calls_with_json_arguments() -> None:
    message = Message.assistant(
        "Searching",
        tool_calls=[ToolCall(call_id="c1", name="search", arguments={"q": "café ☕"})],
    )

    assert message.to_openai() == [
        {
            "role": "assistant",
            "content": "Searching",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"q": "café ☕"}'},
                }
            ],
        }
    ]


def test_an_assistant_message_without_text_sends_null_content() -> None:
    message = Message.assistant(tool_calls=[ToolCall(call_id="c1", name="noop")])

    (out,) = message.to_openai()
    assert out["content"] is None
    assert out["tool_calls"][0]["function"]["arguments"] == "{}"


def test_unsigned_thinking_becomes_reasoning_content_only() -> None:
    message = Message.assistant(
        [ContentPart.thinking("Let me think."), ContentPart.text("42")]
    )

    assert message.to_openai() == [
        {"role": "assistant", "content": "42", "reasoning_content": "Let me think."}
    ]


def test_signed_thinking_also_becomes_thinking_blocks_with_the_signature() -> None:
    message = Message.assistant(
        [ContentPart.thinking("Step one.", signature="sig-1"), ContentPart.text("Done")]
    )

    (out,) = message.to_openai()
    assert out["reasoning_content"] == "Step one."
    assert out["thinking_blocks"] == [
        {"type": "thinking", "thinking": "Step one.", "signature": "sig-1"}
    ]
    assert out["content"] == "Done"


def test_a_tool_message_splits_into_one_openai_message_per_result() -> None:
    message = Message.tool(
        [
            ToolResult(tool_call_id="c1", name="search", content="found"),
            ToolResult(
                tool_call_id="c2",
                name="look",
                content=[ContentPart.text("see"), ContentPart.image("QUJD")],
            ),
        ]
    )

    assert message.to_openai() == [
        {"role": "tool", "tool_call_id": "c1", "content": "found"},
        {
            "role": "tool",
            "tool_call_id": "c2",
            "content": [
                {"type": "text", "text": "see"},
                {
                    "type": "image_url",
                    "image_url": {"url": "data:image/png;base64,QUJD"},
                },
            ],
        },
    ]


def test_messages_to_openai_flattens_the_conversation_in_order() -> None:
    conversation = [
        Message.user("hi"),
        Message.assistant(
            tool_calls=[
                ToolCall(call_id="a", name="x"),
                ToolCall(call_id="b", name="y"),
            ]
        ),
        Message.tool(
            [
                ToolResult(tool_call_id="a", name="x", content="1"),
                ToolResult(tool_call_id="b", name="y", content="2"),
            ]
        ),
        Message.assistant("ok"),
    ]

    roles = [m["role"] for m in messages_to_openai(conversation)]

    assert roles == ["user", "assistant", "tool", "tool", "assistant"]


def test_a_message_with_an_unknown_role_cannot_be_sent() -> None:
    with pytest.raises(ValueError, match="role"):
        Message(role="robot", content="hi").to_openai()  # type: ignore[arg-type]


def test_a_part_with_an_unknown_type_cannot_be_sent() -> None:
    message = Message.user([ContentPart(type="video", content="x")])  # type: ignore[arg-type]

    with pytest.raises(ValueError, match="video"):
        message.to_openai()


# From OpenAI ---------------------------------------------------------------------


def test_consecutive_tool_messages_fold_into_one_with_names_from_the_calls() -> None:
    items = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "time", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "rain"},
        {"role": "tool", "tool_call_id": "c2", "content": "noon"},
    ]

    messages = messages_from_openai(items)

    assert [m.role for m in messages] == ["user", "assistant", "tool"]
    assert messages[1].tool_calls[0].arguments == {"city": "Oslo"}
    assert messages[2].tool_results == [
        ToolResult(tool_call_id="c1", name="weather", content="rain"),
        ToolResult(tool_call_id="c2", name="time", content="noon"),
    ]


def test_a_tool_message_name_given_in_openai_wins_over_the_call_name() -> None:
    items = [
        {
            "role": "assistant",
            "tool_calls": [{"id": "c1", "function": {"name": "a", "arguments": ""}}],
        },
        {"role": "tool", "tool_call_id": "c1", "name": "b", "content": None},
    ]

    (_, tool) = messages_from_openai(items)

    assert tool.tool_results == [ToolResult(tool_call_id="c1", name="b", content="")]


def test_malformed_tool_call_json_is_kept_raw_and_sent_back_verbatim() -> None:
    raw = '{"q": "unterminated'
    items = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "s", "arguments": raw},
                }
            ],
        }
    ]

    (message,) = messages_from_openai(items)
    (call,) = message.tool_calls

    assert call.arguments == {}
    assert call.raw_arguments == raw
    assert message.to_openai()[0]["tool_calls"][0]["function"]["arguments"] == raw


def test_tool_call_arguments_that_are_json_but_not_an_object_are_kept_raw() -> None:
    assert parse_tool_arguments("[1, 2]") == ({}, "[1, 2]")
    assert parse_tool_arguments('"text"') == ({}, '"text"')


def test_empty_or_missing_tool_call_arguments_are_an_empty_object() -> None:
    assert parse_tool_arguments(None) == ({}, None)
    assert parse_tool_arguments("  ") == ({}, None)
    assert parse_tool_arguments({"a": 1}) == ({"a": 1}, None)


def test_reasoning_content_is_read_as_one_thinking_part_before_the_text() -> None:
    (message,) = messages_from_openai(
        [{"role": "assistant", "content": "42", "reasoning_content": "ponder"}]
    )

    assert message.content == [ContentPart.thinking("ponder"), ContentPart.text("42")]


def test_thinking_blocks_win_over_reasoning_content_and_keep_signatures() -> None:
    (message,) = messages_from_openai(
        [
            {
                "role": "assistant",
                "content": "ok",
                "reasoning_content": "ab",
                "thinking_blocks": [
                    {"type": "thinking", "thinking": "a", "signature": "s1"},
                    {"type": "thinking", "thinking": "b", "signature": "s2"},
                ],
            }
        ]
    )

    assert message.content == [
        ContentPart.thinking("a", signature="s1"),
        ContentPart.thinking("b", signature="s2"),
        ContentPart.text("ok"),
    ]


def test_a_data_url_image_is_read_back_as_data_with_its_media_type() -> None:
    (message,) = messages_from_openai(
        [
            {
                "role": "user",
                "content": [
                    {
                        "type": "image_url",
                        "image_url": {
                            "url": "data:image/gif;base64,R0lG",
                            "detail": "low",
                        },
                    },
                    {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
                ],
            }
        ]
    )

    assert message.content == [
        ContentPart.image("R0lG", media="image/gif", detail="low"),
        ContentPart.image_url("https://x.test/a.png"),
    ]


def test_an_image_url_given_as_a_bare_string_is_read() -> None:
    (message,) = messages_from_openai(
        [
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": "https://x.test/a.png"}],
            }
        ]
    )

    assert message.content == [ContentPart.image_url("https://x.test/a.png")]


def test_a_file_part_is_read_back_with_its_filename() -> None:
    (message,) = messages_from_openai(
        [
            {
                "role": "user",
                "content": [
                    {
                        "type": "file",
                        "file": {
                            "file_data": "data:application/pdf;base64,JVBER",
                            "filename": "a.pdf",
                        },
                    }
                ],
            }
        ]
    )

    assert message.content == [
        ContentPart.file("JVBER", media="application/pdf", filename="a.pdf")
    ]


def test_an_unknown_role_from_openai_raises_value_error() -> None:
    with pytest.raises(ValueError, match="developer"):
        messages_from_openai([{"role": "developer", "content": "x"}])


def test_an_unknown_content_part_type_from_openai_raises_value_error() -> None:
    with pytest.raises(ValueError, match="input_audio"):
        messages_from_openai([{"role": "user", "content": [{"type": "input_audio"}]}])


@settings(max_examples=150, deadline=None)
@given(conversations())
def test_a_conversation_survives_the_trip_through_openai_format(
    conversation: list[Message],
) -> None:
    wire = messages_to_openai(conversation)

    assert json.loads(json.dumps(wire)) == wire
    assert messages_from_openai(wire) == conversation


# Stored JSON ---------------------------------------------------------------------


def test_to_dict_leaves_out_defaults() -> None:
    assert Message.user("hi").to_dict() == {
        "role": "user",
        "content": [{"type": "text", "content": "hi"}],
    }
    assert ToolResult(tool_call_id="1", name="t").to_dict() == {
        "tool_call_id": "1",
        "name": "t",
        "content": "",
    }


def test_processed_content_is_never_stored() -> None:
    result = ToolResult(
        tool_call_id="1", name="t", content="x", processed_content={"a": 1}
    )

    assert "processed_content" not in result.to_dict()
    assert ToolResult.from_dict(result.to_dict()).processed_content is None


def test_every_tool_result_field_is_stored() -> None:
    result = ToolResult(
        tool_call_id="1",
        name="ask",
        content=[ContentPart.text("q?")],
        display_text="Asking",
        is_error=True,
        is_interrupt=True,
        interrupt_data={"type": "ask", "nested": {"k": [1, 2]}},
    )

    assert result.to_dict() == {
        "tool_call_id": "1",
        "name": "ask",
        "content": [{"type": "text", "content": "q?"}],
        "display_text": "Asking",
        "is_error": True,
        "is_interrupt": True,
        "interrupt_data": {"type": "ask", "nested": {"k": [1, 2]}},
    }
    assert ToolResult.from_dict(result.to_dict()) == result


@settings(max_examples=200, deadline=None)
@given(any_messages())
def test_a_message_survives_to_dict_and_from_dict(message: Message) -> None:
    data = message.to_dict()
    text = json.dumps(data, ensure_ascii=False)

    assert Message.from_dict(data) == message
    assert Message.from_dict(json.loads(text)) == message


def test_from_dict_rejects_an_unknown_role_and_part_type() -> None:
    with pytest.raises(ValueError):
        Message.from_dict({"role": "robot"})
    with pytest.raises(ValueError):
        ContentPart.from_dict({"type": "video", "content": "x"})


# Token usage ---------------------------------------------------------------------


def test_token_usage_is_read_from_an_openai_usage_dict() -> None:
    usage = TokenUsage.from_openai(
        {
            "prompt_tokens": 100,
            "completion_tokens": 20,
            "prompt_tokens_details": {"cached_tokens": 40},
            "completion_tokens_details": {"reasoning_tokens": 5},
        }
    )

    assert usage == TokenUsage(input=100, output=20, cached_input=40, reasoning=5)
    assert usage.total == 120


def test_token_usage_is_read_from_an_object_with_missing_details() -> None:
    usage = TokenUsage.from_openai(
        SimpleNamespace(
            prompt_tokens=7,
            completion_tokens=3,
            prompt_tokens_details=None,
            completion_tokens_details=SimpleNamespace(reasoning_tokens=2),
        )
    )

    assert usage == TokenUsage(input=7, output=3, cached_input=0, reasoning=2)


def test_token_usage_treats_none_counts_as_zero() -> None:
    usage = TokenUsage.from_openai({"prompt_tokens": None, "completion_tokens": None})

    assert usage == TokenUsage()


def test_token_usages_add_field_by_field() -> None:
    total = TokenUsage(input=1, output=2, cached_input=3, reasoning=4) + TokenUsage(
        input=10, output=20, cached_input=30, reasoning=40
    )

    assert total == TokenUsage(input=11, output=22, cached_input=33, reasoning=44)


def test_token_usage_survives_to_dict_and_from_dict() -> None:
    usage = TokenUsage(input=5, output=6, cached_input=1, reasoning=2)

    assert TokenUsage.from_dict(usage.to_dict()) == usage
    assert TokenUsage.from_dict({}) == TokenUsage()
