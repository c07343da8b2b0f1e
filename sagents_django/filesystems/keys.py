"""Where a scope's files live: the scope's two parts, and paths checked once more.

Both backends store the files of a filesystem scope under the scope's ``(kind, id)``
pair: two columns of ``StoredFile``, two key segments of a storage. Only pairs are
accepted (``("user", 42)``, ``("agent", "abc")``): a fixed shape is what makes the
mapping one-to-one, so no scope can name another's rows or keys. ``("user", 42)``
and ``("user", "42")`` share their files: a database column cannot tell them apart,
and an id reaches the host as either.

Paths arrive normalized by the core; the backends check them again (invariant 9: a
backend never trusts the layer above it with another tenant's data).
"""

from __future__ import annotations

from typing import Any

from sagents_django.core.exceptions import ConfigurationError
from sagents_django.core.filesystem.errors import InvalidPath, UnsafePath
from sagents_django.core.filesystem.paths import is_within, normalize_file_path
from sagents_django.core.filesystem.persistence import StorageOpts
from sagents_django.core.filesystem.scope import canonical_scope


def scope_parts(scope: Any) -> tuple[str, str]:
    """``(kind, id)`` of a filesystem scope, as text."""
    key = canonical_scope(scope)
    if not (isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], str)):
        raise ConfigurationError(
            f"Stored filesystems need a (kind, id) scope such as ('user', 42); "
            f"got {scope!r}"
        )
    return key[0], str(key[1])


def opts_scope(opts: StorageOpts) -> tuple[str, str]:
    """``(kind, id)`` of the scope a backend call is made for."""
    if opts.get("scope_key") is None:
        raise ConfigurationError("Storage options carry no scope_key")
    return scope_parts(opts["scope_key"])


def mount(opts: StorageOpts) -> str:
    """The config's virtual directory ("/Memories"), "" for a default config."""
    base = opts.get("base_directory")
    return "/" + base if base else ""


def checked_path(path: Any, opts: StorageOpts) -> str:
    """``path`` if it is canonical and inside the config's directory, else
    ``UnsafePath``: the backend's own check of what the core already did."""
    try:
        canonical = normalize_file_path(path)
    except InvalidPath as exc:
        raise UnsafePath(f"Refusing to store {path!r}: {exc}") from None
    if canonical != path:
        raise UnsafePath(f"Refusing to store {path!r}: it is not a canonical path")
    base = mount(opts)
    if base and not is_within(canonical, base):
        raise UnsafePath(f"{path!r} is outside {base}")
    return canonical
