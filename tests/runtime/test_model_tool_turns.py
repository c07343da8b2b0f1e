"""A turn whose model calls the shop's ORM tools, on both stacks.

The site's factory (``tests.shop.agents``) gives the agent ``ModelTools`` over the
user's orders. On the production stack the turn runs in a Celery worker process of
this module's own (its own queue, with that factory), so the tools' ORM calls run
where a site's would: a sync function in a worker thread beside the turn's loop.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from sagents_django import services
from sagents_django.runtime import agent_server
from sagents_django.scope import Scope
from tests.fakes.openai_server import FakeOpenAIServer, reply, tool_call
from tests.runtime import stacks
from tests.runtime.follow import follow, turns_ended, use_stack
from tests.shop.models import Order, Product, Shop

pytestmark = pytest.mark.django_db(transaction=True)

FACTORY = "tests.shop.agents.build_agent"
QUEUE = f"{stacks.QUEUE}-shop"


@pytest.fixture(scope="module")
def shop_worker(
    django_db_setup: Any, django_db_blocker: Any, production_llm: FakeOpenAIServer
) -> Iterator[stacks.Worker]:
    with stacks.own_worker(
        production_llm, queue=QUEUE, overrides={"FACTORY": FACTORY}
    ) as worker:
        yield worker


@pytest.fixture(params=stacks.names())
async def shop_site(request: Any, settings: Any) -> Any:
    """The fake provider of a site whose agent has the shop's tools."""
    llm = use_stack(request, settings)
    settings.SAGENTS = {**settings.SAGENTS, "FACTORY": FACTORY}
    production = request.param == "production"
    if production:
        request.getfixturevalue("shop_worker")
    with stacks.turns_to(QUEUE) if production else contextlib.nullcontext():
        yield llm
        await turns_ended()


def two_shops() -> tuple[Scope, dict[str, Order]]:
    """alice (the caller) with two orders, bob with one."""
    product = Product.objects.create(name="Tea", sku="TEA-1")
    orders = {}
    for name, numbers in (("alice", ["A-1", "A-2"]), ("bob", ["B-1"])):
        user = get_user_model().objects.create_user(username=name)
        shop = Shop.objects.create(name=name, owner=user)
        for number in numbers:
            orders[number] = Order.objects.create(
                shop=shop,
                product=product,
                number=number,
                total=Decimal("5.00"),
                status="paid" if number != "A-1" else "open",
            )
    alice = get_user_model().objects.get(username="alice")
    return Scope.for_user(alice), orders


async def test_a_turn_lists_then_reads_orders_of_the_users_shop_only(
    shop_site: FakeOpenAIServer,
) -> None:
    scope, orders = await sync_to_async(two_shops)()
    mine, theirs = orders["A-2"].pk, orders["B-1"].pk
    shop_site.script(
        reply(
            tool_calls=[
                tool_call("order_list", {"filters": {"status": "paid"}}, id="l1")
            ]
        ),
        reply(
            tool_calls=[
                tool_call("order_get", {"id": mine}, id="g1"),
                tool_call("order_get", {"id": theirs}, id="g2"),
            ]
        ),
        reply("A-2 is your paid order."),
    )
    conversation = await sync_to_async(services.create_conversation)(scope)
    follower = await follow(scope, conversation.pk)

    await agent_server.aadd_message(scope, conversation.pk, "Which orders are paid?")
    finished = await follower.until("run_finished")

    assert finished["data"]["status"] == "completed"
    offered = {t["function"]["name"] for t in shop_site.requests[0]["tools"]}
    assert {"order_list", "order_search", "order_get", "order_count"} <= offered
    listed = shop_site.requests[1]["messages"][-1]
    assert listed["tool_call_id"] == "l1"
    page = json.loads(listed["content"])
    assert [row["number"] for row in page["results"]] == ["A-2"]  # not bob's B-1
    got = {
        m["tool_call_id"]: m["content"]
        for m in shop_site.requests[2]["messages"]
        if m["role"] == "tool" and m["tool_call_id"] in ("g1", "g2")
    }
    assert json.loads(got["g1"])["number"] == "A-2"
    assert got["g2"] == f"No order has id {theirs}."
