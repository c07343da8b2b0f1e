"""Filesystem scope keys: which filesystem a path lives in, independent of any agent.

A scope is ``(kind, id)``: ``("user", 42)``, ``("project", 7)``, ``("agent", "abc")``.
It travels as JSON (``["user", 42]``), so a list and a tuple name the same scope; the
canonical form is a tuple, usable as a dict key. A plain string or integer is accepted
too (the reference allows any term). ``("user", 42)`` and ``("user", "42")`` differ.
"""

from __future__ import annotations

from typing import Any, TypeAlias

from ..exceptions import ConfigurationError

ScopeKey: TypeAlias = "tuple[str | int, ...] | str | int"


def canonical_scope(scope: Any) -> ScopeKey:
    """The hashable form of ``scope``; ``ConfigurationError`` for anything else."""
    if isinstance(scope, list | tuple):
        if not scope:
            raise ConfigurationError("A filesystem scope cannot be empty")
        return tuple(_check_part(part, scope) for part in scope)
    return _check_part(scope, scope)


def scope_to_json(scope: Any) -> Any:
    """The JSON form: a list for a tuple scope, else the value itself."""
    key = canonical_scope(scope)
    return list(key) if isinstance(key, tuple) else key


def _check_part(part: object, scope: Any) -> str | int:
    # bool is an int subclass, but True as an id is surely a mistake.
    if isinstance(part, bool) or not isinstance(part, str | int):
        raise ConfigurationError(
            f"A filesystem scope is made of strings and integers, like "
            f"('user', 42); got {scope!r}"
        )
    if isinstance(part, str) and not part:
        raise ConfigurationError(f"A filesystem scope part cannot be empty: {scope!r}")
    return part
