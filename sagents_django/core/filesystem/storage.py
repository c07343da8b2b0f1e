"""Keeping the in-memory map and the backends in step (part of FileSystemState).

Split from ``state`` by concept: ``state`` decides what an operation means, this
module talks to backends: storing and loading entries, persisting dirty ones (now, on
a debounce timer, or at ``flush_all``), and indexing what storage already holds
(``reset`` discards local changes, ``refresh`` merges changes other workers made).
Every backend call goes through ``_call``, so an unexpected exception from a backend
becomes a ``PersistenceError`` with the path, never a crash of the caller.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .entries import FileEntry
from .errors import FileNotFound, FileSystemError, InvalidPath, PersistenceError
from .paths import basename, normalize_file_path

if TYPE_CHECKING:
    from .config import FileSystemConfig
    from .debounce import Debouncer
    from .index import EntryIndex

logger = logging.getLogger(__name__)


class StorageMixin:
    """Backend plumbing of FileSystemState (which holds the lock around every call)."""

    if TYPE_CHECKING:
        scope_key: Any
        max_file_size: int | None
        _lock: Any
        _configs: dict[str, FileSystemConfig]
        _entries: EntryIndex
        _unlisted: list[FileSystemConfig]
        _debouncer: Debouncer

        def config_for_path(self, path: str) -> FileSystemConfig | None: ...

    @property
    def _index(self) -> EntryIndex:
        """The map of entries. Every use goes through here, so the first one lists
        what the backends of configs not indexed yet hold: building a filesystem
        (or an agent over it) does no I/O. Callers hold the lock."""
        if self._unlisted:
            with self._lock:
                pending, self._unlisted = self._unlisted, []
                for config in pending:
                    self._index_config(config)
        return self._entries

    def _call(
        self, config: FileSystemConfig, method: str, entry: FileEntry, *args: Any
    ) -> Any:
        """``backend.method(entry, *args, opts)``; None when an optional method is
        missing. Backend failures become ``PersistenceError``."""
        function = getattr(config.persistence, method, None)
        if function is None:
            return None
        opts = self._opts(config)
        try:
            return function(entry, *args, opts)
        except FileSystemError:
            raise
        except Exception as exc:
            logger.warning(
                "Storage %s failed for %s", method, entry.path, exc_info=True
            )
            raise PersistenceError(
                f"Storage failed to {method.replace('_', ' ')} {entry.path}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc

    def _opts(self, config: FileSystemConfig) -> dict[str, Any]:
        """The config's storage opts; ``max_file_size`` is the smallest limit that
        applies (the filesystem's or the config's), so a backend never reads a
        larger file into memory."""
        opts = config.build_storage_opts(self.scope_key)
        limit = self.max_file_size
        if limit is not None and (
            opts.get("max_file_size") is None or opts["max_file_size"] > limit
        ):
            opts["max_file_size"] = limit
        return opts

    def _store(self, config: FileSystemConfig, entry: FileEntry) -> FileEntry:
        """Write ``entry`` to storage; the stored entry, clean, content kept."""
        stored = self._call(config, "write", entry)
        if not isinstance(stored, FileEntry):
            stored = entry
        if (
            stored.path == entry.path
            and stored.persistence == "persisted"
            and stored.content is entry.content
            and stored.loaded == entry.loaded
            and not stored.dirty
        ):
            return stored  # already what we keep (the common case): no copy
        return replace(
            stored,
            path=entry.path,
            persistence="persisted",
            content=entry.content if stored.content is None else stored.content,
            loaded=entry.loaded,
            dirty_content=False,
            dirty_non_content=False,
        )

    def _load(self, entry: FileEntry) -> FileEntry:
        """Bring ``entry``'s content from storage into the map."""
        config = self.config_for_path(entry.path)
        if config is None:
            raise PersistenceError(
                f"{entry.path} is marked as stored but no storage config covers it."
            )
        try:
            stored = self._call(config, "load", entry)
        except FileNotFound:
            # Deleted from storage by someone else: forget it here too.
            if not entry.dirty:
                self._index.pop(entry.path)
            raise FileNotFound(f"File not found: {entry.path}") from None
        if entry.dirty_non_content:
            # Local attribute changes not yet stored win over storage's.
            loaded = entry.mark_loaded(stored.content or "")
        else:
            loaded = replace(
                stored, path=entry.path, persistence="persisted", loaded=True
            )
            loaded = loaded.mark_clean()
        self._index.put(loaded)
        return loaded

    def _load_unindexed(self, path: str) -> FileEntry:
        """A path the map does not know may exist in storage (another worker wrote
        it since this process indexed): ask the backend before saying not found."""
        config = self.config_for_path(path)
        if config is None:
            raise FileNotFound(f"File not found: {path}")
        probe = FileEntry.new_indexed_file(path)
        try:
            stored: FileEntry = self._call(config, "load", probe)
        except FileNotFound:
            raise FileNotFound(f"File not found: {path}") from None
        entry = replace(stored, path=path, persistence="persisted", loaded=True)
        entry = entry.mark_clean()
        self._index.put(entry)
        return entry

    def _move_in_storage(
        self,
        config: FileSystemConfig | None,
        entry: FileEntry,
        target: str,
        stale: list[FileEntry],
    ) -> FileEntry:
        """``entry`` moved to ``target`` in storage. A backend without
        ``move_in_storage`` gets a write at the new path; the old one is appended to
        ``stale`` for the caller to delete once every write succeeded."""
        title = entry.title
        if title is not None and title == basename(entry.path):
            title = basename(target)  # an inferred title follows the new name
        moved = replace(entry, path=target, title=title)
        if config is None or entry.persistence != "persisted":
            return moved
        result = self._call(config, "move_in_storage", entry, target)
        if isinstance(result, FileEntry):
            return replace(
                result,
                path=target,
                title=title,
                persistence="persisted",
                content=entry.content,
                loaded=entry.loaded,
                dirty_content=entry.dirty_content,
                dirty_non_content=entry.dirty_non_content,
            )
        if not entry.loaded:
            moved = replace(self._load(entry), path=target, title=title)
        stale.append(entry)
        return self._store(config, moved)

    # Persisting dirty entries -----------------------------------------------------
    def _persist(self, path: str) -> FileEntry | None:
        self._debouncer.discard(path)
        entry = self._index.get(path)
        if entry is None or entry.persistence != "persisted" or not entry.dirty:
            return entry
        config = self.config_for_path(path)
        if config is None:
            return entry
        if entry.dirty_non_content and not entry.dirty_content:
            result = self._call(config, "update_metadata_in_storage", entry)
            if isinstance(result, FileEntry):
                stored = replace(
                    result,
                    path=path,
                    persistence="persisted",
                    content=entry.content,
                    loaded=entry.loaded,
                ).mark_clean()
                self._index.put(stored)
                return stored
            if not entry.loaded and not entry.is_directory:
                # A full write needs the content we have not read yet.
                content = self._call(config, "load", entry).content or ""
                entry = entry.mark_loaded(content)
        stored = self._store(config, entry)
        self._index.put(stored)
        return stored

    def has_pending(self) -> bool:
        """Whether changes wait for their debounce: a lock-free look (a dict's length
        under the GIL), for the event loop, which must never wait on this lock
        while a tool call in a worker thread holds it."""
        return len(self._debouncer) > 0

    @property
    def pending_paths(self) -> list[str]:
        """Paths with changes waiting for their debounce."""
        with self._lock:
            return self._debouncer.paths()

    def flush_all(self) -> int:
        """Store every pending change now; returns how many were stored. A failure is
        logged and the path stays pending for the next flush."""
        stored = 0
        with self._lock:
            paths = self._debouncer.paths()
            self._debouncer.cancel()
            for path in paths:
                if self._persist_logged(path):
                    stored += 1
        return stored

    def _on_timer(self) -> None:
        with self._lock:
            self._debouncer.fired()
            for path in self._debouncer.due():
                self._persist_logged(path)
            self._debouncer.rearm()

    def _persist_logged(self, path: str) -> bool:
        try:
            self._persist(path)
        except FileSystemError:
            logger.exception("Could not persist %s; it stays pending", path)
            config = self.config_for_path(path)
            self._debouncer.schedule(
                path, max(config.debounce_ms if config else 0, 1000)
            )
            return False
        return True

    # Indexing ---------------------------------------------------------------------
    def _listed(self, config: FileSystemConfig) -> list[FileEntry] | None:
        try:
            listed = config.persistence.list_persisted_entries(self._opts(config))
        except Exception:
            logger.warning("Cannot list files of %s", config.mount, exc_info=True)
            return None
        entries = []
        for entry in listed:
            try:
                path = normalize_file_path(entry.path)
            except InvalidPath:
                logger.warning(
                    "Storage of %s lists a bad path %r", config.mount, entry.path
                )
                continue
            # A path another config claims belongs to that config's storage.
            if self.config_for_path(path) is config:
                entries.append(replace(entry, path=path, persistence="persisted"))
        return entries

    def _index_config(self, config: FileSystemConfig) -> None:
        for entry in self._listed(config) or []:
            if entry.path not in self._entries:
                self._entries.put(entry)

    def reset(self) -> None:
        """Back to what storage holds: memory files, unsaved changes and pending
        writes are dropped, and persisted files are indexed again (unloaded, on
        first use)."""
        with self._lock:
            self._debouncer.clear()
            self._entries.clear()
            self._unlisted = list(self._configs.values())

    def refresh(self) -> None:
        """Merge what storage holds now (other workers' writes and deletes) into the
        map, keeping unsaved local changes and content that did not change."""
        with self._lock:
            self._unlisted = []  # listed below, once
            for config in self._configs.values():
                listed = self._listed(config)
                if listed is None:
                    continue
                fresh = {e.path: e for e in listed}
                for path in list(self._index):
                    entry = self._index.get(path)
                    if (
                        entry is None
                        or entry.persistence != "persisted"
                        or self.config_for_path(path) is not config
                        or entry.dirty
                        or path in self._debouncer
                    ):
                        continue
                    new = fresh.pop(path, None)
                    if new is None:
                        self._index.pop(path)
                    elif not _same_version(entry, new):
                        self._index.put(new)
                for entry in fresh.values():
                    if entry.path not in self._index:
                        self._index.put(entry)


def _same_version(old: FileEntry, new: FileEntry) -> bool:
    if old.is_directory or new.is_directory:
        return old.entry_type == new.entry_type
    a, b = old.metadata, new.metadata
    if a is None or b is None:
        return False
    if a.checksum and b.checksum:
        return a.checksum == b.checksum
    return a.size == b.size and a.modified_at == b.modified_at
