"""Keyset pagination with Django's public API: "the rows past this sort key".

Both kinds of cursor (conversation lists, display messages) page by comparing the
sort key of each row with the key of the last row seen, a row-value comparison
``(a, b, c) < (x, y, z)``. It is written out here as the equivalent ``Q`` tree,
``a < x OR (a = x AND (b < y OR (b = y AND c < z)))``, which is also what Django
itself sends to backends without row values: the same SQL on every database, and
only documented ``filter`` lookups. A redundant bound on the leading column
(``a <= x``) gives the planner an index range to start from, so a page deep in a
long list still reads about one page of the index.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import Q


def beyond(fields: Sequence[str], key: Sequence[Any], *, descending: bool) -> Q:
    """Rows strictly past ``key`` when ordered by ``fields``: after it in ascending
    order, before it when ``descending``. ``fields`` and ``key`` pair up in order."""
    if not fields or len(fields) != len(key):
        raise ValueError(f"{len(key)} key values for the fields {list(fields)!r}")
    strict = "lt" if descending else "gt"
    condition = Q(**{f"{fields[-1]}__{strict}": key[-1]})
    for field, value in zip(reversed(fields[:-1]), reversed(key[:-1]), strict=True):
        condition = Q(**{f"{field}__{strict}": value}) | (
            Q(**{field: value}) & condition
        )
    bound = Q(**{f"{fields[0]}__{'lte' if descending else 'gte'}": key[0]})
    return bound & condition
