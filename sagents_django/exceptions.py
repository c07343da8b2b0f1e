"""The Django layer's errors.

Both subclass the core's ``SagentsError``, so ``except SagentsError`` catches
everything the app raises, and a Django base, so Django code handles them too::

    SagentsError (sagents_django.core.exceptions)
    ├── NotFound        also ObjectDoesNotExist: no such object *in this scope*
    └── InvalidInput    also ValueError: a bad argument; nothing was changed

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
