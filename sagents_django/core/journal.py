"""A journal of tool calls, so a turn taken over after a crash never repeats one.

The loop asks the journal before it runs a call (``recall``): a call that already
finished in an earlier attempt of the same run gives back its recorded result. A call
that was *running* when its worker died is the hard case: a tool that declared
itself ``idempotent`` runs again; any other gets an error result saying it may or may
not have done its work (the model decides), and is not run blindly a second time.

The core only defines the protocol; the runtime keeps the journal in the database.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .messages import ToolCall, ToolResult
    from .tools import Tool

LOST_TEXT = (
    "The call to {name!r} was running when the worker running this turn stopped. "
    "It was not run again because it is not marked idempotent, so it may or may "
    "not have done its work; check before calling it again."
)


class ToolJournal(Protocol):
    async def recall(self, call: ToolCall, tool: Tool | None) -> ToolResult | None:
        """The result an earlier attempt recorded for ``call`` (or the error result
        of a lost non-idempotent call); None: run it."""

    async def started(self, call: ToolCall, tool: Tool | None) -> None:
        """``call`` is about to run."""

    async def finished(self, call: ToolCall, result: ToolResult) -> None:
        """``call`` ran and gave ``result``."""


def is_idempotent(tool: Any) -> bool:
    return bool(getattr(tool, "idempotent", False))
