"""Model fields as the agent sees them: allowed paths, JSON schemas, JSON values.

A path is a field of the model, or one reached through forward foreign keys and
one-to-one fields (``customer__name``): each hop reads the one row the current row
points at. Reverse and many-to-many relations are refused, whatever the site lists:
from a row inside the tenant they lead to rows of other tenants (``product__orders``
reaches every shop's orders, and a filter on them is an oracle over those rows).
"""

from __future__ import annotations

import base64
import datetime
import decimal
import math
import uuid
from dataclasses import dataclass
from typing import Any, cast

from django.conf import settings
from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.db import connection, models
from django.utils import timezone
from django.utils.duration import duration_iso_string

from sagents_django.core.exceptions import ConfigurationError
from sagents_django.filesystems.encoding import storable

MAX_TEXT_VALUE_CHARS = 1000
"""Longest text a filter or a search takes (longer matches nothing a person needs)."""


class Refusal(Exception):
    """An argument the model can fix; its message is the tool error it reads."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Column:
    """A field path the site exposes, and the field at its end."""

    path: str
    field: models.Field[Any, Any]
    """The last field; for a foreign key, its values are the related row's key."""

    @property
    def value_field(self) -> models.Field[Any, Any]:
        """The field whose type the column's values take (a key's target)."""
        return value_field(self.field)

    @property
    def own(self) -> bool:
        """A field of the model itself (no relation followed)."""
        return "__" not in self.path


def value_field(field: models.Field[Any, Any]) -> models.Field[Any, Any]:
    """``field``, or for a foreign key the field of the related row it holds."""
    if not field.is_relation:
        return field
    return cast("models.Field[Any, Any]", field.target_field)  # type: ignore[attr-defined]


def related_model(field: models.Field[Any, Any]) -> type[models.Model]:
    """The model a (resolved) relation points at."""
    return cast("type[models.Model]", field.related_model)


def resolve(model: type[models.Model], path: str, *, what: str) -> Column:
    """The column at ``path`` on ``model``, or ConfigurationError saying why not."""
    if not isinstance(path, str) or not path:
        raise ConfigurationError(f"{what} must name fields, not {path!r}")
    current: Any = model
    parts = path.split("__")
    field: Any = None
    for i, part in enumerate(parts):
        try:
            field = current._meta.get_field(part)
        except FieldDoesNotExist:
            raise ConfigurationError(
                f"{what}: {model._meta.label} has no field path {path!r} "
                f"({current._meta.label} has no field {part!r})"
            ) from None
        if i < len(parts) - 1:
            forward = field.concrete and (field.many_to_one or field.one_to_one)
            if not forward:
                raise ConfigurationError(
                    f"{what}: {path!r} follows {part!r}, a reverse or many-to-many "
                    "relation; only foreign keys and one-to-one fields can be "
                    "followed (a reverse relation reaches rows outside the queryset)"
                )
            current = field.related_model
    if not field.concrete or field.many_to_many:
        raise ConfigurationError(
            f"{what}: {path!r} is not a column of {current._meta.label} (reverse "
            "relations, many-to-many and generic fields are not supported)"
        )
    column = Column(path=path, field=field)
    if value_schema(column.value_field) is None:
        raise ConfigurationError(
            f"{what}: {path!r} is a {type(column.value_field).__name__}, which the "
            "agent cannot read or write; leave it out"
        )
    return column


