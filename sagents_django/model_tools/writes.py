"""create and update: only the writable fields, validated by ``full_clean()``, in
one transaction that also checks the row is still the caller's.

A write runs in ``transaction.atomic``: the row is saved, then looked up again
through the scope's queryset, and a row the caller could not see (a value that
moves it to another tenant, or out of what the site shows) rolls the write back.
A related row is looked up in the queryset the site gives for that relation, so a
key can never point at another tenant's row. What the model sends is checked field
by field before anything is saved; a failure at any point leaves nothing written.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import IntegrityError, models, transaction
from django.db.models import QuerySet

from sagents_django.core.approvals import Approve, Edit
from sagents_django.core.exceptions import ConfigurationError
from sagents_django.core.filesystem.errors import InvalidEntry
from sagents_django.core.limits import MAX_ARGUMENT_CHARS
from sagents_django.core.tools import ToolContext
from sagents_django.filesystems.encoding import check_json

from .fields import (
    Refusal,
    python_value,
    related_model,
    short,
    value_field,
)
from .pages import jsonable_row
from .reads import GET_TEXT_CHARS, find, not_found
from .spec import Call, Spec

MAX_ERRORS = 10
"""Validation messages a refused write lists."""


def create_row(call: Call) -> str:
    """A new row of the writable arguments and the site's ``create_values``."""
    spec, queryset, scope = call.spec, call.queryset, call.scope
    check_approval(spec, call.context)
    fixed = dict(spec.create_values(scope)) if spec.create_values else {}
    values = _values(spec, call.args, scope)
    with _atomic(spec, queryset):
        row = spec.model(**{**values, **fixed})
        _clean(row, exclude=None)
        row.save(force_insert=True)
        return json.dumps(
            {"created": _visible(spec, queryset, row)}, ensure_ascii=False
        )


def update_row(call: Call) -> str:
    """The row ``id`` with ``values`` written."""
    spec, queryset = call.spec, call.queryset
    check_approval(spec, call.context)
    given = call.args.get("values")
    if not isinstance(given, dict) or not given:
        raise Refusal("values: give the fields to change and their new values")
    key = call.args.get("id")
    values = _values(spec, given, call.scope)
    with _atomic(spec, queryset):
        row = find(spec, queryset, key).first()
        if row is None:
            raise not_found(spec, key)
        for name, value in values.items():
            setattr(row, name, value)
        written = {spec.writable[name].name for name in values}
        others = [f.name for f in spec.model._meta.fields if f.name not in written]
        _clean(row, exclude=others)
        row.save(update_fields=sorted(written))
        return json.dumps(
            {"updated": _visible(spec, queryset, row)}, ensure_ascii=False
        )


def check_approval(spec: Spec, context: ToolContext) -> None:
    """Refuse a write the site wants approved when no person approved this call
    (the site did not put the tool in ``interrupt_on``, or its policy let it by)."""
    if not spec.approval:
        return
    execution, call = context.execution, context.tool_call
    decisions = getattr(execution, "tool_decisions", None) or {}
    decision = decisions.get(call.call_id) if call is not None else None
    if not isinstance(decision, Approve | Edit):
        raise Refusal(
            "This change needs a person's approval and none was given, so nothing "
            "was written (the site must list the tool in interrupt_on: "
            "ModelTools.interrupt_on)."
        )


def _values(spec: Spec, given: Mapping[str, Any], scope: Any) -> dict[str, Any]:
    """The model's values as the fields take them; related rows found in scope."""
    values: dict[str, Any] = {}
    for name, value in given.items():
        field = spec.writable.get(name)
        if field is None:
            raise Refusal(
                f"{short(name)} is not a field you may write; fields you may "
                f"write: {', '.join(spec.writable)}."
            )
        if value is None:
            values[name] = None  # full_clean says whether the field takes it
        elif field.is_relation:
            values[name] = _related_row(spec, name, field, value, scope)
        elif isinstance(field, models.JSONField):
            values[name] = _json_value(value, name)
        else:
            limit = field.max_length or MAX_ARGUMENT_CHARS
            values[name] = python_value(field, value, name, limit=limit)
    return values


def _related_row(
    spec: Spec, name: str, field: models.Field[Any, Any], key: Any, scope: Any
) -> models.Model:
    target = value_field(field)
    related = related_model(field)
    rows = spec.related[name](scope)
    if not isinstance(rows, QuerySet) or rows.model is not related:
        raise ConfigurationError(
            f"related_querysets[{name!r}] must return a QuerySet of "
            f"{related._meta.label}, not {rows!r}"
        )
    missing = Refusal(f"{name}: no {related._meta.verbose_name} has id {short(key)}.")
    try:
        value = python_value(target, key, name)
    except Refusal:
        raise missing from None
    found = rows.filter(**{target.attname: value}).first()
    if found is None:
        raise missing
    return found


def _json_value(value: Any, name: str) -> Any:
    try:
        check_json(value, name)
        json.dumps(value, allow_nan=False)
    except InvalidEntry as exc:
        raise Refusal(str(exc)) from None
    except ValueError:
        raise Refusal(f"{name}: NaN and Infinity are not JSON") from None
    return value


def _clean(row: models.Model, *, exclude: list[str] | None) -> None:
    try:
        row.full_clean(exclude=exclude)
    except ValidationError as exc:
        messages = [
            f"{'' if field == NON_FIELD_ERRORS else f'{field}: '}{message}"
            for field, errors in exc.message_dict.items()
            for message in errors
        ]
        listed = "; ".join(short(m, 300) for m in messages[:MAX_ERRORS])
        raise Refusal(f"Not saved: {listed}") from None


def _visible(spec: Spec, queryset: QuerySet[Any], row: models.Model) -> dict[str, Any]:
    """The saved row as the caller sees it; a Refusal (rolling back) if unseen."""
    seen = queryset.filter(pk=row.pk).values(*spec.paths).first()
    if seen is None:
        raise Refusal(
            f"Not saved: the {spec.verbose} would not be one of yours afterwards."
        )
    return jsonable_row(seen, text_limit=GET_TEXT_CHARS)


@contextmanager
def _atomic(spec: Spec, queryset: QuerySet[Any]) -> Iterator[None]:
    """``transaction.atomic`` on the queryset's database; an integrity error (a
    uniqueness race, a related row deleted meanwhile) is a Refusal after the
    rollback."""
    try:
        with transaction.atomic(using=queryset.db):
            yield
    except IntegrityError:
        raise Refusal(
            f"Not saved: the {spec.verbose} conflicts with a row that exists (a "
            "value that must be unique, or a related row that is gone)."
        ) from None
