"""A real turn pauses for approval, another person with the permission decides it,
the call runs, and the audit chain proposed → decided → executed → result is
complete; on both stacks (the production one in a Celery worker of this module's
own, which reads the same approval settings)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from sagents_django.approvals import audit, deciding, expiry
from sagents_django.approvals.deciding import Vote
from sagents_django.approvals.models import ApprovalRequest
from sagents_django.runtime import agent_server
from tests.fakes.openai_server import FakeOpenAIServer, reply, tool_call
from tests.runtime import stacks
from tests.runtime.follow import follow, new_conversation, turns_ended, use_stack

pytestmark = pytest.mark.django_db(transaction=True)

APPROVALS = {
    "PERMISSIONS": {"write_file": "sagents_django.decide_approvals"},
    "OWNER_DECIDES": False,
}
QUEUE = f"{stacks.QUEUE}-approvals"
WRITE = tool_call(
    "write_file", {"file_path": "/plan.md", "content": "ship it"}, id="w1"
)


@pytest.fixture(scope="module")
def approvals_worker(
    django_db_setup: Any, django_db_blocker: Any, production_llm: FakeOpenAIServer
) -> Iterator[stacks.Worker]:
    with stacks.own_worker(
        production_llm, queue=QUEUE, overrides={"APPROVALS": APPROVALS}
    ) as worker:
        yield worker


@pytest.fixture(params=stacks.names())
async def approvals_site(request: Any, settings: Any) -> Any:
    llm = use_stack(request, settings)
    settings.SAGENTS = {**settings.SAGENTS, "APPROVALS": APPROVALS}
    production = request.param == "production"
    if production:
        request.getfixturevalue("approvals_worker")
    with stacks.turns_to(QUEUE) if production else contextlib.nullcontext():
        yield llm
        await turns_ended()


def approver(name: str) -> Any:
    user = get_user_model().objects.create_user(username=name)
    user.user_permissions.add(
        Permission.objects.get(
            content_type__app_label="sagents_django", codename="decide_approvals"
        )
    )
    return get_user_model().objects.get(pk=user.pk)


async def test_a_paused_call_decided_by_another_person_runs_and_its_chain_is_complete(
    approvals_site: FakeOpenAIServer,
) -> None:
    approvals_site.script(
        reply("Writing the plan.", tool_calls=[WRITE]), reply("Done.")
    )
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "write the plan")
    paused = await follower.until("run_finished")
    assert paused["data"]["status"] == "interrupted"

    row = await ApprovalRequest.objects.aget()
    assert row.tool_name == "write_file" and row.tool_call_id == "w1"
    assert row.run_ref == paused["data"]["run_id"]
    assert row.requested_by_label == "alice" and row.status == "pending"
    assert row.permission == "sagents_django.decide_approvals"
    assert row.policy.endswith("HumanInTheLoop")

    # The owner may not decide here (OWNER_DECIDES is off); bob may.
    vote = Vote(
        tool_call_id="w1",
        arguments_hash=row.arguments_hash,
        decision={"type": "approve"},
    )
    alice = scope.user
    with pytest.raises(deciding.NotFound):
        await sync_to_async(deciding.decide)(alice, conversation.pk, [vote])
    bob = await sync_to_async(approver)("bob")
    outcome = await sync_to_async(deciding.decide)(bob, conversation.pk, [vote])
    done = await follower.until("run_finished")

    assert done["data"]["run_id"] == outcome.run_id
    assert done["data"]["status"] == "completed"
    row = await ApprovalRequest.objects.aget()
    chain = await sync_to_async(audit.chain)(row)
    assert chain["proposed"]["arguments"] == {
        "file_path": "/plan.md",
        "content": "ship it",
    }
    assert [(v["by"], v["decision"], v["via"]) for v in chain["votes"]] == [
        ("bob", "approve", "page")
    ]
    assert chain["decided"]["status"] == "approved"
    assert chain["decided"]["decision"] == {"type": "approve"}
    assert chain["executed"]["run"] == outcome.run_id
    assert chain["executed"]["status"] == "completed"
    assert chain["executed"]["result"] is not None
    assert "plan.md" in str(chain["executed"]["result"])


async def test_an_expired_request_is_rejected_by_the_sweeper_and_recorded_so(
    approvals_site: FakeOpenAIServer,
) -> None:
    approvals_site.script(reply(tool_calls=[WRITE]), reply("Understood."))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)
    await agent_server.aadd_message(scope, conversation.pk, "write the plan")
    await follower.until("run_finished")
    await ApprovalRequest.objects.aupdate(expires_at="2000-01-01T00:00:00Z")

    assert await sync_to_async(expiry.expire_due)() == 1
    done = await follower.until("run_finished")

    assert done["data"]["status"] == "completed"
    row = await ApprovalRequest.objects.aget()
    chain = await sync_to_async(audit.chain)(row)
    assert chain["decided"]["status"] == "expired"
    assert chain["votes"] == [
        {
            "by": "",
            "at": chain["votes"][0]["at"],
            "decision": "expire",
            "arguments_hash": "",
            "reason": "",
            "via": "sweeper",
        }
    ]
    assert chain["executed"]["status"] == "not_run"
    assert await sync_to_async(expiry.expire_due)() == 0
    # The model was told nobody decided in time.
    assert "expired" in str(approvals_site.requests[-1].messages[-1])
