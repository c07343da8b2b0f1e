"""Pages of rows: keyset ordering, the cursor, and results within the size limit.

Why keyset, not offsets: the model reads on by passing back ``next_cursor``, which
holds the last row's ordering value and key; the next page is "rows after that
one", a range an index serves at any depth. An offset makes the database step over
every earlier row, so page 2,000 of a large table costs 2,000 pages of work
(bench/model_tools.py measures both). Ordering fields must be non-null columns of
the model itself, so that (value, key) orders every row exactly once.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from sagents_django.core.exceptions import ConfigurationError
from sagents_django.core.limits import MAX_TOOL_RESULT_CHARS

from .fields import Column, Refusal, in_range, to_json

MAX_CURSOR_CHARS = 2000
"""Longest cursor the model may send back (ours are far shorter)."""

RESULT_BUDGET = MAX_TOOL_RESULT_CHARS - 2000
"""Characters of rows in one result: room is left for the page's other keys."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Ordering:
    """One order the model may ask for: a column, ascending or descending."""

    name: str
    """What the model writes: ``placed_at``, ``-placed_at``."""
    field: models.Field[Any, Any]
    descending: bool

    def order_by(self, pk: models.Field[Any, Any]) -> list[str]:
        sign = "-" if self.descending else ""
        if self.field is pk:
            return [f"{sign}pk"]
        return [f"{sign}{self.field.attname}", f"{sign}pk"]

    def after(self, pk: models.Field[Any, Any], value: Any, key: Any) -> Q:
        """Rows after (value, key) in this order: a range first, so that an index
        on (field, key) is scanned from the cursor on, then the tie on the key."""
        past, beyond = ("lt", "lte") if self.descending else ("gt", "gte")
        if self.field is pk:
            return Q(**{f"pk__{past}": key})
        name = self.field.attname
        return Q(**{f"{name}__{beyond}": value}) & (
            Q(**{f"{name}__{past}": value}) | Q(**{f"pk__{past}": key})
        )


def build_orderings(
    model: type[models.Model],
    columns: Mapping[str, Column],
    ordering: Sequence[str],
) -> dict[str, Ordering]:
    """Every order the model may ask for (the first is the default), by name."""
    pk = model._meta.pk
    assert pk is not None
    names = [*ordering] or [f"-{pk.name}"]
    orderings: dict[str, Ordering] = {}
    for given in names:
        if not isinstance(given, str):
            raise ConfigurationError(f"ordering must name fields, not {given!r}")
        path = given.removeprefix("-")
        column = columns.get(path)
        if column is None:
            raise ConfigurationError(
                f"ordering: {path!r} is not in fields (the order of rows reveals "
                "the values of the field they are ordered by)"
            )
        field = column.field
        if not column.own or field.is_relation or field.null:
            raise ConfigurationError(
                f"ordering: {path!r} must be a non-null field of "
                f"{model._meta.label} itself (pages continue from the last row's "
                "value, which must order every row exactly once)"
            )
        first = f"-{path}" if given.startswith("-") else path
        for name in (first, path if first != path else f"-{path}"):
            orderings.setdefault(
                name,
                Ordering(name=name, field=field, descending=name.startswith("-")),
            )
    for name in (pk.name, f"-{pk.name}"):
        orderings.setdefault(
            name, Ordering(name=name, field=pk, descending=name.startswith("-"))
        )
    return orderings


def encode_cursor(ordering: Ordering, row: Mapping[str, Any], pk_name: str) -> str:
    value = to_json(row[ordering.field.name])
    data = json.dumps([ordering.name, value, to_json(row[pk_name])])
    return base64.urlsafe_b64encode(data.encode()).decode().rstrip("=")


def decode_cursor(
    text: Any, ordering: Ordering, pk: models.Field[Any, Any]
) -> tuple[Any, Any]:
    """The (value, key) a cursor continues after, or a Refusal."""
    bad = Refusal(
        "cursor: not a cursor this tool gave for this order; pass next_cursor "
        "from the previous page unchanged, with the same order_by (or no cursor "
        "to start again)"
    )
    if not isinstance(text, str) or len(text) > MAX_CURSOR_CHARS:
        raise bad
    try:
        padded = text + "=" * (-len(text) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (ValueError, binascii.Error, UnicodeError, RecursionError):
        raise bad from None
    if not isinstance(data, list) or len(data) != 3 or data[0] != ordering.name:
        raise bad
    try:
        value = ordering.field.to_python(data[1])
        key = pk.to_python(data[2])
    except (ValidationError, TypeError, ValueError):
        raise bad from None
    if value is None or key is None:
        raise bad
    if not in_range(ordering.field, value) or not in_range(pk, key):
        raise bad
    return value, key


def cut_text(value: Any, limit: int, hint: str) -> Any:
    """A long string cut to ``limit`` characters, saying so."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]}... [{len(value) - limit} more characters{hint}]"
    return value


def jsonable_row(
    row: Mapping[str, Any], *, text_limit: int, hint: str = ""
) -> dict[str, Any]:
    return {k: cut_text(to_json(v), text_limit, hint) for k, v in row.items()}


def fit(rows: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The leading rows whose JSON fits the result budget, and the size used."""
    kept: list[dict[str, Any]] = []
    used = 0
    for row in rows:
        size = len(json.dumps(row, ensure_ascii=False, default=str)) + 2
        if used + size > RESULT_BUDGET and kept:
            break
        kept.append(row)
        used += size
    return kept, used
