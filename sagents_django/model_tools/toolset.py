"""``ModelTools``: one model's tools (list, search, get, count, create, update).

Each call asks the site's ``get_queryset(scope)`` for the rows the caller may see
and works inside it; the model's default manager is never used to find a row, so a
crafted argument reaches nothing outside the queryset. The scope is the agent's
``tool_context["scope"]`` (what the generated factory sets). The functions are
synchronous, so the core runs them in a worker thread, where Django lets the ORM
run (it refuses queries on an event loop's thread); the connection a call opens is
closed after it, under Django's own rule, as the filesystem backends do.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from functools import cached_property
from typing import Any

from django.db import models
from django.db.models import QuerySet

from sagents_django.core.exceptions import ConfigurationError
from sagents_django.core.messages import ToolResult
from sagents_django.core.tools import Tool, ToolContext
from sagents_django.filesystems.threads import backend_call

from . import schemas
from .fields import Refusal
from .filters import Lookup
from .reads import count_rows, get_row, list_rows, search_rows
from .spec import WRITES, Call, Operation, Spec, compile_spec
from .writes import create_row, update_row

RUNS: dict[Operation, Callable[[Call], str]] = {
    "list": list_rows,
    "search": search_rows,
    "get": get_row,
    "count": count_rows,
    "create": create_row,
    "update": update_row,
}


@dataclass(frozen=True, eq=False)
class ModelTools:
    """Tools over ``model`` for an agent, inside the caller's queryset::

        orders = ModelTools(
            Order,
            get_queryset=lambda scope: Order.objects.filter(shop=shop_of(scope)),
            fields=["number", "status", "total", "placed_at", "customer__name"],
            lookups={"status": ["exact", "in"], "total": ["gte", "lte"]},
            ordering=["-placed_at", "total"],
        )
        Agent(..., tools=orders.tools(), tool_context={"scope": scope})

    The configuration is checked when ``tools()`` is first called (ConfigurationError
    naming the bad value); nothing happens at construction, so a module may build
    one at import time.
    """

    model: type[models.Model]
    _: KW_ONLY
    get_queryset: Callable[[Any], QuerySet[Any]]
    """The rows the scope may see and change: every call works inside them (a
    ``QuerySet`` of ``model``; ``none()`` for a scope that may see nothing)."""
    fields: Sequence[str]
    """What the agent reads: field names, or paths through foreign keys and
    one-to-one fields (``customer__name``). The primary key is always included."""
    name: str | None = None
    """The tools' prefix (``order`` gives ``order_list``...); the model's name."""
    description: str = ""
    """What these rows are, for the model; added to each tool's description."""
    lookups: Mapping[str, Sequence[Lookup]] = field(default_factory=dict)
    """The filters the agent may use: ``{path: [lookup, ...]}``, paths from
    ``fields`` (``exact``, ``icontains``, ``gte``, ``in``...; never regex)."""
    search_fields: Sequence[str] = ()
    """Text fields (from ``fields``) the search tool looks in."""
    ordering: Sequence[str] = ()
    """Non-null fields of the model the agent may order by (both ways); the first,
    with its sign, is the default order. The key is always allowed; with none given
    the default is newest key first."""
    operations: Collection[Operation] | None = None
    """The tools to make; None: list, get, count, and search when search_fields
    are given. create and update need ``writable_fields``."""
    page_size: int | None = None
    """Rows of a page when the model does not say (20, or max_page_size if less)."""
    max_page_size: int = 50
    """The most rows one page may hold (at most 200)."""
    count_limit: int = 10_000
    """The count tool counts this far and then answers "at least" (bounded work)."""
    writable_fields: Sequence[str] = ()
    """Fields of the model itself that create and update may set."""
    related_querysets: Mapping[str, Callable[[Any], QuerySet[Any]]] = field(
        default_factory=dict
    )
    """For each writable foreign key: ``scope -> QuerySet`` of the rows it may
    point at. A key outside it is "not found"."""
    create_values: Callable[[Any], Mapping[str, Any]] | None = None
    """``scope -> {field: value}`` set on every created row, never from the model
    (the tenant, the author)."""
    approval: bool | Mapping[str, Any] = False
    """Writes need a person's approval: True or an ``interrupt_on`` entry
    (``{"allowed_decisions": [...], "description": ...}``). Put ``interrupt_on``
    (this object's property) into the agent's; a write call that was not approved
    is refused, so a forgotten entry fails closed."""

    permissions: bool | Mapping[Operation, str | Sequence[str]] = False
    """The Django permissions each tool needs (``Tool(permission=...)``, checked by
    the agent's ``tool_access``): True for the model's own (``view_<model>`` to read,
    ``add_`` to create, ``change_`` to update), or ``{operation: permission}``;
    False: none beyond ``get_queryset``."""

    @cached_property
    def spec(self) -> Spec:
        """The checked configuration (ConfigurationError if it is not valid)."""
        return compile_spec(self)

    @property
    def interrupt_on(self) -> dict[str, Any]:
        """``{tool name: approval}`` for the write tools, to merge into the agent's
        ``interrupt_on`` (empty when ``approval`` is off)."""
        spec = self.spec
        if not spec.approval:
            return {}
        value = True if spec.approval is True else dict(spec.approval)
        return {spec.tool_name(o): value for o in spec.operations if o in WRITES}

    def tools(self) -> list[Tool]:
        """The ``Tool`` of each operation, in the order list, search, get, count,
        create, update."""
        spec = self.spec
        return [
            Tool(
                name=spec.tool_name(operation),
                description=schemas.description(spec, operation, self.description),
                function=self._function(RUNS[operation]),
                parameters=schemas.parameters(spec, operation),
                display_text=schemas.display_text(spec, operation),
                idempotent=operation not in WRITES,
                permission=self.permission_for(operation),
            )
            for operation in spec.operations
        ]

    def permission_for(self, operation: Operation) -> str | Sequence[str] | None:
        """The permission(s) ``operation``'s tool needs (``permissions``)."""
        if self.permissions is True:
            meta = self.model._meta
            action = {"create": "add", "update": "change"}.get(operation, "view")
            return f"{meta.app_label}.{action}_{meta.model_name}"
        if not self.permissions:
            return None
        return self.permissions.get(operation)

    def queryset(self, scope: Any) -> QuerySet[Any]:
        """The site's queryset for ``scope``, checked to be one of ``model``."""
        rows = self.get_queryset(scope)
        if not isinstance(rows, QuerySet) or rows.model is not self.model:
            raise ConfigurationError(
                f"get_queryset must return a QuerySet of {self.model._meta.label}, "
                f"not {rows!r}"
            )
        try:  # Django refuses to filter a sliced QuerySet (nothing is run here)
            rows.filter(pk__isnull=False)
        except TypeError:
            raise ConfigurationError(
                "get_queryset must not slice its QuerySet"
            ) from None
        return rows

    def _function(
        self, run: Callable[[Call], str]
    ) -> Callable[[dict[str, Any], ToolContext], Any]:
        spec = self.spec

        @backend_call
        def function(args: dict[str, Any], context: ToolContext) -> Any:
            if "scope" not in context.tool_context:
                return _error(
                    "This tool needs the caller's scope and the agent has none "
                    "(the site's factory passes tool_context={'scope': scope})."
                )
            scope = context.tool_context["scope"]
            try:
                call = Call(
                    spec=spec,
                    queryset=self.queryset(scope),
                    args=args,
                    scope=scope,
                    context=context,
                )
                return run(call)
            except Refusal as exc:
                return _error(str(exc))

        return function


def _error(text: str) -> ToolResult:
    # The core fills in the call's id and name.
    return ToolResult(tool_call_id="", name="", content=text, is_error=True)
