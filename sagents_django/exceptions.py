"""The Django layer's errors.

All subclass the core's ``SagentsError``, so ``except SagentsError`` catches
everything the app raises; the first two also subclass a Django or Python base, so
code written for those handles them too::

    SagentsError (sagents_django.core.exceptions)
    ├── NotFound        also ObjectDoesNotExist: no such object *in this scope*
    ├── InvalidInput    also ValueError: a bad argument; nothing was changed
    └── Conflict        another writer got there first; nothing was overwritten
        ├── StateConflict   the stored state moved on since this writer read it
        └── RunConflict     the conversation is already running a turn

``NotFound`` is the one answer for "does not exist" and "belongs to someone else":
its message names what was asked for and never says which of the two it was, so a
caller cannot probe another tenant's ids.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ObjectDoesNotExist

from sagents_django.core.exceptions import SagentsError


class NotFound(SagentsError, ObjectDoesNotExist):
    """The object does not exist in the caller's scope."""

    def __init__(self, what: str, identifier: Any = None) -> None:
        self.what = what
        self.identifier = identifier
        if identifier is None:
            message = f"{what[:1].upper()}{what[1:]} was not found."
        else:
            message = f"{what[:1].upper()}{what[1:]} {identifier!r} was not found."
        super().__init__(message)


class InvalidInput(SagentsError, ValueError):
    """An argument is of the wrong type, unknown, malformed or too large."""


class Conflict(SagentsError):
    """A write lost a race with another writer and changed nothing."""


class StateConflict(Conflict):
    """The conversation's state was saved by someone else since this writer read it.

    State saves are a compare-and-set on ``AgentState.revision``: the writer says
    which revision it read, and a save over any other revision is refused, so two
    sessions can never silently overwrite each other's turns.
    """

    def __init__(self, conversation_id: Any, *, expected: int, actual: int) -> None:
        self.conversation_id = conversation_id
        self.expected = expected
        self.actual = actual
        stored = "no state" if actual == 0 else f"revision {actual}"
        super().__init__(
            f"The state of conversation {str(conversation_id)!r} was changed by "
            f"another writer (it holds {stored}; this writer read revision "
            f"{expected}); nothing was overwritten. Load the conversation again."
        )


class RunConflict(Conflict):
    """The conversation already has an active run (one at a time, by constraint)."""

    def __init__(self, conversation_id: Any, *, run_id: Any = None) -> None:
        self.conversation_id = conversation_id
        self.run_id = run_id
        which = f" (run {str(run_id)!r})" if run_id is not None else ""
        super().__init__(
            f"Conversation {str(conversation_id)!r} is already running a turn"
            f"{which}; wait for it to end or cancel it."
        )
