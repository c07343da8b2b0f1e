"""ORM tools inside the tenant: reads, writes, and every crafted argument refused.

Two shops (alice's and bob's) share a product catalogue. Calls go through the
core's ``execute_tool_call`` as a turn makes them (the schema check, then the sync
function in a worker thread with a connection of its own, so the data is
committed: ``transaction=True``); ``direct`` calls a tool's function with
arguments the schema would have refused, to show the function's own guards.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser

from sagents_django.core import (
    Agent,
    ChatModel,
    ConfigurationError,
    State,
    ToolCall,
    ToolContext,
)
from sagents_django.core.limits import MAX_TOOL_RESULT_CHARS
from sagents_django.core.tools import execute_tool_call
from sagents_django.model_tools import ModelTools
from sagents_django.scope import Scope
from tests.fakes.openai_server import FakeOpenAIServer, reply, tool_call
from tests.shop.models import Customer, Order, Product, Shop
from tests.shop.tools import ORDERS, order_tools

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)


class Tenant:
    """A user, his scope, his shop and his customers."""

    def __init__(self, name: str) -> None:
        self.user = get_user_model().objects.create_user(username=name)
        self.scope = Scope.for_user(self.user)
        self.shop = Shop.objects.create(name=f"{name}'s shop", owner=self.user)
        self.customers = [
            Customer.objects.create(shop=self.shop, name=f"{name} customer {i}")
            for i in range(2)
        ]

    def order(self, number: str, **values: Any) -> Order:
        values.setdefault("product", Product.objects.first())
        values.setdefault("total", Decimal("10.00"))
        return Order.objects.create(shop=self.shop, number=number, **values)


@pytest.fixture
def product() -> Product:
    return Product.objects.create(name="Tea", sku="TEA-1")


@pytest.fixture
def alice(product: Product) -> Tenant:
    return Tenant("alice")


@pytest.fixture
def bob(product: Product) -> Tenant:
    return Tenant("bob")


@pytest.fixture
def orders(alice: Tenant, bob: Tenant) -> dict[str, Order]:
    """Three orders of alice's and one of bob's."""
    made = {
        "a1": alice.order("A-1", placed_at=T0, customer=alice.customers[0]),
        "a2": alice.order(
            "A-2",
            placed_at=T0 + datetime.timedelta(hours=1),
            status="paid",
            paid=True,
            total=Decimal("99.50"),
            note="gift wrap please",
        ),
        "a3": alice.order("A-3", placed_at=T0 + datetime.timedelta(hours=2)),
        "b1": bob.order(
            "B-1",
            placed_at=T0,
            customer=bob.customers[0],
            total=Decimal("500.00"),
            internal_note="bob's secret",
        ),
    }
    return made


def tools_by_name(tools: ModelTools | None = None) -> dict[str, Any]:
    return {t.name: t for t in (tools or order_tools()).tools()}


def call(
    scope: Any,
    name: str,
    args: dict[str, Any],
    tools: ModelTools | None = None,
) -> tuple[bool, str]:
    """(is_error, text) of one call through the core, as a turn runs it."""
    the_call = ToolCall(call_id="c1", name=name, arguments=args)
    context = ToolContext(
        state=State(), agent_id=None, tool_context={"scope": scope}, tool_call=the_call
    )
    result = asyncio.run(execute_tool_call(the_call, tools_by_name(tools), context))
    assert isinstance(result.content, str)
    return result.is_error, result.content


def ok(scope: Any, name: str, args: dict[str, Any], **changes: Any) -> Any:
    is_error, text = call(scope, name, args, order_tools(**changes))
    assert not is_error, text
    return json.loads(text)


def refused(scope: Any, name: str, args: dict[str, Any], **changes: Any) -> str:
    is_error, text = call(scope, name, args, order_tools(**changes))
    assert is_error, text
    return text


def direct(scope: Any, name: str, args: dict[str, Any], **changes: Any) -> Any:
    """The tool function's own answer to ``args``, with no schema check first."""
    tool = tools_by_name(order_tools(**changes))[name]
    context = ToolContext(state=State(), agent_id=None, tool_context={"scope": scope})
    return tool.function(args, context)


def numbers(page: dict[str, Any]) -> list[str]:
    return [row["number"] for row in page["results"]]


