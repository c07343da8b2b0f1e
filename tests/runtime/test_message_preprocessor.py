"""The site's MessagePreprocessor on every path a message takes (``runtime.intake``):
the transcript shows one text, the model reads another, on both stacks."""

from __future__ import annotations

from typing import Any

import pytest

from sagents_django.exceptions import InvalidInput, NotFound
from sagents_django.models import AgentRun, DisplayMessage
from sagents_django.runtime import agent_server
from tests.fakes.openai_server import reply
from tests.runtime import follow as follow_module
from tests.runtime.agents import BRIEF, Mentions
from tests.runtime.follow import follow, new_conversation, rows_of

pytestmark = pytest.mark.django_db(transaction=True)

site = follow_module.site


@pytest.fixture
def mentions(site: Any, settings: Any) -> Any:
    settings.SAGENTS = {
        **settings.SAGENTS,
        "MESSAGE_PREPROCESSOR": "tests.runtime.agents.Mentions",
    }
    Mentions.calls = 0
    return site


def last_user_text(request: Any) -> str:
    return [m for m in request.messages if m["role"] == "user"][-1]["content"]


async def test_the_transcript_shows_the_message_and_the_model_reads_its_expansion(
    mentions: Any,
) -> None:
    mentions.script(reply("On it."))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)

    await agent_server.aadd_message(scope, conversation.pk, "Read @brief please")
    assert (await follower.until("run_finished"))["data"]["status"] == "completed"

    [user, _] = await rows_of(conversation)
    assert user.content == {"text": "Read @brief please"}
    assert user.metadata["mentions"] == ["brief"]
    sent = last_user_text(mentions.requests[0])
    assert sent.startswith("Read @brief please")
    assert BRIEF in sent and '<mention name="brief">' in sent
    info = await agent_server.aget_info(scope, conversation.pk)
    assert BRIEF in info["state"].messages[0].text


async def test_a_message_queued_during_a_turn_reaches_the_model_expanded(
    mentions: Any,
) -> None:
    mentions.script(reply("First.", chunks=20, delay=0.03), reply("Second."))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)

    await agent_server.aadd_message(scope, conversation.pk, "one")
    await follower.until("llm_deltas")
    queued = await agent_server.aadd_message(scope, conversation.pk, "and @brief")
    await follower.until("run_finished")
    last = await follower.until("run_finished")

    assert queued.queued and last["data"]["status"] == "completed"
    assert BRIEF in last_user_text(mentions.requests[1])
    rows = await rows_of(conversation)
    assert [r.content.get("text") for r in rows if r.message_type == "user"] == [
        "one",
        "and @brief",
    ]


async def test_a_refused_message_is_a_clear_error_and_nothing_is_written(
    mentions: Any,
) -> None:
    scope, conversation = await new_conversation()

    with pytest.raises(InvalidInput, match="not allowed here"):
        await agent_server.aadd_message(scope, conversation.pk, "something forbidden")

    assert await rows_of(conversation) == []
    assert not await AgentRun.objects.filter(conversation=conversation.pk).aexists()
    assert mentions.requests == []


async def test_another_tenants_conversation_never_reaches_the_preprocessor(
    mentions: Any,
) -> None:
    _, theirs = await new_conversation("bob")
    scope, _ = await new_conversation("alice")

    with pytest.raises(NotFound):
        await agent_server.aadd_message(scope, theirs.pk, "@brief")

    assert Mentions.calls == 0
    assert not await DisplayMessage.objects.filter(conversation=theirs.pk).aexists()


async def sent_for(site: Any, text: str) -> str:
    """The user message the model read for ``text``, sent on a new conversation."""
    site.script(reply("On it."))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, text)
    await follower.until("run_finished")
    return last_user_text(site.requests[-1])


async def test_the_factory_can_carry_the_preprocessor(site: Any, settings: Any) -> None:
    settings.SAGENTS = {
        **settings.SAGENTS,
        "FACTORY": "tests.runtime.agents.build_agent_with_mentions",
    }
    assert BRIEF in await sent_for(site, "@brief")


async def test_without_a_preprocessor_the_model_reads_what_was_typed(
    site: Any,
) -> None:
    assert await sent_for(site, "@brief") == "@brief"
