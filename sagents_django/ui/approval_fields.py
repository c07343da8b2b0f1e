"""A tool's arguments as form fields, drawn from its JSON schema, and read back.

Why a form and not JSON: the person approving a call reads and edits values, not
braces and quotes. A schema whose properties are text, numbers, enums and booleans
becomes one field each (with the HTML constraints the browser checks first); a
property a field cannot hold (an object, a list, a union) becomes a small JSON box
of its own; a schema a form cannot follow at all (none, not an object, arguments
outside its properties) leaves the whole-JSON box of before. What comes back is
parsed field by field, then checked against the schema with ``jsonschema`` before
anything is sent: each error is put beside its field, and nothing is sent.

Field names in the form are positional (``arg-<request>-<field>``): a property
name is model output and never becomes an attribute of its own.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Literal

from django.http import QueryDict

FieldKind = Literal[
    "text", "textarea", "integer", "number", "select", "checkbox", "json"
]

MAX_FIELDS = 40
"""More properties than this: the whole-JSON box (a form that long reads worse)."""
LONG_TEXT = 80
MULTILINE_NAMES = frozenset({"content", "new_string", "old_string", "text", "body"})
MAX_FIELD_CHARS = 100_000


@dataclass(kw_only=True, slots=True)
class Field:
    """One argument as the approval form shows it."""

    index: int
    """Its position: the input is named ``arg-<request>-<index>``."""
    name: str
    """The argument's name (shown as the label, never used as an attribute)."""
    kind: FieldKind
    value: str = ""
    """The text the input starts with (JSON for ``json``, the option for ``select``)."""
    checked: bool = False
    choices: list[tuple[str, str]] = field(default_factory=list)
    """(option value, label) of a ``select``; the value is the enum's position."""
    required: bool = False
    present: bool = True
    """Whether the model sent this argument (an absent one left empty stays absent)."""
    minimum: str = ""
    maximum: str = ""
    min_length: str = ""
    max_length: str = ""
    description: str = ""
    error: str = ""


def _number_text(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return ""
    return str(value)


def _kind(name: str, schema: dict[str, Any], value: Any) -> FieldKind:
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and all(_scalar(v) for v in enum):
        return "select"
    kind = schema.get("type")
    if kind == "boolean":
        return "checkbox"
    if kind == "integer":
        return "integer"
    if kind == "number":
        return "number"
    if kind == "string":
        text = value if isinstance(value, str) else ""
        if name in MULTILINE_NAMES or "\n" in text or len(text) > LONG_TEXT:
            return "textarea"
        return "text"
    return "json"


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def fields_for(schema: Any, arguments: dict[str, Any]) -> list[Field] | None:
    """The fields of ``arguments`` under ``schema``, or None: the whole-JSON box."""
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        return None
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        return None
    if len(properties) > MAX_FIELDS or set(arguments) - set(properties):
        return None
    if not all(isinstance(s, dict) for s in properties.values()):
        return None
    raw_required = schema.get("required")
    required = set(raw_required) if isinstance(raw_required, list) else set()
    out = []
    for index, (name, prop) in enumerate(properties.items()):
        value = arguments.get(name)
        kind = _kind(str(name), prop, value)
        item = Field(
            index=index,
            name=str(name),
            kind=kind,
            required=name in required,
            present=name in arguments,
            description=str(prop.get("description") or "")[:500],
        )
        if kind == "select":
            enum = prop["enum"]
            item.choices = [(f"e{i}", _label(v)) for i, v in enumerate(enum)]
            item.value = (
                next((f"e{i}" for i, v in enumerate(enum) if _same(v, value)), "")
                if name in arguments
                else ""
            )
        elif kind == "checkbox":
            item.checked = value is True
        elif kind in ("integer", "number"):
            item.value = _number_text(value)
            item.minimum = _number_text(prop.get("minimum"))
            item.maximum = _number_text(prop.get("maximum"))
        elif kind in ("text", "textarea"):
            item.value = value if isinstance(value, str) else ""
            item.min_length = _number_text(prop.get("minLength"))
            item.max_length = _number_text(prop.get("maxLength"))
        else:
            item.value = (
                json.dumps(value, indent=2, ensure_ascii=False)
                if name in arguments
                else ""
            )
        out.append(item)
    return out


def _label(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def read_fields(
    post: QueryDict,
    prefix: str,
    fields: list[Field],
    schema: dict[str, Any],
) -> tuple[dict[str, Any], bool]:
    """The arguments the fields posted (each field keeps what was typed, and its
    error), and whether all of them read and passed the schema."""
    properties = schema.get("properties", {})
    arguments: dict[str, Any] = {}
    ok = True
    for item in fields:
        name = f"{prefix}{item.index}"
        raw = post.get(name, "")
        item.error = ""
        if len(raw) > MAX_FIELD_CHARS:
            item.error = "Too long."
            ok = False
            continue
        if item.kind == "checkbox":
            item.checked = raw == "on"
            if item.checked or item.present or item.required:
                arguments[item.name] = item.checked
            continue
        item.value = raw
        if raw.strip() == "" and item.kind != "text" and item.kind != "textarea":
            if item.required:
                item.error = "Required."
                ok = False
            continue
        if raw == "" and not item.present and not item.required:
            continue  # left out, as the model left it out
        try:
            arguments[item.name] = _parse(item, raw, properties.get(item.name, {}))
        except ValueError as exc:
            item.error = str(exc)
            ok = False
    if ok:
        ok = _check(schema, arguments, fields)
    return arguments, ok


def _parse(item: Field, raw: str, prop: dict[str, Any]) -> Any:
    if item.kind in ("text", "textarea"):
        return raw
    if item.kind == "integer":
        try:
            return int(raw.strip())
        except ValueError:
            raise ValueError("Must be a whole number.") from None
    if item.kind == "number":
        try:
            number = float(raw.strip())
        except ValueError:
            raise ValueError("Must be a number.") from None
        if not math.isfinite(number):
            raise ValueError("Must be a finite number.")
        return int(number) if number.is_integer() and "." not in raw else number
    if item.kind == "select":
        enum = prop.get("enum", [])
        position = raw[1:] if raw.startswith("e") else ""
        if not position.isdigit() or int(position) >= len(enum):
            raise ValueError("Choose one of the options.")
        return enum[int(position)]
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"Not valid JSON ({exc}).") from None


def _check(
    schema: dict[str, Any], arguments: dict[str, Any], fields: list[Field]
) -> bool:
    """``arguments`` against ``schema``: errors go beside their fields."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        return True  # the tool's own check runs when it is called
    by_name = {f.name: f for f in fields}
    ok = True
    for error in Draft202012Validator(schema).iter_errors(arguments):
        path = list(error.absolute_path)
        target = by_name.get(str(path[0])) if path else None
        if target is None and error.validator == "required":
            missing = error.message.split("'")[1] if "'" in error.message else ""
            target = by_name.get(missing)
        message = "Required." if error.validator == "required" else error.message
        if target is None:
            target = fields[0] if fields else None
        if target is not None and not target.error:
            target.error = message[:300]
        ok = False
    return ok


def check_json(schema: Any, arguments: dict[str, Any]) -> str:
    """The first schema error of whole-JSON ``arguments`` ("" when they pass)."""
    if not isinstance(schema, dict):
        return ""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        return ""
    for error in Draft202012Validator(schema).iter_errors(arguments):
        where = "/".join(str(p) for p in error.absolute_path)
        return f"{where}: {error.message}"[:300] if where else error.message[:300]
    return ""
