"""What only the production stack can show: turns in another process.

Every runtime test runs on this stack too (``stacks``); these check that the turns
really run in the Celery worker and that any worker process can take a
conversation up where another left it.
"""

from __future__ import annotations

from typing import Any

import pytest

from sagents_django.models import AgentRun
from sagents_django.runtime import agent_server
from tests.fakes.openai_server import reply, tool_call
from tests.runtime import follow as follow_module
from tests.runtime import stacks
from tests.runtime.follow import follow, new_conversation

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        "production" not in stacks.names(),
        reason="the production stack runs in the PostgreSQL pass",
    ),
    pytest.mark.parametrize("site", ["production"], indirect=True),
]

site = follow_module.site


def worker_pid(run: AgentRun) -> int:
    """The process that ran ``run`` (its lease owner is host:pid:token)."""
    return int(run.lease_owner.split(":")[1])


async def test_a_turn_runs_in_the_worker_process(
    site: Any, production_worker: stacks.Worker
) -> None:
    site.script(reply("From the worker."))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)

    submission = await agent_server.aadd_message(scope, conversation.pk, "hi")
    finished = await follower.until("run_finished")

    assert finished["data"]["status"] == "completed"
    run = await AgentRun.objects.aget(pk=submission.run_id)
    assert worker_pid(run) == production_worker.pid


async def test_an_approval_is_resumed_by_another_worker_process(
    site: Any, production_worker: stacks.Worker
) -> None:
    site.script(
        reply(
            tool_calls=[tool_call("write_file", {"file_path": "/a", "content": "x"})]
        ),
        reply("Written."),
    )
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    first = await agent_server.aadd_message(scope, conversation.pk, "write it")
    assert (await follower.until("run_finished"))["data"]["status"] == "interrupted"
    before = production_worker.pid

    production_worker.restart()  # the process that paused is gone
    resumed = await agent_server.aresume(scope, conversation.pk, [{"type": "approve"}])
    finished = await follower.until("run_finished")

    assert finished["data"]["status"] == "completed"
    runs = {
        str(r.pk): r
        async for r in AgentRun.objects.filter(conversation=conversation.pk)
    }
    assert worker_pid(runs[first.run_id]) == before
    assert worker_pid(runs[resumed]) == production_worker.pid != before
    assert [m["role"] for m in site.requests[1].messages][-2:] == [
        "assistant",
        "tool",
    ]
