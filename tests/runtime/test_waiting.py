"""Waiting for a run: ``agent_server.wait_run`` / ``await_run`` on the embedded default.

The waiter reads the run's row, so these tests commit (the inline executor takes a
run once its transaction commits) and need no subscriber.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from django.db import transaction

from sagents_django.exceptions import InvalidInput, NotFound
from sagents_django.runtime import RunTimeout, agent_server
from tests.fakes.openai_server import fault, reply, tool_call
from tests.runtime import follow as follow_module
from tests.runtime.follow import new_conversation

pytestmark = pytest.mark.django_db(transaction=True)

site = follow_module.site


async def test_a_run_is_followed_through_the_run_of_the_message_queued_on_it(
    site: Any,
) -> None:
    site.script(fault.slow_first_byte(0.5, then=reply("One.")), reply("Two."))
    scope, conversation = await new_conversation()

    first = await agent_server.aadd_message(scope, conversation.pk, "one")
    second = await agent_server.aadd_message(scope, conversation.pk, "two")
    assert second.queued and second.run_id == first.run_id

    chain = await agent_server.await_run(scope, conversation.pk, first.run_id)

    assert chain.status == "completed" and chain.ok
    assert chain.text == "Two."
    assert chain.followed[0] == first.run_id
    assert len(chain.followed) == 2 and chain.run_id == chain.followed[1]
    assert chain.next_run_id is None
    # Without following: the first run alone, naming the run that came after it.
    alone = await agent_server.await_run(
        scope, conversation.pk, first.run_id, follow=False
    )
    assert (alone.run_id, alone.text) == (first.run_id, "One.")
    assert alone.next_run_id == chain.run_id
    assert alone.followed == (first.run_id,)
    assert alone.usage.total > 0


def test_the_sync_wait_returns_the_interrupt_of_a_paused_run(site: Any) -> None:
    site.script(
        reply(tool_calls=[tool_call("write_file", {"file_path": "/a", "content": ""})])
    )
    scope, conversation = asyncio.run(new_conversation())
    submission = agent_server.add_message(scope, conversation.pk, "Write it")

    outcome = agent_server.wait_run(scope, conversation.pk, submission.run_id)

    assert outcome.status == "interrupted" and not outcome.ok
    assert outcome.interrupt_data is not None
    [request] = outcome.interrupt_data["action_requests"]
    assert request["tool_name"] == "write_file"
    assert outcome.text == ""


async def test_a_wait_past_its_timeout_raises_and_leaves_the_run_going(
    site: Any,
) -> None:
    site.script(fault.slow_first_byte(0.6, then=reply("Late, but here.")))
    scope, conversation = await new_conversation()
    submission = await agent_server.aadd_message(scope, conversation.pk, "Hi")

    with pytest.raises(RunTimeout, match=r"did not end within 0\.1 s; it goes on"):
        await agent_server.await_run(
            scope, conversation.pk, submission.run_id, timeout=0.1
        )

    outcome = await agent_server.await_run(scope, conversation.pk, submission.run_id)
    assert (outcome.status, outcome.text) == ("completed", "Late, but here.")


async def test_another_tenants_run_is_not_found(site: Any) -> None:
    site.script(reply("Mine."))
    scope, conversation = await new_conversation("alice")
    mallory, own = await new_conversation("mallory")
    submission = await agent_server.aadd_message(scope, conversation.pk, "Hi")

    with pytest.raises(NotFound, match="was not found"):
        await agent_server.await_run(mallory, conversation.pk, submission.run_id)
    # Her own conversation's id with alice's run: not found either.
    with pytest.raises(NotFound, match=r"Run .* was not found"):
        await agent_server.await_run(mallory, own.pk, submission.run_id)
    with pytest.raises(InvalidInput, match="run_id must be a UUID"):
        await agent_server.await_run(scope, conversation.pk, 42)

    outcome = await agent_server.await_run(scope, conversation.pk, submission.run_id)
    assert outcome.text == "Mine."


def test_a_wait_inside_a_transaction_is_refused_at_once(site: Any) -> None:
    site.script(reply("Hello."))
    scope, conversation = asyncio.run(new_conversation())

    with transaction.atomic():
        submission = agent_server.add_message(scope, conversation.pk, "Hi")
        with pytest.raises(RuntimeError, match=r"inside transaction.atomic\(\)"):
            agent_server.wait_run(scope, conversation.pk, submission.run_id)

    assert agent_server.wait_run(scope, conversation.pk, submission.run_id).ok


async def test_waiting_from_the_runtime_loop_is_refused(site: Any) -> None:
    from sagents_django.runtime import loop

    scope, conversation = await new_conversation()

    async def from_the_loop() -> None:
        await agent_server.await_run(scope, conversation.pk, conversation.pk)

    future = loop.submit(from_the_loop())
    with pytest.raises(RuntimeError, match="runtime's own loop"):
        await asyncio.wrap_future(future)
