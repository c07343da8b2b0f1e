"""What a run is asked to do, typed: its request, the messages queued on it, the
notifications for its middleware.

A run's own data travels with its row (``AgentRun.metadata``, JSON) from the process
that created it to whichever worker runs it. It used to be an untyped dict that
four modules read and rewrote by key; here each part is a frozen dataclass with one
JSON form (``to_dict`` / ``from_dict``, like ``core.approvals``), read leniently so a
row written by an older release, or edited by hand, still loads.

``RunRequest.of(run)`` reads a row; ``request.to_dict()`` is what is stored. A change
is a new request written whole (``replace``), never a key patched in place.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["Notification", "QueuedMessage", "RunRequest"]


@dataclass(frozen=True, kw_only=True, slots=True)
class QueuedMessage:
    """A person's message for a run to answer (shown at once as a display row)."""

    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    """Extra keys for the message (who sent it, from where)."""
    display_ids: tuple[int, ...] = ()
    """The display rows that show it."""
    llm: dict[str, Any] | None = None
    """The message the model reads (``Message.to_dict()``) when the site's
    preprocessor made one of its own (``runtime.intake``); None: ``text``."""

    def to_dict(self) -> dict[str, Any]:
        data = {
            "text": self.text,
            "metadata": self.metadata,
            "display_ids": list(self.display_ids),
        }
        if self.llm is not None:
            data["llm"] = self.llm
        return data

    @classmethod
    def from_dict(cls, data: Any) -> QueuedMessage | None:
        if not isinstance(data, dict):
            return None
        extra = data.get("metadata")
        ids = data.get("display_ids")
        llm = data.get("llm")
        return cls(
            llm=llm if isinstance(llm, dict) else None,
            text=str(data.get("text", "")),
            metadata=extra if isinstance(extra, dict) else {},
            display_ids=tuple(i for i in ids if isinstance(i, int))
            if isinstance(ids, list)
            else (),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Notification:
    """A message for a middleware's ``handle_message`` (``notify_middleware``)."""

    middleware_id: str
    message: Any

    def to_dict(self) -> dict[str, Any]:
        return {"middleware_id": self.middleware_id, "message": self.message}

    @classmethod
    def from_dict(cls, data: Any) -> Notification | None:
        if not isinstance(data, dict):
            return None
        return cls(
            middleware_id=str(data.get("middleware_id", "")),
            message=data.get("message"),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class RunRequest:
    """Everything a worker needs to run a run, and what was added to it while it
    ran."""

    scope: dict[str, Any] | None = None
    """The JSON form of the scope the run acts for (``Scope.to_dict``)."""
    filesystem_scope: Any = None
    messages: tuple[QueuedMessage, ...] = ()
    """The messages this run answers (added to the state as it starts)."""
    decisions: list[dict[str, Any]] | None = None
    """A resume's decisions (the core's JSON form), one per action request."""
    revision: int | None = None
    """The state revision a resume's decisions answer (a later one: answered)."""
    round: int = 0
    """How many runs of queued messages led to this one without a person's word."""
    halted: bool = False
    """Too many rounds: the messages are kept, the agent is not run."""
    queued: tuple[QueuedMessage, ...] = ()
    """Messages sent while this run ran or waited for approval: the next run's."""
    notifications: tuple[Notification, ...] = ()

    @classmethod
    def of(cls, run: Any) -> RunRequest:
        return cls.from_dict(getattr(run, "metadata", None))

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "scope": self.scope,
            "filesystem_scope": self.filesystem_scope,
        }
        if self.messages:
            data["messages"] = [m.to_dict() for m in self.messages]
        if self.decisions is not None:
            data["decisions"] = self.decisions
            data["revision"] = self.revision
        if self.round:
            data["round"] = self.round
        if self.halted:
            data["halted"] = True
        if self.queued:
            data["queued"] = [m.to_dict() for m in self.queued]
        if self.notifications:
            data["notifications"] = [n.to_dict() for n in self.notifications]
        return data

    @classmethod
    def from_dict(cls, data: Any) -> RunRequest:
        if not isinstance(data, dict):
            return cls()
        scope = data.get("scope")
        decisions = data.get("decisions")
        revision = data.get("revision")
        rounds = data.get("round", 0)
        return cls(
            scope=scope if isinstance(scope, dict) else None,
            filesystem_scope=data.get("filesystem_scope"),
            messages=_messages(data.get("messages")),
            decisions=decisions if isinstance(decisions, list) else None,
            revision=revision if isinstance(revision, int) else None,
            round=rounds if isinstance(rounds, int) and rounds >= 0 else 0,
            halted=bool(data.get("halted")),
            queued=_messages(data.get("queued")),
            notifications=tuple(
                n
                for n in map(Notification.from_dict, _list(data.get("notifications")))
                if n is not None
            ),
        )

    def follow_up(self, *, carry_own: bool = False) -> RunRequest:
        """The request of the run that answers the messages queued on this one
        (with ``carry_own``, this run's own messages first: they never reached the
        state)."""
        own = self.messages if carry_own else ()
        return RunRequest(
            scope=self.scope,
            filesystem_scope=self.filesystem_scope,
            messages=(*own, *self.queued),
            round=self.round + 1,
        )

    def with_queued(self, *messages: QueuedMessage) -> RunRequest:
        return replace(self, queued=(*self.queued, *messages))

    def with_notification(self, note: Notification) -> RunRequest:
        return replace(self, notifications=(*self.notifications, note))


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _messages(value: Any) -> tuple[QueuedMessage, ...]:
    return tuple(m for m in map(QueuedMessage.from_dict, _list(value)) if m is not None)
