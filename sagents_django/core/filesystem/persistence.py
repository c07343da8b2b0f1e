"""The storage seam: how a FileSystemConfig's files reach a disk, a database or memory.

A backend is any object with the four required methods (``SupportsPersistence``);
``Persistence`` is a base class whose every method does nothing, for backends that
want to override only some. Each call receives ``opts``: the config's
``storage_opts`` plus ``scope_key`` (JSON form) and ``base_directory`` (absent for a
default config), as ``FileSystemConfig.build_storage_opts`` makes them.

Backends raise ``FileNotFound`` for a missing file and ``PersistenceError`` (or any
``FileSystemError``) for the rest; the filesystem turns any other exception into a
``PersistenceError`` so one broken backend never crashes a turn. The two optional
methods may return ``None`` to say "not supported": the filesystem then falls back
to ``write`` (and, for a move, ``write`` at the new path plus ``delete`` at the old).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from .entries import FileEntry
from .errors import FileNotFound

StorageOpts = dict[str, Any]


@runtime_checkable
class SupportsPersistence(Protocol):
    """What a storage backend must provide."""

    def write(self, entry: FileEntry, opts: StorageOpts) -> FileEntry:
        """Store ``entry`` (content and metadata, or a directory); return the entry as
        stored (refreshed metadata, an assigned id ...)."""
        ...

    def load(self, entry: FileEntry, opts: StorageOpts) -> FileEntry:
        """Return ``entry`` with content and metadata from storage; ``FileNotFound``
        when storage has nothing at ``entry.path``."""
        ...

    def delete(self, entry: FileEntry, opts: StorageOpts) -> None:
        """Remove ``entry`` from storage; a missing entry is not an error."""
        ...

    def list_persisted_entries(self, opts: StorageOpts) -> list[FileEntry]:
        """Every stored entry, content not loaded (files ``loaded=False``)."""
        ...


class Persistence:
    """Base class for backends: every method is a no-op until overridden."""

    def write(self, entry: FileEntry, opts: StorageOpts) -> FileEntry:
        return entry.mark_clean()

    def load(self, entry: FileEntry, opts: StorageOpts) -> FileEntry:
        raise FileNotFound(f"File not found: {entry.path}")

    def delete(self, entry: FileEntry, opts: StorageOpts) -> None:
        return None

    def list_persisted_entries(self, opts: StorageOpts) -> list[FileEntry]:
        return []

    def move_in_storage(
        self, entry: FileEntry, new_path: str, opts: StorageOpts
    ) -> FileEntry | None:
        """Optional: move ``entry`` to ``new_path`` in storage and return the moved
        entry; ``None`` means not supported (the filesystem rewrites instead)."""
        return None

    def update_metadata_in_storage(
        self, entry: FileEntry, opts: StorageOpts
    ) -> FileEntry | None:
        """Optional: store only non-content fields (title, custom ...); ``None``
        means not supported (the filesystem writes the whole entry)."""
        return None

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"
