"""A ``ModelTools`` configuration checked once and compiled: every rule a site's
configuration must follow is here, each a ``ConfigurationError`` naming the value."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from django.db import models
from django.db.models import QuerySet

from sagents_django.core.exceptions import ConfigurationError
from sagents_django.core.middleware.human_in_the_loop import normalize_interrupt_on
from sagents_django.core.tools import ToolContext

from .fields import Column, resolve
from .filters import Filter, build_filters
from .pages import Ordering, build_orderings

Operation = Literal["list", "search", "get", "count", "create", "update"]
"""What a tool of a ``ModelTools`` does; its name is ``<name>_<operation>``."""

OPERATIONS: tuple[Operation, ...] = get_args(Operation)
WRITES: tuple[Operation, ...] = ("create", "update")

MAX_PAGE_SIZE = 200
"""The most rows a site may let one page hold."""
MAX_COUNT_LIMIT = 1_000_000
"""The most rows a count may count exactly (it reads each of them)."""

_NAME = re.compile(r"[a-zA-Z][a-zA-Z0-9_-]{0,50}")


@dataclass(frozen=True, kw_only=True, slots=True)
class Spec:
    """What the tools of one ``ModelTools`` run on."""

    model: type[models.Model]
    name: str
    pk: models.Field[Any, Any]
    columns: dict[str, Column]
    """Every exposed path, the key first."""
    filters: dict[str, Filter]
    orderings: dict[str, Ordering]
    """Every order the model may ask for; the first is the default."""
    search: tuple[Column, ...]
    operations: tuple[Operation, ...]
    writable: dict[str, models.Field[Any, Any]]
    related: dict[str, Callable[[Any], Any]]
    """The queryset a writable foreign key's value must be found in, by field."""
    create_values: Callable[[Any], Mapping[str, Any]] | None
    page_size: int
    max_page_size: int
    count_limit: int
    approval: Any

    @property
    def verbose(self) -> str:
        return str(self.model._meta.verbose_name)

    @property
    def plural(self) -> str:
        return str(self.model._meta.verbose_name_plural)

    @property
    def paths(self) -> list[str]:
        return list(self.columns)

    @property
    def default_ordering(self) -> Ordering:
        return next(iter(self.orderings.values()))

    def tool_name(self, operation: Operation) -> str:
        return f"{self.name}_{operation}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Call:
    """One call of a tool: what it works on, and for whom."""

    spec: Spec
    queryset: QuerySet[Any]
    """The site's rows for the scope: everything the call reads or writes."""
    args: dict[str, Any]
    scope: Any
    context: ToolContext


def compile_spec(tools: Any) -> Spec:
    """Check the configuration of ``tools`` (a ``ModelTools``) and compile it."""
    model = tools.model
    if not (isinstance(model, type) and issubclass(model, models.Model)):
        raise ConfigurationError(f"ModelTools needs a model class, not {model!r}")
    if model._meta.abstract:
        raise ConfigurationError(f"{model.__name__} is abstract: it has no rows")
    label = model._meta.label
    if not callable(tools.get_queryset):
        raise ConfigurationError(f"ModelTools({label}) needs a get_queryset(scope)")
    name = tools.name or model._meta.model_name
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigurationError(
            f"ModelTools({label}) name must be letters, digits, _ or - (at most 51, "
            f"a letter first): tool names are built from it; not {name!r}"
        )
    pk = model._meta.pk
    assert pk is not None
    columns = _columns(model, tools.fields)
    operations = _operations(tools, label)
    page_size, max_page_size = _page_sizes(tools, label)
    count_limit = tools.count_limit
    if type(count_limit) is not int or not 1 <= count_limit <= MAX_COUNT_LIMIT:
        raise ConfigurationError(
            f"count_limit must be an integer from 1 to {MAX_COUNT_LIMIT}, not "
            f"{count_limit!r}"
        )
    writable = _writable(model, tools.writable_fields, operations)
    related = _related(model, writable, tools.related_querysets)
    if tools.approval:
        if not set(operations) & set(WRITES):
            raise ConfigurationError("approval applies to create and update only")
        approval = tools.approval
        if isinstance(approval, Mapping):
            approval = dict(approval)
        normalize_interrupt_on({name: approval})  # raises when malformed
    return Spec(
        model=model,
        name=name,
        pk=pk,
        columns=columns,
        filters=build_filters(columns, dict(tools.lookups)),
        orderings=build_orderings(model, columns, list(tools.ordering)),
        search=_search(columns, tools.search_fields, operations),
        operations=operations,
        writable=writable,
        related=related,
        create_values=_create_values(tools.create_values),
        page_size=page_size,
        max_page_size=max_page_size,
        count_limit=count_limit,
        approval=tools.approval,
    )


