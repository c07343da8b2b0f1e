"""A budget's approval through the real pages: the inbox of the people allowed to
raise budgets, and the chat page; refused, changing nothing, for anyone else.

The turn pauses past a soft threshold (``SOFT_ACTION = "approve"``); its pause is
an ``ApprovalRequest`` that only holders of ``sagents_django.raise_budget`` may
decide, through the same form and view as a tool call's approval.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import AsyncClient
from django.urls import reverse

from sagents_django.approvals.models import ApprovalRequest, ApprovalVote
from sagents_django.models import AgentRun, BudgetCounter
from sagents_django.runtime import agent_server
from sagents_django.ui.approvals import inbox_count
from tests.budgets.conftest import user_budget
from tests.fakes.openai_server import reply
from tests.runtime.follow import follow, new_conversation, no_active_runs

pytestmark = pytest.mark.django_db(transaction=True)

ASKS = {"MAX_OUTPUT_TOKENS": 1000, "SOFT_ACTION": "approve"}
SAID = "This reply needs budget approval: $0.01 left of $0.01"
"""A limit of $0.01 with a soft threshold at 10%: the first call (about $0.0006)
is past it, nothing is spent yet."""


async def paused_turn(budget_site: Any) -> tuple[Any, Any]:
    """A conversation of alice whose first call waits for a budget approval."""
    budget_site.budgets(ASKS)
    budget_site.script(reply("Approved, so I answer.", usage=(100, 10)))
    scope, conversation = await new_conversation()
    await user_budget(scope.user, "0.01", soft_percent=10)
    follower = await follow(scope, conversation.pk)
    submission = await agent_server.aadd_message(scope, conversation.pk, "hi")
    finished = await follower.finished(submission.run_id)
    assert finished["data"]["status"] == "interrupted"
    return scope, conversation


async def person(name: str, *, may_raise: bool) -> Any:
    user = await get_user_model().objects.acreate(username=name)
    if may_raise:
        permission = await Permission.objects.aget(codename="raise_budget")
        await sync_to_async(user.user_permissions.add)(permission)
    return user


async def badge(scope: Any) -> int:
    """The header's count of conversations waiting for the person."""
    fresh = await get_user_model().objects.aget(pk=scope.user.pk)  # no perm cache
    return await sync_to_async(inbox_count)(type(scope).for_user(fresh))


async def client_of(user: Any) -> AsyncClient:
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    return client


def form_hash(page: str) -> str:
    found = re.search(r'name="hash-0" value="([0-9a-f]{64})"', page)
    assert found, "the page has no decision form"
    return found.group(1)


async def decide(client: AsyncClient, conversation: Any, **fields: str) -> Any:
    return await client.post(
        reverse("sagents_django:decide", args=[conversation.pk]),
        {"action": "decide", **fields},
        headers={"HX-Request": "true"},
    )


async def nothing_changed(conversation: Any, counter_key: str) -> None:
    row = await ApprovalRequest.objects.aget(conversation_id=conversation.pk)
    assert row.status == "pending"
    assert not await ApprovalVote.objects.aexists()
    assert await AgentRun.objects.acount() == 1  # no resume began
    counter = await BudgetCounter.objects.aget(key=counter_key)
    assert (counter.soft_state, counter.decided_by_id) == ("", None)


async def test_a_budget_keeper_approves_it_from_their_inbox(budget_site: Any) -> None:
    scope, conversation = await paused_turn(budget_site)
    keeper = await person("keeper", may_raise=True)
    client = await client_of(keeper)

    inbox = (await client.get(reverse("sagents_django:inbox"))).content.decode()
    assert SAID in inbox
    assert "Budget approval" in inbox
    assert 'value="edit"' not in inbox  # approve or reject, nothing to edit
    answer = await decide(
        client, conversation, **{"decision-0": "approve", "hash-0": form_hash(inbox)}
    )

    assert (answer.status_code, answer.content) == (200, b"")
    assert await no_active_runs(30)
    assert await AgentRun.objects.filter(status="completed").acount() == 1
    assert len(budget_site.requests) == 1  # the call went on
    counter = await BudgetCounter.objects.aget(key=f"user:{scope.user.pk}")
    assert (counter.soft_state, counter.decided_by_id) == ("approved", keeper.pk)
    row = await ApprovalRequest.objects.aget(conversation_id=conversation.pk)
    vote = await row.votes.aget()
    assert (row.status, vote.user_id, vote.via) == ("approved", keeper.pk, "page")


