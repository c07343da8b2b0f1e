"""Filters the model may send: only the site's (field, lookup) pairs, scalar values.

The model writes filters as Django does, ``{"status": "paid", "total__gte": 100,
"customer__name__icontains": "smith"}``, but every key must be one the site listed:
a key is looked up whole, never split into a path the ORM would follow, so a field,
a relation or a transform the site did not name cannot be reached. Regular
expressions are refused even when a site lists them: a crafted pattern keeps the
database busy for as long as it likes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from django.db import models
from django.db.models import Q

from sagents_django.core.exceptions import ConfigurationError

from .fields import (
    MAX_TEXT_VALUE_CHARS,
    Column,
    Refusal,
    python_value,
    scalar,
    short,
    value_schema,
)

Lookup = Literal[
    "exact",
    "iexact",
    "contains",
    "icontains",
    "startswith",
    "istartswith",
    "endswith",
    "iendswith",
    "gt",
    "gte",
    "lt",
    "lte",
    "in",
    "isnull",
]
"""The lookups a site may allow on a field."""

LOOKUPS: frozenset[str] = frozenset(get_args(Lookup))
TEXT_LOOKUPS = frozenset(
    {"iexact", "contains", "icontains", "startswith", "istartswith"}
    | {"endswith", "iendswith"}
)
RANGE_LOOKUPS = frozenset({"gt", "gte", "lt", "lte"})
REFUSED_LOOKUPS = frozenset({"regex", "iregex"})

MAX_IN_VALUES = 100
"""Most values one ``in`` filter takes."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Filter:
    """One key the model may send: a column and a lookup."""

    key: str
    """What the model writes: ``status``, ``total__gte``."""
    column: Column
    lookup: str

    def schema(self) -> dict[str, Any]:
        if self.lookup == "isnull":
            return {"type": "boolean"}
        one = dict(value_schema(self.column.value_field) or {})
        if self.lookup in TEXT_LOOKUPS:
            one = {"type": "string", "maxLength": MAX_TEXT_VALUE_CHARS}
        if self.lookup == "in":
            return {"type": "array", "items": one, "maxItems": MAX_IN_VALUES}
        return one

    def q(self, value: Any) -> Q:
        """The condition for ``value``, or a Refusal the model reads."""
        where = f"filters.{self.key}"
        field = self.column.value_field
        if self.lookup == "isnull":
            if not isinstance(value, bool):
                raise Refusal(f"{where}: {short(value)} is not true or false")
            converted: Any = value
        elif self.lookup in TEXT_LOOKUPS:
            scalar(value, where)
            if not isinstance(value, str):
                raise Refusal(f"{where}: {short(value)} is not text")
            converted = value
        elif self.lookup == "in":
            if not isinstance(value, list) or len(value) > MAX_IN_VALUES:
                raise Refusal(
                    f"{where}: expected a list of at most {MAX_IN_VALUES} values"
                )
            converted = [
                python_value(field, item, f"{where}[{i}]")
                for i, item in enumerate(value)
            ]
        else:
            converted = python_value(field, value, where)
        return Q(**{f"{self.column.path}__{self.lookup}": converted})


def build_filters(
    columns: Mapping[str, Column],
    lookups: Mapping[str, Sequence[str]],
) -> dict[str, Filter]:
    """The filters a site allows, by the key the model writes; ConfigurationError
    for a lookup that is unknown, refused or meaningless on its field."""
    filters: dict[str, Filter] = {}
    for path, names in lookups.items():
        column = columns.get(path)
        if column is None:
            raise ConfigurationError(
                f"lookups: {path!r} is not in fields; a filter on a field the agent "
                "cannot read would reveal its values one guess at a time"
            )
        if isinstance(names, str) or not names:
            raise ConfigurationError(
                f"lookups[{path!r}] must be a list of lookups, not {names!r}"
            )
        for name in names:
            _check_lookup(column, name)
            key = path if name == "exact" else f"{path}__{name}"
            filters[key] = Filter(key=key, column=column, lookup=name)
    return filters


def _check_lookup(column: Column, name: Any) -> None:
    where = f"lookups[{column.path!r}]"
    if name in REFUSED_LOOKUPS:
        raise ConfigurationError(
            f"{where}: {name!r} is refused: a crafted regular expression can keep "
            "the database busy for minutes (use icontains, startswith...)"
        )
    if name not in LOOKUPS:
        raise ConfigurationError(
            f"{where}: {name!r} is not a lookup the agent may use; choose from "
            f"{sorted(LOOKUPS)}"
        )
    field = column.value_field
    if isinstance(field, models.JSONField) and name != "isnull":
        raise ConfigurationError(f"{where}: a JSON field can only be tested isnull")
    text = isinstance(field, models.CharField | models.TextField)
    if name in TEXT_LOOKUPS and not text:
        raise ConfigurationError(f"{where}: {name!r} applies to text fields only")
    if name in RANGE_LOOKUPS and isinstance(field, models.BooleanField):
        raise ConfigurationError(f"{where}: {name!r} means nothing on a boolean")


def parse(filters: Mapping[str, Filter], given: Any) -> Q:
    """The conditions of the model's ``filters`` argument."""
    if given is None:
        return Q()
    if not isinstance(given, dict):
        raise Refusal(f"filters must be an object, not {short(given)}")
    condition = Q()
    for key, value in given.items():
        allowed = filters.get(key)
        if allowed is None:
            raise Refusal(unknown_filter(filters, key))
        condition &= allowed.q(value)
    return condition


def unknown_filter(filters: Mapping[str, Filter], key: Any) -> str:
    lookup = str(key).rpartition("__")[2]
    if lookup in REFUSED_LOOKUPS:
        reason = "regular expressions are not allowed"
    else:
        reason = "it is not a filter you may use"
    offered = ", ".join(sorted(filters)) or "none"
    return f"filters: {short(key)}: {reason}. Filters you may use: {offered}."