def _create_values(given: Any) -> Callable[[Any], Mapping[str, Any]] | None:
    if given is not None and not callable(given):
        raise ConfigurationError(
            f"create_values must be a function of the scope, not {given!r}"
        )
    return given


def _names(value: Any, what: str) -> list[str]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ConfigurationError(f"{what} must be a list of field names, not {value!r}")
    return list(dict.fromkeys(value))


def _columns(model: type[models.Model], fields: Any) -> dict[str, Column]:
    names = _names(fields, "fields")
    if not names:
        raise ConfigurationError("fields must name at least one field")
    pk = model._meta.pk
    assert pk is not None
    columns = {pk.name: resolve(model, pk.name, what="fields")}
    for path in names:
        if path == "pk":
            continue
        columns[path] = resolve(model, path, what="fields")
    return columns


def _operations(tools: Any, label: str) -> tuple[Operation, ...]:
    given = tools.operations
    if given is None:
        given = ["list", "get", "count", *(["search"] if tools.search_fields else [])]
    if isinstance(given, str) or not isinstance(given, Collection) or not given:
        raise ConfigurationError(
            f"operations must be a list of {list(OPERATIONS)}, not {given!r}"
        )
    unknown = [o for o in given if o not in OPERATIONS]
    if unknown:
        raise ConfigurationError(
            f"ModelTools({label}) operations {unknown!r} are unknown; choose from "
            f"{list(OPERATIONS)}"
        )
    return tuple(o for o in OPERATIONS if o in given)


def _page_sizes(tools: Any, label: str) -> tuple[int, int]:
    largest = tools.max_page_size
    if type(largest) is not int or not 1 <= largest <= MAX_PAGE_SIZE:
        raise ConfigurationError(
            f"max_page_size must be an integer from 1 to {MAX_PAGE_SIZE}, not "
            f"{largest!r}"
        )
    size = tools.page_size if tools.page_size is not None else min(20, largest)
    if type(size) is not int or not 1 <= size <= largest:
        raise ConfigurationError(
            f"page_size must be an integer from 1 to max_page_size ({largest}), not "
            f"{size!r}"
        )
    return size, largest


def _search(
    columns: dict[str, Column], search_fields: Any, operations: Sequence[str]
) -> tuple[Column, ...]:
    names = _names(search_fields, "search_fields")
    if "search" in operations and not names:
        raise ConfigurationError("the search operation needs search_fields")
    found = []
    for path in names:
        column = columns.get(path)
        if column is None:
            raise ConfigurationError(
                f"search_fields: {path!r} is not in fields (a search on a field "
                "the agent cannot read would reveal its values)"
            )
        if not isinstance(column.field, models.CharField | models.TextField):
            raise ConfigurationError(f"search_fields: {path!r} is not a text field")
        found.append(column)
    return tuple(found)


def _writable(
    model: type[models.Model], writable_fields: Any, operations: Sequence[str]
) -> dict[str, models.Field[Any, Any]]:
    names = _names(writable_fields, "writable_fields")
    writes = [o for o in operations if o in WRITES]
    if writes and not names:
        raise ConfigurationError(
            f"the {' and '.join(writes)} operations need writable_fields"
        )
    writable: dict[str, models.Field[Any, Any]] = {}
    for name in names:
        if not isinstance(name, str) or "__" in name:
            raise ConfigurationError(
                f"writable_fields: {name!r} must be a field of "
                f"{model._meta.label} itself"
            )
        field = resolve(model, name, what="writable_fields").field
        if field.primary_key or not field.editable or field.auto_created:
            raise ConfigurationError(
                f"writable_fields: {name!r} is not editable (a key, an automatic "
                "or a non-editable field)"
            )
        if isinstance(field, models.FileField):  # resolve refused other kinds
            raise ConfigurationError(f"writable_fields: {name!r} cannot be written")
        writable[name] = field
    return writable


def _related(
    model: type[models.Model],
    writable: dict[str, models.Field[Any, Any]],
    related_querysets: Mapping[str, Any],
) -> dict[str, Callable[[Any], Any]]:
    related = dict(related_querysets)
    for name, field in writable.items():
        if field.is_relation and not callable(related.get(name)):
            raise ConfigurationError(
                f"writable_fields: {name!r} is a relation; give related_querysets"
                f"[{name!r}] = a function of the scope returning the rows it may "
                "point at (else the agent could point it at another tenant's row)"
            )
    extra = set(related) - {n for n, f in writable.items() if f.is_relation}
    if extra:
        raise ConfigurationError(
            f"related_querysets names {sorted(extra)!r}, which are not writable "
            f"relations of {model._meta.label}"
        )
    return related
