"""Debounced file writes survive a Celery worker stopped for a deploy.

The agent (``file_agents``) keeps its files in the database with a ten-minute
debounce, so an edit of an existing file waits in the worker's memory. The turn
edits a file, then its ``hold`` tool keeps the step open until the worker drains;
the worker gets SIGTERM (a warm shutdown), hands the turn over at the end of the
step and exits. The edit must be in the database: stored when the turn was handed
over, before another worker could read the file. A second worker then finishes the
turn. Production stack only (real worker processes): the PostgreSQL pass.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sagents_django.core.filesystem import FileEntry
from sagents_django.filesystems import DatabasePersistence
from sagents_django.models import AgentRun, StoredFile
from sagents_django.runtime import agent_server
from tests.fakes.openai_server import FakeOpenAIServer, reply, tool_call
from tests.runtime import stacks
from tests.runtime.follow import EMBEDDED, follow, new_conversation, no_active_runs

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        "production" not in stacks.names(),
        reason="real worker processes: the PostgreSQL pass",
    ),
]

QUEUE = f"{stacks.QUEUE}-files"
FACTORY = "tests.runtime.file_agents.build_agent"


@pytest.fixture
def worker(
    django_db_setup: Any, django_db_blocker: Any, production_llm: FakeOpenAIServer
) -> Iterator[stacks.Worker]:
    # Started by the test (it is stopped and started again mid-turn).
    with stacks.own_worker(
        production_llm, queue=QUEUE, overrides={"FACTORY": FACTORY}, start=False
    ) as started:
        yield started


@pytest.fixture
async def site(production_llm: FakeOpenAIServer, settings: Any) -> Any:
    production_llm.reset()
    settings.CHANNEL_LAYERS = {"default": stacks.redis_layer()}
    settings.SAGENTS = {
        **EMBEDDED,
        **stacks.sagents_overrides(production_llm),
        "FACTORY": FACTORY,
    }
    with stacks.turns_to(QUEUE):
        yield production_llm
        assert await no_active_runs(60), "a turn was still running after the test"


def store(agent_id: str, path: str, content: str) -> None:
    DatabasePersistence().write(
        FileEntry.new_persisted_file(path, content), {"scope_key": ("agent", agent_id)}
    )


async def stored(agent_id: str, path: str) -> str:
    row = await StoredFile.objects.aget(
        scope_kind="agent", scope_id=agent_id, path=path
    )
    return row.content


async def test_a_worker_stopped_right_after_a_debounced_edit_stores_it_first(
    site: FakeOpenAIServer, worker: stacks.Worker
) -> None:
    scope, conversation = await new_conversation()
    agent_id = str(conversation.agent_id)
    await sync_to_async(store)(agent_id, "/notes.md", "first draft")
    edit = tool_call("write_file", {"file_path": "/notes.md", "content": "final"})
    site.script(
        reply(tool_calls=[edit, tool_call("hold")]),
        reply("The notes are final."),  # the next worker's, after the handover
    )
    await asyncio.to_thread(worker.start)
    follower = await follow(scope, conversation.pk)
    submission = await agent_server.aadd_message(scope, conversation.pk, "edit")

    written = await follower.until("file_updated", timeout=60)
    assert written["data"]["path"] == "/notes.md"
    # Within the debounce window: only the worker's memory has the edit.
    assert await stored(agent_id, "/notes.md") == "first draft"

    worker.sigterm()  # a deploy: SIGTERM, a warm shutdown
    process = worker.process
    assert process is not None
    assert await asyncio.to_thread(process.wait, 60) == 0

    assert await stored(agent_id, "/notes.md") == "final"
    run = await AgentRun.objects.aget(pk=submission.run_id)
    assert run.status == "queued"  # handed over, not failed
    # Another worker finishes the turn from the stored files.
    await asyncio.to_thread(worker.start)
    finished = await follower.until("run_finished", timeout=60)
    assert finished["data"]["status"] == "completed"
    assert await stored(agent_id, "/notes.md") == "final"
