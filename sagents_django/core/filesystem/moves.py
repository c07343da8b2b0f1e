"""Deleting and moving entries (part of FileSystemState).

Both touch a whole subtree: every check (read-only configs, one storage backend for
source and target, no target in the way) runs before the first change, storage is
changed before the map, and a directory's contents go before the directory itself
(deleting) or after it (moving), so storage never sees an orphan.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .entries import FileEntry
from .errors import (
    DirectoryNotEmpty,
    FileExists,
    FileSystemError,
    InvalidPath,
    ReadOnlyPath,
)
from .paths import is_within, normalize_file_path, rebase

if TYPE_CHECKING:
    from .config import FileSystemConfig
    from .debounce import Debouncer
    from .index import EntryIndex


class MoveMixin:
    """delete_file and move_file of FileSystemState."""

    if TYPE_CHECKING:
        _lock: Any
        _index: EntryIndex
        _debouncer: Debouncer

        def config_for_path(self, path: str) -> FileSystemConfig | None: ...
        def _is_mount(self, path: str) -> bool: ...
        def _check_parents(self, path: str) -> None: ...
        def _check_writable(
            self, config: FileSystemConfig | None, path: str, verb: str
        ) -> None: ...
        def _announce(self, changes: list[tuple[str, str]]) -> None: ...
        def _load_unindexed(self, path: str) -> FileEntry: ...
        def _ensure_ancestors(self, path: str) -> list[tuple[str, str]]: ...
        def _call(
            self, config: FileSystemConfig, method: str, entry: FileEntry, *args: Any
        ) -> Any: ...
        def _move_in_storage(
            self,
            config: FileSystemConfig | None,
            entry: FileEntry,
            target: str,
            stale: list[FileEntry],
        ) -> FileEntry: ...

    def delete_file(self, path: str, *, recursive: bool = False) -> list[str]:
        """Delete a file or directory (a non-empty one only with ``recursive``);
        storage first, so a failing backend keeps the entry. Returns the paths."""
        path = normalize_file_path(path)
        changes: list[tuple[str, str]] = []
        with self._lock:
            entry = self._index.get(path)
            children = self._index.children(path)
            if entry is None and not children:
                # Stored by another worker since we indexed? (FileNotFound if not.)
                entry = self._load_unindexed(path)
            if self._is_mount(path):
                raise ReadOnlyPath(
                    f"{path} is a storage directory; it cannot be deleted."
                )
            for target in [path, *children]:
                self._check_writable(
                    self.config_for_path(target), target, "delete from"
                )
            if children and not recursive:
                raise DirectoryNotEmpty(
                    f"Directory {path} is not empty ({len(children)} entries); delete "
                    "or move its files first."
                )
            # Deepest first, so storage never sees a directory before its contents.
            targets = sorted(children, key=lambda p: -p.count("/"))
            if entry is not None:
                targets.append(path)
            for target in targets:
                self._delete_one(target)
                changes.append(("file_deleted", target))
        self._announce(changes)
        return [p for _, p in changes]

    def _delete_one(self, path: str) -> None:
        entry = self._index.get(path)
        if entry is None:
            return
        config = self.config_for_path(path)
        if entry.persistence == "persisted" and config is not None:
            self._call(config, "delete", entry)
        self._debouncer.discard(path)
        self._index.pop(path)

    def move_file(self, old_path: str, new_path: str) -> list[FileEntry]:
        """Move a file or a directory with its children; returns the moved entries."""
        old, new = normalize_file_path(old_path), normalize_file_path(new_path)
        changes: list[tuple[str, str]] = []
        with self._lock:
            root = self._index.get(old)
            if root is None and not self._index.has_children(old):
                root = self._load_unindexed(old)  # FileNotFound if nowhere
            if old == new:
                return [root] if root else []
            if is_within(new, old):
                raise InvalidPath(f"Cannot move {old} into itself ({new}).")
            affected = sorted(
                [*([old] if root else []), *self._index.children(old)],
                key=lambda p: p.count("/"),
            )
            config = self._check_move(old, new, affected)
            moved: list[FileEntry] = []
            stale: list[FileEntry] = []
            for path in affected:
                entry = self._index.get(path)
                if entry is None:  # pragma: no cover - affected comes from the index
                    continue
                target = rebase(path, old, new)
                new_entry = self._move_in_storage(config, entry, target, stale)
                self._debouncer.move(path, target)
                self._index.pop(path)
                self._index.put(new_entry)
                moved.append(new_entry)
                changes += [("file_deleted", path), ("file_updated", target)]
            if config is not None:
                for entry in reversed(stale):
                    self._call(config, "delete", entry)
            changes += self._ensure_ancestors(new)
        self._announce(changes)
        return moved

    def _check_move(
        self, old: str, new: str, affected: list[str]
    ) -> FileSystemConfig | None:
        config = self.config_for_path(old)
        target_config = self.config_for_path(new)
        self._check_writable(config, old, "move from")
        self._check_writable(target_config, new, "move to")
        if self._is_mount(old):
            raise ReadOnlyPath(f"{old} is a storage directory; it cannot be moved.")
        if any(self.config_for_path(p) is not config for p in affected) or (
            target_config is not config
        ):
            where = config.mount if config else "its current storage"
            raise FileSystemError(
                "Cannot move files across different storage backends. The file can "
                f"only be moved within {where}."
            )
        for path in affected:
            target = rebase(path, old, new)
            if target in self._index or (
                path == old and self._index.has_children(target)
            ):
                raise FileExists(f"Target already exists: {target}")
        self._check_parents(new)
        return config