# Reads --------------------------------------------------------------------------
def test_list_shows_the_scopes_rows_with_only_the_listed_fields(
    alice: Tenant, orders: dict[str, Order]
) -> None:
    page = ok(alice.scope, "order_list", {})

    assert numbers(page) == ["A-3", "A-2", "A-1"]  # -placed_at, the default
    assert page["next_cursor"] is None
    first = page["results"][2]
    assert set(first) == {"id", *ORDERS["fields"]}
    assert first["customer__name"] == "alice customer 0"
    assert first["total"] == "10.00"
    assert first["placed_at"] == T0.isoformat()
    assert "shop" not in first and "internal_note" not in first


def test_pages_follow_the_cursor_to_the_end_without_repeats_or_gaps(
    alice: Tenant, bob: Tenant
) -> None:
    # Ties on placed_at and on total: the key orders rows within a tie.
    for i in range(25):
        alice.order(
            f"A-{i:02}",
            placed_at=T0 + datetime.timedelta(hours=i // 4),
            total=Decimal(i % 3),
        )
        bob.order(f"B-{i:02}", placed_at=T0 + datetime.timedelta(hours=i // 4))
    for order_by in ["-placed_at", "placed_at", "total", "-total", "number", "-id"]:
        seen: list[str] = []
        args: dict[str, Any] = {"order_by": order_by, "limit": 7}
        while True:
            page = ok(alice.scope, "order_list", args)
            seen += numbers(page)
            if page["next_cursor"] is None:
                break
            args["cursor"] = page["next_cursor"]
        assert sorted(seen) == [f"A-{i:02}" for i in range(25)], order_by
        assert len(seen) == 25, order_by


def test_filters_the_site_allows_narrow_the_rows(
    alice: Tenant, bob: Tenant, orders: dict[str, Order]
) -> None:
    def listed(filters: dict[str, Any]) -> list[str]:
        return sorted(numbers(ok(alice.scope, "order_list", {"filters": filters})))

    assert listed({"status": "paid"}) == ["A-2"]
    assert listed({"status__in": ["open", "shipped"]}) == ["A-1", "A-3"]
    assert listed({"total__gte": 50}) == ["A-2"]
    assert listed({"total__lte": "10.00", "customer__isnull": False}) == ["A-1"]
    assert listed({"customer__name__icontains": "CUSTOMER 0"}) == ["A-1"]
    assert listed({"number__icontains": "a-"}) == ["A-1", "A-2", "A-3"]
    assert listed({"paid": True}) == ["A-2"]
    # Times with a zone, without one (the site's zone), and a bare date.
    assert listed({"placed_at__gte": "2026-01-01T13:00:00+00:00"}) == ["A-2", "A-3"]
    assert listed({"placed_at__lt": "2026-01-01 12:30"}) == ["A-1"]
    assert listed({"placed_at__lt": "2026-01-01"}) == []
    reference = str(orders["a3"].reference)
    assert listed({"reference": reference}) == ["A-3"]
    assert listed({"customer": alice.customers[0].pk}) == ["A-1"]
    # Bob's customer: a filter narrows alice's rows, it never widens them.
    assert listed({"customer": bob.customers[0].pk}) == []


def test_search_looks_in_the_search_fields_only(
    alice: Tenant, orders: dict[str, Order]
) -> None:
    def found(query: str) -> list[str]:
        page = ok(alice.scope, "order_search", {"query": query})
        return sorted(numbers(page))

    assert found("GIFT") == ["A-2"]
    assert found("customer 0") == ["A-1"]
    assert found("a-3") == ["A-3"]
    assert found("secret") == []  # bob's internal note: another tenant, no field
    assert found("B-1") == []


def test_get_reads_one_row_with_its_long_text(
    alice: Tenant, orders: dict[str, Order]
) -> None:
    row = ok(alice.scope, "order_get", {"id": orders["a2"].pk})

    assert row["number"] == "A-2"
    assert row["note"] == "gift wrap please"
    assert row["paid"] is True
    assert "internal_note" not in row


def test_count_is_exact_up_to_its_limit_then_says_at_least(alice: Tenant) -> None:
    for i in range(51):
        alice.order(f"A-{i}", status="paid" if i < 3 else "open")

    assert ok(alice.scope, "order_count", {"filters": {"status": "paid"}}) == {
        "count": 3
    }
    assert ok(alice.scope, "order_count", {}) == {"count": 50, "at_least": True}


def test_a_scope_that_owns_nothing_sees_nothing(orders: dict[str, Order]) -> None:
    anonymous = Scope.for_user(AnonymousUser())

    assert ok(anonymous, "order_list", {})["results"] == []
    assert ok(anonymous, "order_count", {}) == {"count": 0}
    text = refused(anonymous, "order_get", {"id": orders["a1"].pk})
    assert text == f"No order has id {orders['a1'].pk}."


def test_text_is_cut_in_pages_and_a_page_stays_within_the_result_limit(
    alice: Tenant,
) -> None:
    for i in range(20):
        alice.order(f"A-{i:02}", note="n" * 5000, details={"blob": "x" * 30_000})

    is_error, text = call(alice.scope, "order_list", {"limit": 20}, order_tools())
    page = json.loads(text)  # still JSON: rows are left out, not cut mid-way

    assert not is_error
    assert len(text) <= MAX_TOOL_RESULT_CHARS
    assert 0 < len(page["results"]) < 20
    assert page["note"].endswith("read on with next_cursor.")
    assert page["results"][0]["note"].endswith(
        "... [4700 more characters; order_get shows all]"
    )
    rest = ok(alice.scope, "order_list", {"limit": 20, "cursor": page["next_cursor"]})
    assert len(page["results"]) + len(rest["results"]) >= 20 or rest["next_cursor"]


def test_get_of_a_huge_row_is_cut_and_says_so(alice: Tenant) -> None:
    order = alice.order("A-1", note="n" * 300_000)

    is_error, text = call(alice.scope, "order_get", {"id": order.pk})

    assert not is_error
    assert len(text) <= MAX_TOOL_RESULT_CHARS
    assert "[280000 more characters]" in json.loads(text)["note"]


# Crafted arguments: each a tool error, never a row outside the queryset -----------
def test_another_tenants_id_is_not_found_exactly_like_a_missing_one(
    alice: Tenant, orders: dict[str, Order]
) -> None:
    theirs = orders["b1"].pk
    missing = Order.objects.order_by("-pk").first().pk + 1  # type: ignore[union-attr]

    text = refused(alice.scope, "order_get", {"id": theirs})
    other = refused(alice.scope, "order_get", {"id": missing})

    assert text == f"No order has id {theirs}."
    assert other == f"No order has id {missing}."
    assert "B-1" not in text and "secret" not in text


@pytest.mark.parametrize(
    "key", ["1 OR 1=1", "abc", 2**70, -1, True, 1.5, None, [1], {"pk": 1}, "\x00"]
)
def test_a_malformed_id_is_not_found_and_breaks_nothing(
    alice: Tenant, orders: dict[str, Order], key: Any
) -> None:
    result = direct(alice.scope, "order_get", {"id": key})

    assert result.is_error
    assert result.content.startswith("No order has id ")


@pytest.mark.parametrize(
    "filters, says",
    [
        ({"internal_note__icontains": "secret"}, "it is not a filter you may use"),
        ({"shop": 1}, "it is not a filter you may use"),
        ({"customer__email": "x@y.z"}, "it is not a filter you may use"),
        ({"customer__shop__owner__username": "bob"}, "it is not a filter"),
        ({"product__orders__total__gte": 100}, "it is not a filter you may use"),
        ({"product__orders__shop__owner": 2}, "it is not a filter you may use"),
        ({"number__regex": "^(a+)+$"}, "regular expressions are not allowed"),
        ({"number__iregex": "b"}, "regular expressions are not allowed"),
        ({"placed_at__year": 2026}, "it is not a filter you may use"),
        ({"total__gt": 1}, "it is not a filter you may use"),
        ({"status__exact": "paid"}, "it is not a filter you may use"),
    ],
)
def test_a_filter_the_site_did_not_allow_is_refused_naming_the_allowed_ones(
    alice: Tenant, orders: dict[str, Order], filters: dict[str, Any], says: str
) -> None:
    for name in ("order_list", "order_count", "order_search"):
        args = {"filters": filters, **({"query": "A"} if "search" in name else {})}
        text = refused(alice.scope, name, args)
        assert says in text
        assert "Filters you may use: customer, customer__isnull," in text
        assert "B-1" not in text and "A-1" not in text


@pytest.mark.parametrize(
    "filters",
    [
        {"status": {"$ne": "open"}},
        {"status": ["paid"]},
        {"total__gte": [1]},
        {"total__gte": {"sql": "1) OR (1=1"}},
        {"status__in": [["paid"]]},
        {"status__in": "paid"},
        {"status__in": ["paid"] * 101},
        {"customer__isnull": "yes"},
        {"paid": "true"},
        {"total__gte": float("nan")},
        {"total__gte": float("inf")},
        {"total__gte": "1e999999"},
        {"customer": 2**70},
        {"placed_at__gte": "next tuesday"},
        {"reference": "not-a-uuid"},
        {"number": "A\x00"},
        {"number__icontains": "\ud800"},
        {"number__icontains": "a" * 1001},
        {"status": None},
    ],
)
def test_a_value_no_column_takes_is_refused_by_the_tool_itself(
    alice: Tenant, orders: dict[str, Order], filters: dict[str, Any]
) -> None:
    result = direct(alice.scope, "order_list", {"filters": filters})
    assert result.is_error, result.content
    assert result.content.startswith("filters.")
    # And through the core (the schema refuses most of them first).
    text = refused(alice.scope, "order_list", {"filters": filters})
    assert "A-1" not in text


@pytest.mark.parametrize(
    "args, says",
    [
        ({"limit": 1000}, "1000 is greater than the maximum of 20"),
        ({"limit": 0}, "0 is less than the minimum of 1"),
        ({"limit": 10**12}, "is greater than the maximum of 20"),
        ({"offset": 100_000}, "'offset' was unexpected"),
        ({"order_by": "internal_note"}, "is not one of"),
        ({"order_by": "shop__owner__password"}, "is not one of"),
        ({"order_by": "?"}, "is not one of"),
        ({"filters": ["status", "paid"]}, "is not of type 'object'"),
        ({"cursor": "x" * 5000}, "is too long"),
    ],
)
def test_a_huge_page_or_an_unknown_order_is_refused_by_the_schema(
    alice: Tenant, orders: dict[str, Order], args: dict[str, Any], says: str
) -> None:
    text = refused(alice.scope, "order_list", args)
    assert text.startswith("Invalid arguments for tool 'order_list'")
    assert says in text


@pytest.mark.parametrize(
    "args, says",
    [
        ({"limit": 1000}, "limit: 1000 is not a number of rows from 1 to 20"),
        ({"limit": True}, "limit: True is not a number of rows"),
        ({"limit": "5"}, "limit: '5' is not a number of rows"),
        ({"order_by": "internal_note"}, "order_by: 'internal_note' is not an order"),
        ({"order_by": ["-pk"]}, "order_by: ['-pk'] is not an order"),
        ({"filters": ["status", "paid"]}, "filters must be an object"),
        ({"cursor": 12}, "cursor: not a cursor this tool gave"),
    ],
)
def test_the_tool_refuses_what_the_schema_refuses_by_itself(
    alice: Tenant, orders: dict[str, Order], args: dict[str, Any], says: str
) -> None:
    result = direct(alice.scope, "order_list", args)
    assert result.is_error
    assert result.content.startswith(says)


def forged(*parts: Any) -> str:
    data = json.dumps(list(parts)).encode()
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        "not base64 at all!",
        base64.urlsafe_b64encode(b"[1, 2").decode(),
        forged("total", "10.00", 1),  # another order's cursor
        forged("-placed_at", "yesterday", 1),
        forged("-placed_at", None, 1),
        forged("-placed_at", "2026-01-01T12:00:00+00:00", "1; DROP TABLE"),
        forged("-placed_at", "2026-01-01T12:00:00+00:00", 2**70),
        forged("-placed_at", "2026-01-01T12:00:00+00:00"),
        forged({"a": 1}, 2, 3),
        base64.urlsafe_b64encode(b"[" * 100_000).decode()[:1999],
    ],
)
def test_a_tampered_cursor_is_refused(
    alice: Tenant, orders: dict[str, Order], cursor: str
) -> None:
    text = refused(alice.scope, "order_list", {"cursor": cursor})
    assert text.startswith("cursor: not a cursor this tool gave for this order")


def test_a_forged_cursor_still_reads_only_the_scopes_rows(
    alice: Tenant, orders: dict[str, Order]
) -> None:
    # Bob's order as the position: the page after it is alice's rows only.
    b1 = orders["b1"]
    cursor = forged("-placed_at", "2999-01-01T00:00:00+00:00", b1.pk)

    page = ok(alice.scope, "order_list", {"cursor": cursor})

    assert numbers(page) == ["A-3", "A-2", "A-1"]


@pytest.mark.parametrize(
    "query", ["", "   ", "x" * 201, "\x00", {"q": 1}, ["a"], None, 5]
)
def test_a_bad_search_query_is_refused(
    alice: Tenant, orders: dict[str, Order], query: Any
) -> None:
    assert direct(alice.scope, "order_search", {"query": query}).is_error
    refused(alice.scope, "order_search", {"query": query})


def test_a_queryset_of_another_model_is_a_tool_error_not_a_crash(
    alice: Tenant, orders: dict[str, Order]
) -> None:
    text = refused(
        alice.scope, "order_list", {}, get_queryset=lambda scope: Order.objects.none
    )
    assert "get_queryset must return a QuerySet of shop.Order" in text
    text = refused(
        alice.scope, "order_list", {}, get_queryset=lambda s: Customer.objects.all()
    )
    assert "get_queryset must return a QuerySet of shop.Order" in text


def test_an_agent_without_a_scope_gets_an_error_not_every_row(
    orders: dict[str, Order],
) -> None:
    tool = tools_by_name()["order_list"]
    the_call = ToolCall(call_id="c1", name="order_list", arguments={})
    context = ToolContext(state=State(), agent_id=None, tool_call=the_call)

    result = asyncio.run(execute_tool_call(the_call, {tool.name: tool}, context))

    assert result.is_error
    assert "needs the caller's scope" in result.content


# Writes ---------------------------------------------------------------------------
def new_order(alice: Tenant, **changes: Any) -> dict[str, Any]:
    return {
        "number": "A-9",
        "total": "12.50",
        "product": Product.objects.get().pk,
        "customer": alice.customers[1].pk,
        **changes,
    }


def test_create_writes_a_row_in_the_callers_shop_through_full_clean(
    alice: Tenant,
) -> None:
    created = ok(alice.scope, "order_create", new_order(alice, details={"gift": 1}))

    row = Order.objects.get(number="A-9")
    assert created["created"]["id"] == row.pk
    assert created["created"]["customer__name"] == "alice customer 1"
    assert (row.shop, row.customer, row.total) == (
        alice.shop,
        alice.customers[1],
        Decimal("12.50"),
    )
    assert (row.status, row.quantity, row.details) == ("open", 1, {"gift": 1})


def test_create_and_update_take_long_text_up_to_the_field(alice: Tenant) -> None:
    note = "a long note " * 1000
    created = ok(alice.scope, "order_create", new_order(alice, note=note))

    key = created["created"]["id"]
    assert Order.objects.get(pk=key).note == note
    ok(alice.scope, "order_update", {"id": key, "values": {"note": note * 2}})
    assert Order.objects.get(pk=key).note == note * 2


@pytest.mark.parametrize(
    "changes, says",
    [
        ({"quantity": 5000}, "quantity: Ensure this value is less than or equal"),
        ({"status": "stolen"}, "status: Value 'stolen' is not a valid choice."),
        ({"paid": True, "total": "0"}, "A paid order needs a total above zero."),
        ({"number": "A-1"}, "Order with this Shop and Number already exists."),
        ({"number": ""}, "number: This field cannot be blank."),
        ({"total": "123456789.99"}, "total: 123456789.99 is out of the column's range"),
        ({"number": "N" * 21}, "number: the text is 21 characters; the limit is 20"),
        ({"total": "lots"}, "total: “lots” value must be a decimal number."),
    ],
)
def test_create_refuses_what_full_clean_refuses_and_saves_nothing(
    alice: Tenant, orders: dict[str, Order], changes: dict[str, Any], says: str
) -> None:
    before = Order.objects.count()

    result = direct(alice.scope, "order_create", new_order(alice, **changes))

    assert result.is_error
    assert says in result.content
    assert Order.objects.count() == before


def test_a_key_to_another_tenants_row_is_not_found_and_nothing_is_saved(
    alice: Tenant, bob: Tenant, orders: dict[str, Order]
) -> None:
    theirs = bob.customers[0].pk
    text = refused(alice.scope, "order_create", new_order(alice, customer=theirs))
    assert text == f"customer: no customer has id {theirs}."
    text = refused(alice.scope, "order_create", new_order(alice, customer=10**9))
    assert text == f"customer: no customer has id {10**9}."
    text = refused(
        alice.scope,
        "order_update",
        {"id": orders["a1"].pk, "values": {"customer": theirs}},
    )
    assert text == f"customer: no customer has id {theirs}."
    assert not Order.objects.filter(number="A-9").exists()
    assert Order.objects.get(pk=orders["a1"].pk).customer == alice.customers[0]


@pytest.mark.parametrize(
    "extra", [{"shop": 2}, {"internal_note": "x"}, {"id": 5}, {"shop_id": 2}]
)
def test_a_field_that_is_not_writable_is_refused(
    alice: Tenant, bob: Tenant, extra: dict[str, Any]
) -> None:
    args = new_order(alice, **extra)
    text = refused(alice.scope, "order_create", args)
    assert "was unexpected" in text
    result = direct(alice.scope, "order_create", args)
    assert result.is_error
    assert "is not a field you may write; fields you may write: number," in (
        result.content
    )
    assert not Order.objects.exists()


def test_a_write_that_would_leave_the_callers_rows_is_rolled_back(
    alice: Tenant, bob: Tenant, orders: dict[str, Order]
) -> None:
    # A site bug: new rows land in bob's shop. The row is saved, found outside
    # alice's queryset, and the transaction rolls back.
    wrong = order_tools(create_values=lambda scope: {"shop": bob.shop})
    is_error, text = call(alice.scope, "order_create", new_order(alice), wrong)

    assert is_error
    assert text == "Not saved: the order would not be one of yours afterwards."
    assert not Order.objects.filter(number="A-9").exists()

    # An update that takes the row out of what the site shows alice.
    unpaid = order_tools(
        get_queryset=lambda scope: Order.objects.filter(
            shop__owner=scope.user, paid=False
        )
    )
    a1 = orders["a1"]
    args = {"id": a1.pk, "values": {"paid": True, "note": "now paid"}}
    is_error, text = call(alice.scope, "order_update", args, unpaid)
    assert is_error
    assert text == "Not saved: the order would not be one of yours afterwards."
    a1.refresh_from_db()
    assert (a1.paid, a1.note) == (False, "")


def test_update_changes_the_given_fields_only(
    alice: Tenant, orders: dict[str, Order]
) -> None:
    a2 = orders["a2"]
    Order.objects.filter(pk=a2.pk).update(internal_note="keep me")

    updated = ok(
        alice.scope,
        "order_update",
        {"id": a2.pk, "values": {"status": "shipped", "customer": None}},
    )

    assert updated["updated"]["status"] == "shipped"
    a2.refresh_from_db()
    assert (a2.status, a2.customer, a2.internal_note, a2.note) == (
        "shipped",
        None,
        "keep me",
        "gift wrap please",
    )


def test_update_of_another_tenants_row_is_not_found_and_changes_nothing(
    alice: Tenant, orders: dict[str, Order]
) -> None:
    b1 = orders["b1"]

    text = refused(
        alice.scope, "order_update", {"id": b1.pk, "values": {"note": "mine now"}}
    )

    assert text == f"No order has id {b1.pk}."
    b1.refresh_from_db()
    assert b1.note == ""


@pytest.mark.parametrize(
    "args",
    [
        {"id": 1},
        {"id": 1, "values": {}},
        {"id": 1, "values": []},
        {"values": {"note": "x"}},
        {"id": 1, "values": {"details": {"bad": "\x00"}}},
        {"id": 1, "values": {"details": {"n": float("nan")}}},
        {"id": 1, "values": {"quantity": -1}},
        {"id": 1, "values": {"quantity": 2**80}},
        {"id": 1, "values": {"status": ["paid"]}},
    ],
)
def test_a_malformed_update_is_refused_and_changes_nothing(
    alice: Tenant, orders: dict[str, Order], args: dict[str, Any]
) -> None:
    args = {**args, "id": orders["a1"].pk} if "id" in args else args
    before = list(Order.objects.values())

    assert direct(alice.scope, "order_update", args).is_error
    refused(alice.scope, "order_update", args)

    assert list(Order.objects.values()) == before


# Approvals ------------------------------------------------------------------------
def agent_for(
    tenant: Tenant,
    llm: FakeOpenAIServer,
    tools: ModelTools,
    interrupt_on: dict[str, Any] | None,
) -> Agent:
    model = ChatModel(
        model=llm.model, params=dict(llm.model_params), transport="openai"
    )
    return Agent(
        model=model,
        tools=tools.tools(),
        interrupt_on=interrupt_on,
        replace_default_middleware=True,
        tool_context={"scope": tenant.scope},
    )


def test_interrupt_on_names_the_write_tools_with_the_sites_approval() -> None:
    assert order_tools().interrupt_on == {}
    assert order_tools(approval=True).interrupt_on == {
        "order_create": True,
        "order_update": True,
    }
    policy = {"allowed_decisions": ["approve", "reject"], "description": "Check it"}
    assert order_tools(approval=policy, operations=["get", "update"]).interrupt_on == {
        "order_update": policy
    }


@pytest.mark.parametrize(
    "decision, number",
    [
        ({"type": "approve"}, "A-9"),
        ({"type": "edit", "arguments": None}, "A-10"),
        ({"type": "reject", "message": "not today"}, None),
    ],
)
def test_a_write_that_needs_approval_waits_for_the_persons_decision(
    alice: Tenant, fake_llm: FakeOpenAIServer, decision: dict[str, Any], number: Any
) -> None:
    tools = order_tools(approval=True)
    agent = agent_for(alice, fake_llm, tools, tools.interrupt_on)
    args = new_order(alice)
    if decision["type"] == "edit":
        decision = {**decision, "arguments": {**args, "number": "A-10"}}
    fake_llm.script(
        reply(tool_calls=[tool_call("order_create", args, id="w1")]), reply("Done.")
    )

    paused = asyncio.run(agent.aexecute(["Record order A-9"]))
    assert paused.status == "interrupted", paused.error
    assert not Order.objects.exists()
    final = asyncio.run(agent.aresume(paused.state, [decision]))

    assert final.status == "completed", final.error
    assert list(Order.objects.values_list("number", flat=True)) == (
        [number] if number else []
    )
    result = final.state.messages[2].tool_results[0]
    assert result.is_error == (number is None)


def test_a_write_that_needs_approval_is_refused_when_the_site_forgot_interrupt_on(
    alice: Tenant, fake_llm: FakeOpenAIServer
) -> None:
    agent = agent_for(alice, fake_llm, order_tools(approval=True), None)
    fake_llm.script(
        reply(tool_calls=[tool_call("order_create", new_order(alice), id="w1")]),
        reply("It needs approval."),
    )

    final = asyncio.run(agent.aexecute(["Record order A-9"]))

    assert final.status == "completed", final.error
    result = final.state.messages[2].tool_results[0]
    assert result.is_error
    assert "needs a person's approval and none was given" in result.content
    assert not Order.objects.exists()
    assert direct(alice.scope, "order_create", new_order(alice), approval=True).is_error
    assert not Order.objects.exists()


def test_a_site_may_put_a_write_tool_in_interrupt_on_by_name(
    alice: Tenant, fake_llm: FakeOpenAIServer
) -> None:
    agent = agent_for(alice, fake_llm, order_tools(), {"order_create": True})
    fake_llm.script(
        reply(tool_calls=[tool_call("order_create", new_order(alice), id="w1")]),
        reply("Done."),
    )

    paused = asyncio.run(agent.aexecute(["Record order A-9"]))

    assert paused.status == "interrupted"
    assert not Order.objects.exists()
    asyncio.run(agent.aresume(paused.state, [{"type": "approve"}]))
    assert Order.objects.get().number == "A-9"


# The site's configuration ---------------------------------------------------------
def test_the_schema_offers_exactly_the_allowed_filters_orders_and_page_bound() -> None:
    tools = tools_by_name()
    listing = tools["order_list"].parameters
    filters = listing["properties"]["filters"]["properties"]

    assert set(filters) == {
        "number",
        "number__icontains",
        "status",
        "status__in",
        "total__gte",
        "total__lte",
        "paid",
        "placed_at__gte",
        "placed_at__lt",
        "reference",
        "customer",
        "customer__isnull",
        "customer__name__icontains",
    }
    assert filters["status"] == {
        "type": "string",
        "maxLength": 10,
        "enum": [
            "open",
            "paid",
            "shipped",
        ],
    }
    assert filters["status__in"]["maxItems"] == 100
    assert filters["number__icontains"] == {"type": "string", "maxLength": 1000}
    assert filters["customer__isnull"] == {"type": "boolean"}
    assert filters["placed_at__gte"]["format"] == "date-time"
    assert listing["properties"]["limit"]["maximum"] == 20
    assert listing["properties"]["order_by"]["enum"] == [
        "-placed_at",
        "placed_at",
        "total",
        "-total",
        "number",
        "-number",
        "id",
        "-id",
    ]
    assert listing["additionalProperties"] is False
    create = tools["order_create"].parameters
    assert create["required"] == ["number", "total", "product"]
    assert create["properties"]["customer"]["type"] == ["integer", "null"]
    assert [t.idempotent for t in tools.values()] == [True] * 4 + [False] * 2
    assert tools["order_get"].display_text == "Reading one order"


@pytest.mark.parametrize(
    "changes, says",
    [
        ({"fields": ["product__orders__total"]}, "a reverse or many-to-many"),
        ({"fields": ["shop__orders__number"]}, "a reverse or many-to-many"),
        ({"fields": ["orders"]}, "has no field path 'orders'"),
        ({"fields": ["shop__owner__groups__name"]}, "a reverse or many-to-many"),
        ({"fields": ["nope"]}, "shop.Order has no field path 'nope'"),
        ({"fields": "number"}, "fields must be a list of field names"),
        ({"fields": []}, "fields must name at least one field"),
        ({"lookups": {"internal_note": ["exact"]}}, "'internal_note' is not in"),
        ({"lookups": {"number": ["regex"]}}, "'regex' is refused"),
        ({"lookups": {"number": ["iregex"]}}, "'iregex' is refused"),
        ({"lookups": {"number": ["search"]}}, "'search' is not a lookup"),
        ({"lookups": {"placed_at": ["year"]}}, "'year' is not a lookup"),
        ({"lookups": {"total": ["icontains"]}}, "applies to text fields only"),
        ({"lookups": {"paid": ["gte"]}}, "means nothing on a boolean"),
        ({"lookups": {"details": ["exact"]}}, "a JSON field can only be tested"),
        ({"lookups": {"number": "exact"}}, "must be a list of lookups"),
        ({"ordering": ["customer"]}, "must be a non-null field of shop.Order"),
        ({"ordering": ["customer__name"]}, "must be a non-null field"),
        ({"ordering": ["internal_note"]}, "'internal_note' is not in fields"),
        ({"search_fields": ["total"]}, "'total' is not a text field"),
        ({"search_fields": ["internal_note"]}, "'internal_note' is not in fields"),
        ({"search_fields": []}, "the search operation needs search_fields"),
        ({"operations": ["list", "delete"]}, "operations ['delete'] are unknown"),
        ({"operations": "list"}, "operations must be a list"),
        ({"writable_fields": ["shop__name"]}, "must be a field of shop.Order"),
        ({"writable_fields": ["id"]}, "'id' is not editable"),
        ({"writable_fields": []}, "the create and update operations need"),
        ({"related_querysets": {}}, "give related_querysets['customer']"),
        (
            {"related_querysets": {"customer": len, "product": len, "shop": len}},
            "'shop'",
        ),
        ({"max_page_size": 201}, "max_page_size must be an integer from 1 to 200"),
        ({"page_size": 30}, "page_size must be an integer from 1 to max_page_size"),
        ({"count_limit": 0}, "count_limit must be an integer"),
        ({"name": "orders list!"}, "name must be letters, digits"),
        ({"approval": "yes"}, "interrupt_on['order'] must be True, False"),
        ({"get_queryset": None}, "needs a get_queryset(scope)"),
    ],
)
def test_a_configuration_that_could_leak_or_cannot_work_is_refused(
    changes: dict[str, Any], says: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        order_tools(**changes).tools()
    assert says in str(caught.value)


def test_nothing_is_checked_until_the_tools_are_asked_for() -> None:
    tools = ModelTools(Order, get_queryset=lambda scope: None, fields=["nope"])
    with pytest.raises(ConfigurationError):
        tools.tools()


# Permissions ----------------------------------------------------------------------
def test_permissions_true_gates_each_tool_by_the_models_own_permission(
    alice: Tenant, orders: dict[str, Order]
) -> None:
    from django.contrib.auth.models import Permission

    from sagents_django.core import Agent
    from sagents_django.core.testing import ScriptedModel
    from sagents_django.tool_access import ScopeToolAccess

    tools = order_tools(
        permissions=True, operations=["list", "get", "count", "create", "update"]
    )

    def offered() -> set[str]:
        agent = Agent(
            model=ScriptedModel([]),
            tools=tools.tools(),
            replace_default_middleware=True,
            tool_access=ScopeToolAccess(Scope.for_user(alice.user)),
        )
        return {t.name for t in agent.tools}

    assert tools.permission_for("list") == "shop.view_order"
    assert tools.permission_for("create") == "shop.add_order"
    assert tools.permission_for("update") == "shop.change_order"
    assert offered() == set()
    alice.user.user_permissions.add(Permission.objects.get(codename="view_order"))
    alice.user = get_user_model().objects.get(pk=alice.user.pk)  # Django caches perms
    assert offered() == {"order_list", "order_get", "order_count"}
    assert (
        order_tools(permissions={"list": "shop.view_order"}).permission_for("get")
        is None
    )


def test_a_sliced_queryset_from_the_site_is_a_configuration_error(
    alice: Tenant,
) -> None:
    from sagents_django.core import ConfigurationError

    tools = order_tools(get_queryset=lambda scope: Order.objects.all()[:5])
    with pytest.raises(ConfigurationError, match="must not slice"):
        tools.queryset(alice.scope)
