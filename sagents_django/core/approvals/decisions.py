"""Decisions on action requests: ``Approve``, ``Edit``, ``Reject``, and the one place
where what a person or a script sends is checked (JSON forms: see ``approvals``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeAlias

from ..exceptions import InvalidResume

DecisionType = Literal["approve", "edit", "reject"]
DECISION_TYPES: tuple[DecisionType, ...] = ("approve", "edit", "reject")

MAX_EDIT_DEPTH = 32
"""Edited arguments nest at most this deep (they are stored in the history)."""
MAX_EDIT_BYTES = 1_000_000
"""Edited arguments are at most this long as JSON."""
MAX_REJECT_MESSAGE = 10_000
"""A rejection's message is at most this many characters."""


# Decisions ----------------------------------------------------------------------
@dataclass(kw_only=True, slots=True)
class Approve:
    """Run the call with the arguments the model sent."""

    type: ClassVar[Literal["approve"]] = "approve"

    def to_dict(self) -> dict[str, Any]:
        return {"type": "approve"}


@dataclass(kw_only=True, slots=True)
class Edit:
    """Run the call with ``arguments`` instead; the history shows what ran."""

    arguments: dict[str, Any]
    """The whole arguments object the tool runs with."""
    type: ClassVar[Literal["edit"]] = "edit"

    def to_dict(self) -> dict[str, Any]:
        return {"type": "edit", "arguments": self.arguments}


@dataclass(kw_only=True, slots=True)
class Reject:
    """Do not run the call; the model reads that it was rejected (and why)."""

    message: str | None = None
    """The person's reason, passed on to the model."""
    type: ClassVar[Literal["reject"]] = "reject"

    def to_dict(self) -> dict[str, Any]:
        if self.message is None:
            return {"type": "reject"}
        return {"type": "reject", "message": self.message}


Decision: TypeAlias = Approve | Edit | Reject
_KEYS: dict[str, frozenset[str]] = {
    "approve": frozenset({"type"}),
    "edit": frozenset({"type", "arguments"}),
    "reject": frozenset({"type", "message"}),
}


def decision_from_dict(data: Any, *, where: str = "decision") -> Decision:
    """A decision from its JSON form (or a decision, re-checked); InvalidResume names
    the bad field, prefixed with ``where``."""
    if isinstance(data, Approve | Edit | Reject):
        data = data.to_dict()
    if not isinstance(data, Mapping):
        raise InvalidResume(
            f"{where} must be a dict like {{'type': 'approve'}}, not {short(data)}"
        )
    kind = data.get("type")
    if kind not in _KEYS:
        choices = ", ".join(repr(t) for t in DECISION_TYPES)
        raise InvalidResume(f"{where}.type must be one of {choices}, not {short(kind)}")
    for key in data:
        if key not in _KEYS[kind]:
            takes = ", ".join(repr(k) for k in sorted(_KEYS[kind]))
            raise InvalidResume(
                f"{where} has an unknown key {short(key)}; {kind!r} takes {takes}"
            )
    if kind == "approve":
        return Approve()
    if kind == "edit":
        if "arguments" not in data:
            raise InvalidResume(
                f"{where}.arguments is required for an edit (the tool's arguments)"
            )
        return Edit(
            arguments=_edited_arguments(data["arguments"], f"{where}.arguments")
        )
    message = data.get("message")
    if message is not None and not isinstance(message, str):
        raise InvalidResume(f"{where}.message must be a string, not {short(message)}")
    if message is not None and len(message) > MAX_REJECT_MESSAGE:
        raise InvalidResume(
            f"{where}.message is {len(message)} characters long; "
            f"the limit is {MAX_REJECT_MESSAGE}"
        )
    return Reject(message=message)


def decisions_from_list(value: Any) -> list[Decision]:
    """Decisions from a list of decisions or their JSON dicts."""
    if not isinstance(value, list | tuple):
        raise InvalidResume(
            f"decisions must be a list with one decision per action request, "
            f"not {type(value).__name__}"
        )
    return [decision_from_dict(d, where=f"decisions[{i}]") for i, d in enumerate(value)]


def _edited_arguments(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidResume(f"{where} must be an object, not {short(value)}")
    if _depth(value) > MAX_EDIT_DEPTH:
        raise InvalidResume(f"{where} nests deeper than {MAX_EDIT_DEPTH} levels")
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InvalidResume(f"{where} must be plain JSON: {exc}") from None
    if len(text) > MAX_EDIT_BYTES:
        raise InvalidResume(
            f"{where} is {len(text)} characters of JSON; the limit is {MAX_EDIT_BYTES}"
        )
    return value


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        children = item.values() if isinstance(item, dict) else item
        stack.extend(
            (child, depth + 1) for child in children if isinstance(child, dict | list)
        )
    return deepest


def short(value: Any) -> str:
    """``repr(value)``, cut to a length an error message can carry."""
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."
