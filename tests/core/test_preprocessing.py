"""MessagePreprocessor: a submitted message becomes a display and an LLM message."""

from __future__ import annotations

import pytest

from sagents_django.core import Agent, ContentPart, Message
from sagents_django.core.preprocessing import (
    MentionExpander,
    MessagePreprocessor,
    PreprocessContext,
    apreprocess,
    preprocess,
)
from sagents_django.core.testing import ScriptedModel

BRIEF = "Launch the product in May. Budget: 10k."


class Shouting:
    """A preprocessor that is not a subclass of anything."""

    def preprocess(
        self, message: Message, context: PreprocessContext
    ) -> tuple[Message, Message]:
        return message, Message.user(message.text.upper())


class AsyncTagger:
    async def preprocess(
        self, message: Message, context: PreprocessContext
    ) -> tuple[Message, Message]:
        return message, Message.user(f"[{context.agent_id}] {message.text}")


class Refusing:
    def preprocess(
        self, message: Message, context: PreprocessContext
    ) -> tuple[Message, Message]:
        raise ValueError("Messages may not mention @secret")


class Broken:
    def preprocess(self, message: Message, context: PreprocessContext) -> Message:
        return message


def test_without_a_preprocessor_both_versions_are_the_message() -> None:
    display, llm = preprocess(None, "Hello")

    assert display is llm
    assert display == Message.user("Hello")


def test_any_object_with_a_preprocess_method_is_a_preprocessor() -> None:
    assert isinstance(Shouting(), MessagePreprocessor)
    assert isinstance(MentionExpander({}), MessagePreprocessor)
    assert not isinstance(object(), MessagePreprocessor)

    display, llm = preprocess(Shouting(), Message.user("quiet"))

    assert display.text == "quiet"
    assert llm.text == "QUIET"


async def test_an_async_preprocessor_is_awaited_and_receives_the_context() -> None:
    context = PreprocessContext(agent_id="agent-7", conversation_id="c-1")

    display, llm = await apreprocess(AsyncTagger(), "hi", context=context)

    assert display.text == "hi"
    assert llm.text == "[agent-7] hi"


async def test_a_sync_preprocessor_works_with_apreprocess_too() -> None:
    _, llm = await apreprocess(Shouting(), "hi")

    assert llm.text == "HI"


def test_an_async_preprocessor_in_sync_code_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match=r"AsyncTagger.preprocess is async"):
        preprocess(AsyncTagger(), "hi")


def test_a_preprocessor_refuses_a_message_by_raising() -> None:
    with pytest.raises(ValueError, match="@secret"):
        preprocess(Refusing(), "tell me about @secret")


def test_a_preprocessor_returning_the_wrong_shape_is_named_in_the_error() -> None:
    with pytest.raises(TypeError, match=r"Broken.preprocess must return"):
        preprocess(Broken(), "hi")


def test_only_texts_and_messages_can_be_preprocessed() -> None:
    with pytest.raises(TypeError, match="Expected a text or a Message"):
        preprocess(None, 42)  # type: ignore[arg-type]


# MentionExpander ---------------------------------------------------------------------


def test_a_mention_is_expanded_for_the_model_and_listed_for_the_transcript() -> None:
    expander = MentionExpander({"ProjectBrief": BRIEF})
    message = Message.user("Summarize @ProjectBrief please.")

    display, llm = preprocess(expander, message)

    assert display.text == "Summarize @ProjectBrief please."
    assert display.metadata == {"mentions": ["ProjectBrief"]}
    assert llm.text == (
        "Summarize @ProjectBrief please."
        '\n\n<mention name="ProjectBrief">\n'
        f"{BRIEF}\n"
        "</mention>"
    )
    assert llm.metadata == {}
    assert message.text == "Summarize @ProjectBrief please."  # the input is unchanged
    assert message.metadata == {}


def test_each_mentioned_name_is_expanded_once_in_order() -> None:
    expander = MentionExpander({"a": "Alpha", "b.md": "Beta"})

    display, llm = preprocess(expander, "@b.md then @a, and @a again; @unknown stays")

    assert display.metadata["mentions"] == ["b.md", "a"]
    assert llm.text.count("<mention") == 2
    assert llm.text.index('name="b.md"') < llm.text.index('name="a"')
    assert "@unknown stays" in llm.text
    assert 'name="unknown"' not in llm.text


def test_a_message_without_known_mentions_is_returned_as_is() -> None:
    expander = MentionExpander({"ProjectBrief": BRIEF})
    message = Message.user("Mail bob@example.com about @Nothing")

    display, llm = preprocess(expander, message)

    assert display is message and llm is message


def test_mentions_can_be_looked_up_by_a_function_with_the_context() -> None:
    looked_up: list[tuple[str, str | None]] = []

    def lookup(name: str, context: PreprocessContext) -> str | None:
        looked_up.append((name, context.tool_context.get("user_id")))
        return f"Document {name}" if name.startswith("doc") else None

    context = PreprocessContext(agent_id="a", tool_context={"user_id": 5})
    _, llm = preprocess(MentionExpander(lookup), "See @doc1 and @bob", context=context)

    assert looked_up == [("doc1", 5), ("bob", 5)]
    assert '<mention name="doc1">\nDocument doc1\n</mention>' in llm.text


def test_other_content_parts_are_kept_in_both_versions() -> None:
    image = ContentPart.image_url("https://example.com/chart.png")
    message = Message.user([ContentPart.text("What about @Brief?"), image])

    display, llm = preprocess(MentionExpander({"Brief": BRIEF}), message)

    assert display.content == message.content
    assert llm.content[:2] == message.content
    assert llm.content[2].type == "text"


async def test_the_llm_message_is_what_the_model_reads() -> None:
    model = ScriptedModel(["It launches in May."])
    agent = Agent(model=model, replace_default_middleware=True)
    display, llm = preprocess(
        MentionExpander({"ProjectBrief": BRIEF}), "When is the @ProjectBrief launch?"
    )

    result = await agent.aexecute([llm])

    assert result.status == "completed", result.error
    sent = model.requests[0].messages[-1]["content"]
    assert isinstance(sent, str)
    assert BRIEF in sent
    assert BRIEF not in display.text
