"""What the model reads about each tool: its description and its arguments' schema.

The schema is exact (the allowed filters with their value types, the orders, the
page bound), so most bad arguments are refused by the core's validation with a
message naming the argument; the tool functions check again (``filters``,
``pages``), so nothing depends on the schema alone.
"""

from __future__ import annotations

from typing import Any

from .fields import (
    MAX_TEXT_VALUE_CHARS,
    nullable,
    related_model,
    value_field,
    value_schema,
)
from .pages import MAX_CURSOR_CHARS
from .spec import Operation, Spec

MAX_QUERY_CHARS = 200
"""Longest search text."""


def parameters(spec: Spec, operation: Operation) -> dict[str, Any]:
    properties: dict[str, Any]
    required: list[str] = []
    if operation in ("list", "search"):
        properties = {
            "filters": filters_schema(spec),
            "order_by": {
                "type": "string",
                "enum": list(spec.orderings),
                "description": f"default {spec.default_ordering.name}; a leading "
                "- means descending",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": spec.max_page_size,
                "description": f"rows per page (default {spec.page_size})",
            },
            "cursor": {
                "type": "string",
                "maxLength": MAX_CURSOR_CHARS,
                "description": "next_cursor from the previous page, to read on",
            },
        }
        if operation == "search":
            properties = {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_QUERY_CHARS,
                    "description": "text to look for (case-insensitive) in "
                    + ", ".join(c.path for c in spec.search),
                },
                **properties,
            }
            required = ["query"]
    elif operation == "count":
        properties = {"filters": filters_schema(spec)}
    elif operation == "get":
        properties = {"id": key_schema(spec)}
        required = ["id"]
    elif operation == "create":
        properties = values_schema(spec)
        required = [
            name
            for name, field in spec.writable.items()
            if not field.blank and not field.has_default()
        ]
    else:
        properties = {
            "id": key_schema(spec),
            "values": {
                "type": "object",
                "properties": values_schema(spec),
                "minProperties": 1,
                "additionalProperties": False,
                "description": "the fields to change, and their new values",
            },
        }
        required = ["id", "values"]
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = required
    return schema


def filters_schema(spec: Spec) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {key: f.schema() for key, f in spec.filters.items()},
        "description": "conditions that all must hold, as Django writes them "
        f"(field or field__lookup); text values at most {MAX_TEXT_VALUE_CHARS} "
        "characters",
    }


def key_schema(spec: Spec) -> dict[str, Any]:
    return {
        **(value_schema(spec.pk) or {}),
        "description": f"the {spec.verbose}'s {spec.pk.name}",
    }


def values_schema(spec: Spec) -> dict[str, Any]:
    properties = {}
    for name, field in spec.writable.items():
        schema = dict(value_schema(value_field(field)) or {})
        if field.is_relation:
            target = related_model(field)._meta.verbose_name
            schema["description"] = f"the {target}'s id"
        if field.null:
            schema = nullable(schema)
        properties[name] = schema
    return properties


def description(spec: Spec, operation: Operation, summary: str) -> str:
    """The tool's description: what it does, then the site's ``summary``."""
    plural, verbose = spec.plural, spec.verbose
    fields = ", ".join(spec.columns)
    paging = (
        f"A page holds at most {spec.max_page_size} rows; pass next_cursor back as "
        "cursor to read the next page."
    )
    text = {
        "list": f"List {plural}, filtered and ordered. {paging} Fields: {fields}.",
        "search": f"Search {plural} whose "
        f"{' or '.join(c.path for c in spec.search)} contain the query text "
        f"(case-insensitive). {paging} Fields: {fields}.",
        "get": f"Read one {verbose} by its {spec.pk.name}, with every field: {fields}.",
        "count": f"Count the {plural} that match the filters (exactly up to "
        f"{spec.count_limit}; beyond that, 'at least').",
        "create": f"Create one {verbose} with: {', '.join(spec.writable)}.",
        "update": f"Change fields of one {verbose}: {', '.join(spec.writable)}.",
    }[operation]
    if operation in ("list", "search", "count"):
        offered = ", ".join(spec.filters) or "none"
        text += f" Filters: {offered}."
    if operation in ("create", "update") and spec.approval:
        text += " A person approves each call before it runs."
    return f"{text} {summary}".strip()


def display_text(spec: Spec, operation: Operation) -> str:
    return {
        "list": f"Listing {spec.plural}",
        "search": f"Searching {spec.plural}",
        "get": f"Reading one {spec.verbose}",
        "count": f"Counting {spec.plural}",
        "create": f"Creating one {spec.verbose}",
        "update": f"Updating one {spec.verbose}",
    }[operation]
