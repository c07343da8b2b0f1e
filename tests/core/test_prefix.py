"""Work done once per message of a history that grows at its end (``core.prefix``):
reused while the history starts with the one seen last, redone when it was rewritten,
and never wrong either way."""

from __future__ import annotations

from dataclasses import replace

from sagents_django.core import Message, State, ToolCall, ToolResult
from sagents_django.core.middleware.patch_tool_calls import (
    PatchToolCalls,
    patch_dangling_tool_calls,
)
from sagents_django.core.prefix import extends
from sagents_django.core.tokens import TokenCache, approximate_message_tokens


def chat(count: int) -> list[Message]:
    return [
        Message.user(f"question {i}")
        if i % 2 == 0
        else Message.assistant(f"answer {i}")
        for i in range(count)
    ]


def calls(call_id: str) -> Message:
    return Message.assistant(tool_calls=[ToolCall(call_id=call_id, name="t")])


def result(call_id: str) -> Message:
    return Message.tool([ToolResult(tool_call_id=call_id, name="t", content="ok")])


def test_extends_is_by_identity_or_equality_and_order() -> None:
    history = chat(4)
    assert extends([], history)
    assert extends(history[:3], history)
    assert extends(tuple(history[:2]), history)
    assert extends([Message.user("question 0")], history)  # equal, not the same
    assert not extends(history[1:3], history)
    assert not extends([*history, Message.user("more")], history)


def test_a_message_keeps_its_wire_form_until_replaced() -> None:
    message = Message.user("hello")
    first = message.to_openai()
    assert message.to_openai() is first
    changed = replace(message, content=Message.user("bye").content)
    assert changed.to_openai() == [{"role": "user", "content": "bye"}]
    assert changed == Message.user("bye")  # the caches are not compared


def test_token_counts_follow_a_rewritten_history() -> None:
    cache, history = TokenCache(), chat(6)
    exact = sum(map(approximate_message_tokens, history))
    assert cache.count(history, approximate_message_tokens) == exact
    grown = [*history, Message.user("a longer question " * 20)]
    assert cache.count(grown, approximate_message_tokens) == sum(
        map(approximate_message_tokens, grown)
    )
    rewritten = [grown[0], Message.assistant("x " * 400), *grown[2:]]
    assert cache.count(rewritten, approximate_message_tokens) == sum(
        map(approximate_message_tokens, rewritten)
    )


def test_patching_scans_only_the_new_messages_and_still_finds_every_dangling_call() -> (
    None
):
    patch = PatchToolCalls()
    clean = [*chat(2), calls("a"), result("a"), Message.assistant("done")]
    state = State(messages=clean)
    assert patch.before_model(state) is state
    # A new dangling call after the clean prefix is found.
    grown = State(messages=[*clean, calls("b"), Message.user("never mind")])
    patched = patch.before_model(grown)
    assert patched.messages == patch_dangling_tool_calls(grown.messages)
    assert [r.tool_call_id for r in patched.messages[-2].tool_results] == ["b"]
    # A rewritten prefix with a dangling call in its middle is found too.
    assert patch.before_model(state) is state
    rewritten = State(messages=[calls("c"), *clean[1:]])
    assert patch.before_model(rewritten).messages[1].tool_results[0].tool_call_id == "c"
