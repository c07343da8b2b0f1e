"""list, search, get and count: reads over the scope's queryset, each a bounded
query (a page of ``limit + 1`` rows, one row, or a count that stops at a limit)."""

from __future__ import annotations

import json
from typing import Any

from django.db.models import Q, QuerySet

from .fields import Refusal, python_value, scalar, short
from .filters import parse
from .pages import decode_cursor, encode_cursor, fit, jsonable_row
from .schemas import MAX_QUERY_CHARS
from .spec import Call, Spec

LIST_TEXT_CHARS = 300
"""Characters of a text value a page shows (``get`` shows more)."""
GET_TEXT_CHARS = 20_000
"""Characters of a text value ``get`` shows."""


def list_rows(call: Call) -> str:
    return _page(call, Q())


def search_rows(call: Call) -> str:
    query = call.args.get("query")
    scalar(query, "query", limit=MAX_QUERY_CHARS)
    if not isinstance(query, str) or not query.strip():
        raise Refusal("query: give the text to look for")
    matches = Q()
    for column in call.spec.search:
        matches |= Q(**{f"{column.path}__icontains": query.strip()})
    return _page(call, matches)


def _page(call: Call, matches: Q) -> str:
    spec, args = call.spec, call.args
    limit = args.get("limit", spec.page_size)
    if type(limit) is not int or not 1 <= limit <= spec.max_page_size:
        raise Refusal(
            f"limit: {short(limit)} is not a number of rows from 1 to "
            f"{spec.max_page_size}"
        )
    order_name = args.get("order_by", spec.default_ordering.name)
    ordering = spec.orderings.get(order_name) if isinstance(order_name, str) else None
    if ordering is None:
        raise Refusal(
            f"order_by: {short(order_name)} is not an order you may use; choose "
            f"from {', '.join(spec.orderings)}"
        )
    rows = call.queryset.filter(parse(spec.filters, args.get("filters")))
    rows = rows.filter(matches)
    cursor = args.get("cursor")
    if cursor is not None:
        value, key = decode_cursor(cursor, ordering, spec.pk)
        rows = rows.filter(ordering.after(spec.pk, value, key))
    found = list(
        rows.order_by(*ordering.order_by(spec.pk)).values(*spec.paths)[: limit + 1]
    )
    more = len(found) > limit
    found = found[:limit]
    hint = f"; {spec.tool_name('get')} shows all" if "get" in spec.operations else ""
    shown, _ = fit(
        [jsonable_row(r, text_limit=LIST_TEXT_CHARS, hint=hint) for r in found]
    )
    page: dict[str, Any] = {"results": shown, "next_cursor": None}
    if shown and (more or len(shown) < len(found)):
        page["next_cursor"] = encode_cursor(
            ordering, found[len(shown) - 1], spec.pk.name
        )
    if len(shown) < len(found):
        page["note"] = (
            f"{len(found) - len(shown)} more rows of this page did not fit in the "
            "result; read on with next_cursor."
        )
    return json.dumps(page, ensure_ascii=False)


def get_row(call: Call) -> str:
    spec, key = call.spec, call.args.get("id")
    row = find(spec, call.queryset, key).values(*spec.paths).first()
    if row is None:
        raise not_found(spec, key)
    return json.dumps(jsonable_row(row, text_limit=GET_TEXT_CHARS), ensure_ascii=False)


def count_rows(call: Call) -> str:
    spec = call.spec
    rows = call.queryset.filter(parse(spec.filters, call.args.get("filters")))
    rows = rows.order_by()
    # A sliced count reads at most count_limit + 1 rows, whatever the table holds.
    count = rows[: spec.count_limit + 1].count()
    if count > spec.count_limit:
        return json.dumps({"count": spec.count_limit, "at_least": True})
    return json.dumps({"count": count})


def find(spec: Spec, queryset: QuerySet[Any], key: Any) -> QuerySet[Any]:
    """The row ``key`` names inside ``queryset`` (empty for a key of no row: one
    answer for a missing row, another tenant's row and a malformed key)."""
    try:
        value = python_value(spec.pk, key, "id")
    except Refusal:
        return queryset.none()
    return queryset.filter(pk=value)


def not_found(spec: Spec, key: Any) -> Refusal:
    return Refusal(f"No {spec.verbose} has {spec.pk.name} {short(key)}.")
