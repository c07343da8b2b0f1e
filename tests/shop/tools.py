"""The shop's ORM tools, configured as a site would: a user reads and writes his
own shop's orders; customers must be his shop's; products come from the shared
catalogue.

The querysets filter by the tenant's key (the shop's id, found first), not through
a join (``shop__owner=user``): with a constant ``shop_id`` the index on (shop,
placed_at, id) serves a page in order, where a join makes the database sort every
row of the tenant for each page (bench/model_tools.py shows both).
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from sagents_django.model_tools import ModelTools
from tests.shop.models import Customer, Order, Product, Shop


def shop_of(scope: Any) -> int | None:
    """The id of the scope's shop (None: it has none)."""
    if not scope.is_authenticated:
        return None
    return Shop.objects.filter(owner=scope.user).values_list("pk", flat=True).first()


def orders_of(scope: Any) -> QuerySet[Order]:
    shop = shop_of(scope)
    return Order.objects.none() if shop is None else Order.objects.filter(shop=shop)


def customers_of(scope: Any) -> QuerySet[Customer]:
    shop = shop_of(scope)
    if shop is None:
        return Customer.objects.none()
    return Customer.objects.filter(shop=shop)


def products(scope: Any) -> QuerySet[Product]:
    return Product.objects.all()


def own_shop(scope: Any) -> dict[str, Any]:
    return {"shop": Shop.objects.get(owner=scope.user)}


ORDERS: dict[str, Any] = {
    "get_queryset": orders_of,
    "fields": [
        "number",
        "status",
        "quantity",
        "total",
        "paid",
        "placed_at",
        "reference",
        "note",
        "details",
        "customer",
        "customer__name",
        "product",
    ],
    "lookups": {
        "number": ["exact", "icontains"],
        "status": ["exact", "in"],
        "total": ["gte", "lte"],
        "paid": ["exact"],
        "placed_at": ["gte", "lt"],
        "reference": ["exact"],
        "customer": ["exact", "isnull"],
        "customer__name": ["icontains"],
    },
    "search_fields": ["number", "note", "customer__name"],
    "ordering": ["-placed_at", "total", "number"],
    "max_page_size": 20,
    "page_size": 10,
    "count_limit": 50,
    "operations": ["list", "search", "get", "count", "create", "update"],
    "writable_fields": [
        "number",
        "status",
        "quantity",
        "total",
        "paid",
        "note",
        "details",
        "customer",
        "product",
    ],
    "related_querysets": {"customer": customers_of, "product": products},
    "create_values": own_shop,
    "description": "Orders of the user's shop.",
}


def order_tools(**changes: Any) -> ModelTools:
    return ModelTools(Order, **{**ORDERS, **changes})
