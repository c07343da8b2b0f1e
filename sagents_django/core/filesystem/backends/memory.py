"""MemoryPersistence: storage in a dict, for tests, demos and single-process use.

One instance is one store: share the instance between configs (or filesystems) that
should see the same files. Entries are kept per scope and base directory, so one
instance can serve many scopes without mixing them.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

from ..entries import FileEntry
from ..errors import FileExists, FileNotFound
from ..persistence import Persistence, StorageOpts


class MemoryPersistence(Persistence):
    """Stores entries (with content) in process memory."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stores: dict[tuple[Any, Any], dict[str, FileEntry]] = {}
        self.writes = 0
        """How many writes reached this store (lets tests see write-through)."""

    def _store(self, opts: StorageOpts) -> dict[str, FileEntry]:
        key = (_hashable(opts.get("scope_key")), opts.get("base_directory"))
        return self._stores.setdefault(key, {})

    def write(self, entry: FileEntry, opts: StorageOpts) -> FileEntry:
        stored = replace(
            entry, persistence="persisted", dirty_content=False, dirty_non_content=False
        )
        with self._lock:
            self._store(opts)[entry.path] = stored
            self.writes += 1
        return stored

    def load(self, entry: FileEntry, opts: StorageOpts) -> FileEntry:
        with self._lock:
            found = self._store(opts).get(entry.path)
        if found is None:
            raise FileNotFound(f"File not found: {entry.path}")
        return replace(found, loaded=True)

    def delete(self, entry: FileEntry, opts: StorageOpts) -> None:
        with self._lock:
            self._store(opts).pop(entry.path, None)

    def list_persisted_entries(self, opts: StorageOpts) -> list[FileEntry]:
        with self._lock:
            entries = list(self._store(opts).values())
        return [e.unloaded() for e in entries]

    def move_in_storage(
        self, entry: FileEntry, new_path: str, opts: StorageOpts
    ) -> FileEntry | None:
        with self._lock:
            store = self._store(opts)
            found = store.pop(entry.path, None)
            if found is None:
                raise FileNotFound(f"File not found: {entry.path}")
            if new_path in store:
                store[entry.path] = found
                raise FileExists(f"Target already exists: {new_path}")
            store[new_path] = replace(found, path=new_path)
        return replace(entry, path=new_path).mark_clean()

    def update_metadata_in_storage(
        self, entry: FileEntry, opts: StorageOpts
    ) -> FileEntry | None:
        with self._lock:
            store = self._store(opts)
            found = store.get(entry.path)
            if found is None:
                raise FileNotFound(f"File not found: {entry.path}")
            store[entry.path] = replace(
                found,
                title=entry.title,
                id=entry.id,
                file_type=entry.file_type,
                metadata=entry.metadata or found.metadata,
            )
        return entry.mark_clean()

    def paths(
        self, scope_key: Any = None, base_directory: str | None = None
    ) -> list[str]:
        """The stored paths (for tests and inspection)."""
        with self._lock:
            if scope_key is None:
                return sorted(p for store in self._stores.values() for p in store)
            store = self._stores.get((_hashable(scope_key), base_directory), {})
            return sorted(store)


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value
