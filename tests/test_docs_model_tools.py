"""The docs' ``ModelTools`` example (docs/tools.md) runs as written, over the
tests' shop app.

The example imports ``shop.models`` as a site's app would be named; the tests'
shop app lives at ``tests.shop`` (label ``shop``), so that module is made
importable under the example's name, and the block runs unchanged.
"""

from __future__ import annotations

import asyncio
import json
import sys
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model

import tests.shop
import tests.shop.models
from sagents_django.core import State, ToolCall, ToolContext
from sagents_django.core.tools import execute_tool_call
from sagents_django.scope import Scope
from tests.docs import marked
from tests.shop.models import Customer, Order, Product, Shop

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setitem(sys.modules, "shop", tests.shop)
    monkeypatch.setitem(sys.modules, "shop.models", tests.shop.models)
    namespace: dict[str, Any] = {"__name__": "docs_factory"}
    block = marked("model-tools")
    exec(compile(block.code, str(block), "exec"), namespace)
    return namespace


def tenant(name: str, product: Product) -> tuple[Scope, Order]:
    user = get_user_model().objects.create_user(username=name)
    shop = Shop.objects.create(name=name, owner=user)
    customer = Customer.objects.create(shop=shop, name=f"{name}'s customer")
    order = Order.objects.create(
        shop=shop,
        product=product,
        customer=customer,
        number=f"{name}-1",
        total=Decimal("3.00"),
    )
    return Scope.for_user(user), order


def run(scope: Scope, tools: list[Any], name: str, args: dict[str, Any]) -> Any:
    call = ToolCall(call_id="c1", name=name, arguments=args)
    context = ToolContext(
        state=State(), agent_id=None, tool_context={"scope": scope}, tool_call=call
    )
    return asyncio.run(execute_tool_call(call, {t.name: t for t in tools}, context))


def test_the_docs_example_lists_the_callers_orders_and_holds_writes_for_approval(
    example: dict[str, Any],
) -> None:
    product = Product.objects.create(name="Tea", sku="TEA-1")
    alice, mine = tenant("alice", product)
    _, theirs = tenant("bob", product)

    tools = example["build_tools"](scope=alice)

    assert [t.name for t in tools] == [
        "order_list",
        "order_search",
        "order_get",
        "order_count",
        "order_update",
    ]
    assert example["INTERRUPT_ON"] == {"order_update": True}
    page = json.loads(run(alice, tools, "order_list", {}).content)
    assert [row["number"] for row in page["results"]] == ["alice-1"]
    assert run(alice, tools, "order_get", {"id": theirs.pk}).is_error
    unapproved = run(
        alice, tools, "order_update", {"id": mine.pk, "values": {"status": "paid"}}
    )
    assert unapproved.is_error
    assert Order.objects.get(pk=mine.pk).status == "open"