async def test_someone_not_allowed_to_raise_budgets_is_refused_and_nothing_changes(
    budget_site: Any,
) -> None:
    scope, conversation = await paused_turn(budget_site)
    keeper_page = (
        await (await client_of(await person("keeper", may_raise=True))).get(
            reverse("sagents_django:inbox")
        )
    ).content.decode()
    stale_hash = form_hash(keeper_page)
    key = f"user:{scope.user.pk}"

    # A stranger: no inbox entry, and a forged post is not found.
    stranger = await client_of(await person("mallory", may_raise=False))
    inbox = (await stranger.get(reverse("sagents_django:inbox"))).content.decode()
    assert SAID not in inbox
    answer = await decide(
        stranger, conversation, **{"decision-0": "approve", "hash-0": stale_hash}
    )
    assert answer.status_code == 404
    await nothing_changed(conversation, key)

    # The owner, who spends the budget: the chat page shows the pause (no
    # form), their inbox does not list it, and their post decides nothing.
    owner = await client_of(scope.user)
    page = (
        await owner.get(reverse("sagents_django:conversation", args=[conversation.pk]))
    ).content.decode()
    assert 'aria-label="The agent is paused"' in page
    assert "This reply needs budget approval: $0.01 left of $0.01" in page
    assert 'name="hash-0"' not in page
    inbox = (await owner.get(reverse("sagents_django:inbox"))).content.decode()
    assert 'name="hash-0"' not in inbox
    # Nor does the header's badge count it (it counted it once).
    assert await badge(scope) == 0
    answer = await decide(
        owner, conversation, **{"decision-0": "approve", "hash-0": stale_hash}
    )
    assert b"Nothing waits for a decision" in answer.content
    await nothing_changed(conversation, key)
    assert budget_site.requests == []


async def test_an_owner_allowed_to_raise_budgets_rejects_it_on_the_chat_page(
    budget_site: Any,
) -> None:
    scope, conversation = await paused_turn(budget_site)
    permission = await Permission.objects.aget(codename="raise_budget")
    await sync_to_async(scope.user.user_permissions.add)(permission)
    client = await client_of(scope.user)
    url = reverse("sagents_django:conversation", args=[conversation.pk])

    page = (await client.get(url)).content.decode()
    assert SAID in page
    assert 'aria-label="Approval needed"' in page
    answer = await decide(
        client,
        conversation,
        **{"decision-0": "reject", "hash-0": form_hash(page), "message-0": "Enough."},
    )

    assert (answer.status_code, answer.content) == (200, b"")
    assert await no_active_runs(30)
    assert budget_site.requests == []  # rejected: the turn stopped before the call
    counter = await BudgetCounter.objects.aget(key=f"user:{scope.user.pk}")
    assert (counter.soft_state, counter.decided_by_id) == ("declined", scope.user.pk)
    row = await ApprovalRequest.objects.aget(conversation_id=conversation.pk)
    vote = await row.votes.aget()
    assert (row.status, vote.reason) == ("rejected", "Enough.")
    page = (await client.get(url)).content.decode()
    assert 'aria-label="Approval needed"' not in page


async def test_a_tampered_budget_decision_is_refused(budget_site: Any) -> None:
    scope, conversation = await paused_turn(budget_site)
    client = await client_of(await person("keeper", may_raise=True))

    answer = await decide(
        client, conversation, **{"decision-0": "approve", "hash-0": "0" * 64}
    )

    assert b"Not sent" in answer.content
    await nothing_changed(conversation, f"user:{scope.user.pk}")