def value_schema(field: models.Field[Any, Any]) -> dict[str, Any] | None:
    """The JSON schema of one value of ``field`` (None: not supported)."""
    schema: dict[str, Any]
    if isinstance(field, models.BooleanField):
        schema = {"type": "boolean"}
    elif isinstance(field, models.IntegerField):
        schema = {"type": "integer"}
        low, high = integer_range(field)
        if low is not None:
            schema["minimum"] = low
        if high is not None:
            schema["maximum"] = high
    elif isinstance(field, models.FloatField):
        schema = {"type": "number"}
    elif isinstance(field, models.DecimalField):
        schema = {"type": ["number", "string"], "description": "a decimal number"}
    elif isinstance(field, models.DateTimeField):
        schema = {"type": "string", "format": "date-time"}
    elif isinstance(field, models.DateField):
        schema = {"type": "string", "format": "date"}
    elif isinstance(field, models.TimeField):
        schema = {"type": "string", "format": "time"}
    elif isinstance(field, models.DurationField):
        schema = {"type": "string", "description": "a duration, ISO 8601 (P1DT2H)"}
    elif isinstance(field, models.UUIDField):
        schema = {"type": "string", "format": "uuid"}
    elif isinstance(field, models.CharField | models.TextField):
        schema = {"type": "string"}
        if field.max_length:
            schema["maxLength"] = field.max_length
    elif isinstance(field, models.GenericIPAddressField):
        schema = {"type": "string"}
    elif isinstance(field, models.JSONField):
        schema = {}
    else:
        return None
    if field.choices and not isinstance(field, models.JSONField):
        schema["enum"] = [value for value, _ in field.flatchoices]
    return schema


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` that also takes null."""
    if not schema:
        return schema
    kind = schema["type"]
    kinds = [*kind] if isinstance(kind, list) else [kind]
    nulled = {**schema, "type": [*kinds, "null"]}
    if "enum" in nulled:
        nulled["enum"] = [*nulled["enum"], None]
    return nulled


def integer_range(field: models.Field[Any, Any]) -> tuple[int | None, int | None]:
    """What the column holds on this database (a larger number is an error there)."""
    low, high = connection.ops.integer_field_range(field.get_internal_type())
    return low, high


def python_value(
    field: models.Field[Any, Any],
    value: Any,
    where: str,
    *,
    limit: int = MAX_TEXT_VALUE_CHARS,
) -> Any:
    """``value`` (from the model's JSON) as ``field`` holds it, or a Refusal (text
    over ``limit`` characters too)."""
    scalar(value, where, limit=limit)
    if value is None:
        raise Refusal(f"{where}: null is not a value here; use an isnull filter")
    kind = value_schema(field) or {}
    allowed = kind.get("type", [])
    allowed = allowed if isinstance(allowed, list) else [allowed]
    if allowed and not any(_is(value, name) for name in allowed):
        raise Refusal(
            f"{where}: {short(value)} is not {' or '.join(allowed)}, as "
            f"{field.name!r} takes"
        )
    try:
        converted = field.to_python(value)
    except ValidationError as exc:
        raise Refusal(f"{where}: {' '.join(exc.messages)}") from None
    if not in_range(field, converted):
        raise Refusal(f"{where}: {converted} is out of the column's range")
    naive = isinstance(converted, datetime.datetime) and timezone.is_naive(converted)
    if naive and settings.USE_TZ:
        converted = timezone.make_aware(converted)
    return converted


def in_range(field: models.Field[Any, Any], value: Any) -> bool:
    """Whether the column can hold ``value`` (a database errs on a larger number)."""
    if isinstance(field, models.IntegerField):
        low, high = integer_range(field)
        return (low is None or value >= low) and (high is None or value <= high)
    if isinstance(field, models.DecimalField):
        digits = (field.max_digits or 0) - (field.decimal_places or 0)
        return not field.max_digits or abs(value) < decimal.Decimal(10) ** digits
    return True


def scalar(value: Any, where: str, *, limit: int = MAX_TEXT_VALUE_CHARS) -> None:
    """Refuse what is no JSON scalar a database can take (or text over ``limit``)."""
    if value is None or isinstance(value, bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise Refusal(f"{where}: {value!r} is not a number a column holds")
        return
    if isinstance(value, str):
        if len(value) > limit:
            raise Refusal(
                f"{where}: the text is {len(value)} characters; the limit is {limit}"
            )
        if not storable(value):
            raise Refusal(f"{where}: the text holds characters no column can hold")
        return
    raise Refusal(f"{where}: {short(value)} is not a single value (text, number, ...)")


def _is(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    return kind == "null" and value is None


def to_json(value: Any) -> Any:
    """A value read from the database as JSON (times to the microsecond: a cursor
    must find the same row again)."""
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return duration_iso_string(value)
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, bytes | memoryview):
        return base64.b64encode(bytes(value)).decode()
    return value


def short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}..."
