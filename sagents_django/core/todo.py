"""Todo: one item of an agent's plan."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

TodoStatus = Literal["pending", "in_progress", "completed", "cancelled"]
TODO_STATUSES: tuple[str, ...] = ("pending", "in_progress", "completed", "cancelled")
RESOLVED_STATUSES: frozenset[str] = frozenset(("completed", "cancelled"))
"""A task in one of these needs no more work."""


def _new_id() -> str:
    return uuid.uuid4().hex[:12]


@dataclass(kw_only=True, slots=True)
class Todo:
    """A task the agent plans, works on and finishes."""

    content: str
    status: TodoStatus = "pending"
    id: str = field(default_factory=_new_id)
    """Stable across updates; generated when not given."""

    def __post_init__(self) -> None:
        if self.status not in TODO_STATUSES:
            raise ValueError(
                f"Todo status must be one of {', '.join(TODO_STATUSES)}, "
                f"not {self.status!r}"
            )
        if not isinstance(self.content, str) or not self.content.strip():
            raise ValueError("Todo content must be a non-empty string")
        self.id = str(self.id)

    @property
    def resolved(self) -> bool:
        """Completed or cancelled: nothing more to do (upstream v0.13.2)."""
        return self.status in RESOLVED_STATUSES

    @property
    def open(self) -> bool:
        """Pending or in progress: still to do (upstream v0.13.2)."""
        return not self.resolved

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "content": self.content, "status": self.status}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Todo:
        kwargs: dict[str, Any] = {
            "content": data.get("content", ""),
            "status": data.get("status", "pending"),
        }
        if data.get("id") not in (None, ""):
            kwargs["id"] = data["id"]
        return cls(**kwargs)
