"""FileSystemState: one scope's virtual filesystem, shared by every agent in the process.

Sagents keeps a filesystem in a GenServer and returns new states from pure functions;
here one object per scope lives in the process (see ``registry``) and tool calls run
in worker threads, so the object is mutable and every operation holds its lock. Its
methods raise ``FileSystemError`` subclasses whose messages are written for the model.

Building one does no I/O: an agent is built on every turn, and a turn that never
touches a file should never list storage. What the backends hold is indexed on the
first operation that needs the map (see ``StorageMixin._index``).

Storage is write-through: a write reaches the config's backend before the method
returns, and a failing backend leaves the map unchanged. Files under no config live
in memory only. Persisted files listed by a backend are indexed without content and
loaded on first read; a path a backend knows but the index does not (written by
another worker since) is looked up on read. File changes are announced through
``core.events.emit`` (``file_updated`` / ``file_deleted``) and to ``subscribe``rs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any

from .. import events
from ..exceptions import ConfigurationError
from ..limits import MAX_FILE_BYTES
from .config import FileSystemConfig
from .debounce import Debouncer
from .entries import FileEntry, Persistence, byte_size
from .errors import (
    FileExists,
    InvalidPath,
    PathIsDirectory,
    PathNotDirectory,
    ReadOnlyPath,
    SizeLimitExceeded,
)
from .index import EntryIndex
from .moves import MoveMixin
from .paths import (
    ancestor_paths,
    basename,
    normalize_file_path,
    normalize_path,
)
from .scope import canonical_scope, scope_to_json
from .storage import StorageMixin
from .updates import UpdateMixin

logger = logging.getLogger(__name__)

DEFAULT_MAX_FILE_SIZE = MAX_FILE_BYTES
"""1 MiB: about 250,000 tokens, more than a model should write in one file."""
DEFAULT_MAX_TOTAL_SIZE = 100 * 1024 * 1024
Listener = Callable[[str, dict[str, Any]], Any]


class FileSystemState(UpdateMixin, MoveMixin, StorageMixin):
    """The files of one scope, with their persistence configs."""

    def __init__(
        self,
        scope_key: Any,
        *,
        configs: Iterable[FileSystemConfig] = (),
        max_file_size: int | None = DEFAULT_MAX_FILE_SIZE,
        max_total_size: int | None = DEFAULT_MAX_TOTAL_SIZE,
    ) -> None:
        self.scope_key = canonical_scope(scope_key)
        self.scope_json = scope_to_json(self.scope_key)
        self.max_file_size = max_file_size
        self.max_total_size = max_total_size
        self._lock: AbstractContextManager[Any] = threading.RLock()
        self._configs: dict[str, FileSystemConfig] = {}
        self._specific: list[FileSystemConfig] = []
        self._default: FileSystemConfig | None = None
        self._entries = EntryIndex(self._size_key)
        self._unlisted: list[FileSystemConfig] = []
        self._debouncer = Debouncer(self._on_timer, self.flush_all)
        self._listeners: list[Listener] = []
        for config in configs:
            self._add_config(config)

    def __repr__(self) -> str:
        return f"<FileSystemState {self.scope_json!r} files={len(self._entries)}>"

    # Configs ----------------------------------------------------------------------
    def _add_config(self, config: FileSystemConfig) -> None:
        if not isinstance(config, FileSystemConfig):
            raise ConfigurationError(f"Expected a FileSystemConfig, got {config!r}")
        if config.key in self._configs:
            raise ConfigurationError(
                f"Base directory {config.key!r} already has a persistence config"
            )
        if config.default and self._default is not None:
            raise ConfigurationError("Only one FileSystemConfig may be the default")
        self._configs[config.key] = config
        self._unlisted.append(config)  # indexed on first use
        if config.base_directory:
            self._specific.append(config)
            # The deepest base directory wins ("/a/b" before "/a").
            self._specific.sort(key=lambda c: -len(c.mount))
        if config.default:
            self._default = config

    def register_persistence(self, config: FileSystemConfig) -> None:
        """Add a config; what its backend already stores is indexed on first use."""
        with self._lock:
            self._add_config(config)
            self._entries.recount()

    def get_persistence_configs(self) -> dict[str, FileSystemConfig]:
        return dict(self._configs)

    def config_for_path(self, path: str) -> FileSystemConfig | None:
        for config in self._specific:
            if config.matches_path(path):
                return config
        return self._default

    def _size_key(self, path: str) -> str | None:
        config = self.config_for_path(path)
        return config.key if config else None

    def _persistence_of(self, path: str) -> Persistence:
        return "persisted" if self.config_for_path(path) else "memory"

    def file_size_limit(self, path: str) -> int | None:
        """The largest file allowed at ``path``, in bytes (None: no limit)."""
        config = self.config_for_path(path)
        limits = [
            limit
            for limit in (self.max_file_size, config.max_file_size if config else None)
            if limit is not None
        ]
        return min(limits) if limits else None

    # Reading ----------------------------------------------------------------------
    def read_file(self, path: str) -> FileEntry:
        """The entry at ``path`` with its content loaded (lazily, from storage)."""
        path = normalize_file_path(path)
        with self._lock:
            entry = self._index.get(path)
            if entry is None:
                if self._index.has_children(path):
                    return self._index.synthesized_directory(
                        path, self._persistence_of(path)
                    )
                return self._load_unindexed(path)
            if not entry.loaded:
                return self._load(entry)
            return entry

    def load_file(self, path: str) -> None:
        """Bring a persisted file's content into memory (no-op when loaded)."""
        self.read_file(path)

    def peek_file(self, path: str) -> FileEntry:
        """The entry at ``path`` with its content, without keeping content loaded
        from storage in memory (for reading many files once, as a search does)."""
        path = normalize_file_path(path)
        with self._lock:
            entry = self._index.get(path)
            if entry is None or entry.loaded or entry.is_directory:
                return self.read_file(path)
            config = self.config_for_path(path)
            if config is None:
                return self.read_file(path)
            stored: FileEntry = self._call(config, "load", entry)
            return replace(stored, path=path, persistence="persisted", loaded=True)

    def file_exists(self, path: str) -> bool:
        try:
            path = normalize_file_path(path)
        except InvalidPath:
            return False
        with self._lock:
            return path in self._index or self._index.has_children(path)

    def is_directory(self, path: str) -> bool:
        """Whether ``path`` is a directory (an entry, a config's base directory, or
        implied by files below it)."""
        try:
            path = normalize_path(path)
        except InvalidPath:
            return False
        with self._lock:
            return path == "/" or self._index.is_directory(path) or self._is_mount(path)

    def locked(self) -> AbstractContextManager[Any]:
        """Hold the filesystem's lock across several calls, so a read-modify-write
        (an edit) is not interleaved with another tool call's write."""
        return self._lock

    def list_entries(self) -> list[FileEntry]:
        """Every entry sorted by path, plus directories implied by deeper paths."""
        with self._lock:
            return self._index.listing(self._persistence_of)

    def list_files(self) -> list[str]:
        """Paths of files (not directories), sorted, loaded or not."""
        return [e.path for e in self.list_entries() if not e.is_directory]

    def stats(self) -> dict[str, Any]:
        with self._lock:
            entries = list(self._index.files.values())
            return {
                "total_files": sum(1 for e in entries if not e.is_directory),
                "directories": sum(1 for e in entries if e.is_directory),
                "memory_files": sum(1 for e in entries if e.persistence == "memory"),
                "persisted_files": sum(
                    1 for e in entries if e.persistence == "persisted"
                ),
                "loaded_files": sum(1 for e in entries if e.loaded),
                "not_loaded_files": sum(1 for e in entries if not e.loaded),
                "dirty_files": sum(1 for e in entries if e.dirty),
                "pending_writes": len(self._debouncer),
                "total_size": self._index.total_size(),
            }

    # Writing ----------------------------------------------------------------------
    def write_file(
        self,
        path: str,
        content: str,
        *,
        title: str | None = None,
        mime_type: str | None = None,
        custom: Mapping[str, Any] | None = None,
    ) -> FileEntry:
        """Create or overwrite a file; existing metadata (created_at, custom) is kept."""
        path = normalize_file_path(path)
        if not isinstance(content, str):
            raise TypeError(f"File content must be a str, not {type(content).__name__}")
        changes: list[tuple[str, str]] = []
        with self._lock:
            existing = self._index.get(path)
            if self._index.is_directory(path) or self._is_mount(path):
                raise PathIsDirectory(
                    f"{path} is a directory; write to a file inside it instead."
                )
            self._check_parents(path)
            config = self.config_for_path(path)
            self._check_writable(config, path, "write to")
            self._check_size(config, path, byte_size(content), existing)
            own = dict(custom) if custom else None
            if existing is not None:
                entry = existing.update_content(
                    content, mime_type=mime_type, custom=own
                )
                if title is not None:
                    entry = replace(entry, title=title)
            elif config is not None:
                entry = FileEntry.new_persisted_file(
                    path, content, title=title, mime_type=mime_type, custom=own
                )
            else:
                entry = FileEntry.new_memory_file(
                    path, content, title=title, mime_type=mime_type, custom=own
                )
            changes += self._ensure_ancestors(path)
            if config is not None:
                if existing is None or not config.debounce_ms:
                    entry = self._store(config, entry)
                    self._debouncer.discard(path)
                else:
                    self._debouncer.schedule(path, config.debounce_ms)
            self._index.put(entry)
            changes.append(("file_updated", path))
        self._announce(changes)
        return entry

    def create_directory(
        self,
        path: str,
        *,
        title: str | None = None,
        custom: Mapping[str, Any] | None = None,
    ) -> FileEntry:
        """A directory entry (stored at once under a config)."""
        path = normalize_file_path(path)
        changes: list[tuple[str, str]] = []
        with self._lock:
            if path in self._index or self._index.has_children(path):
                raise FileExists(f"{path} already exists.")
            self._check_parents(path)
            config = self.config_for_path(path)
            self._check_writable(config, path, "create a directory in")
            changes += self._ensure_ancestors(path)
            entry = FileEntry.new_directory(
                path,
                title=title,
                custom=dict(custom or {}),
                persistence="persisted" if config else "memory",
            )
            if config is not None:
                entry = self._store(config, entry)
            self._index.put(entry)
            changes.append(("file_updated", path))
        self._announce(changes)
        return entry

    def ensure_ancestor_directories(self, path: str) -> None:
        """Create the missing directories above ``path`` (like ``mkdir -p``)."""
        path = normalize_file_path(path)
        with self._lock:
            self._check_parents(path)
            changes = self._ensure_ancestors(path)
        self._announce(changes)

    def _ensure_ancestors(self, path: str) -> list[tuple[str, str]]:
        changes = []
        for parent in ancestor_paths(path):
            if parent in self._index:
                continue
            config = self.config_for_path(parent)
            stored = config is not None and not config.readonly
            entry = FileEntry.new_directory(
                parent,
                title=basename(parent),
                persistence="persisted" if stored else "memory",
            )
            if stored and config is not None:
                entry = self._store(config, entry)
            self._index.put(entry)
            changes.append(("file_updated", parent))
        return changes

    def register_files(self, entries: FileEntry | Iterable[FileEntry]) -> None:
        """Put entries in the map as they are (pre-population; nothing is stored)."""
        items = [entries] if isinstance(entries, FileEntry) else list(entries)
        checked = [replace(e, path=normalize_file_path(e.path)) for e in items]
        with self._lock:
            for entry in checked:
                self._index.put(entry)

    # Helpers ----------------------------------------------------------------------
    def _is_mount(self, path: str) -> bool:
        return any(c.mount == path for c in self._specific)

    def _check_parents(self, path: str) -> None:
        for parent in ancestor_paths(path):
            entry = self._index.get(parent)
            if entry is not None and not entry.is_directory:
                raise PathNotDirectory(
                    f"Cannot use {path}: {parent} is a file, not a directory."
                )

    def _check_writable(
        self, config: FileSystemConfig | None, path: str, verb: str
    ) -> None:
        if config is not None and config.readonly:
            raise ReadOnlyPath(
                f"Cannot {verb} read-only directory {config.mount} ({path}); files "
                "there can be read but not changed."
            )

    def _check_size(
        self,
        config: FileSystemConfig | None,
        path: str,
        size: int,
        existing: FileEntry | None,
    ) -> None:
        for limit in (self.max_file_size, config.max_file_size if config else None):
            if limit is not None and size > limit:
                raise SizeLimitExceeded(
                    f"{path} would be {size} bytes; the limit per file is {limit} "
                    "bytes. Split the content into smaller files."
                )
        growth = size - (existing.size if existing else 0)
        if growth <= 0:
            return
        total = self._index.total_size() + growth
        if self.max_total_size is not None and total > self.max_total_size:
            raise SizeLimitExceeded(
                f"Writing {path} would bring the filesystem to {total} bytes; the "
                f"limit is {self.max_total_size} bytes. Delete files you no longer need."
            )
        if config is not None and config.max_total_size is not None:
            used = self._index.sizes.get(config.key, 0) + growth
            if used > config.max_total_size:
                raise SizeLimitExceeded(
                    f"Writing {path} would bring {config.mount} to {used} bytes; the "
                    f"limit there is {config.max_total_size} bytes. Delete files you "
                    "no longer need."
                )

    # Events -----------------------------------------------------------------------
    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event, data)`` on every change, from any caller (the
        runtime's bridge to a channel-layer group); returns the unsubscribe function."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def _announce(self, changes: list[tuple[str, str]]) -> None:
        # Outside the lock: a slow listener must not block other tool calls.
        if not changes:
            return
        listeners = list(self._listeners)
        for name, path in changes:
            data = {"path": path, "scope": self.scope_json}
            events.emit(name, data)
            for listener in listeners:
                try:
                    listener(name, dict(data))
                except Exception:
                    logger.exception("Filesystem listener %r raised", listener)
