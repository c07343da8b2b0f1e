"""Changing an entry's attributes, not its content (part of FileSystemState).

Title, id and file type, and the free ``custom`` metadata: what a UI or a middleware
sets on a file. Stored at once, or on the debounce timer when asked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from .entries import FileEntry
from .errors import FileNotFound, InvalidEntry
from .paths import normalize_file_path, valid_name

if TYPE_CHECKING:
    from .config import FileSystemConfig
    from .debounce import Debouncer
    from .index import EntryIndex

ENTRY_FIELDS = ("title", "id", "file_type")
PersistMode = Literal["immediate", "debounce"]


class UpdateMixin:
    """update_entry and update_custom_metadata of FileSystemState."""

    if TYPE_CHECKING:
        _lock: Any
        _index: EntryIndex
        _debouncer: Debouncer

        def config_for_path(self, path: str) -> FileSystemConfig | None: ...
        def _check_writable(
            self, config: FileSystemConfig | None, path: str, verb: str
        ) -> None: ...
        def _persist(self, path: str) -> FileEntry | None: ...
        def _announce(self, changes: list[tuple[str, str]]) -> None: ...

    def update_entry(
        self,
        path: str,
        attrs: Mapping[str, Any],
        *,
        persist: PersistMode = "immediate",
    ) -> FileEntry:
        """Change ``title``, ``id`` and/or ``file_type`` (not content)."""
        unknown = sorted(set(attrs) - set(ENTRY_FIELDS))
        if unknown:
            raise InvalidEntry(
                f"Cannot update {', '.join(unknown)}; only {', '.join(ENTRY_FIELDS)} "
                "can be changed."
            )
        for key, value in attrs.items():
            if value is not None and not isinstance(value, str):
                raise InvalidEntry(f"{key} must be a string or None, not {value!r}")
        title = attrs.get("title")
        if title is not None and not valid_name(title):
            raise InvalidEntry(
                f"Title {title!r} cannot contain '/' or NUL, be empty or be padded "
                "with whitespace."
            )

        def change(entry: FileEntry) -> FileEntry:
            diff = {k: v for k, v in attrs.items() if getattr(entry, k) != v}
            return replace(entry, **diff) if diff else entry

        return self._update(path, change, persist, "update")

    def update_custom_metadata(
        self,
        path: str,
        custom: Mapping[str, Any],
        *,
        persist: PersistMode = "immediate",
    ) -> FileEntry:
        """Merge ``custom`` into the entry's ``metadata.custom``."""
        return self._update(
            path, lambda entry: entry.with_custom(dict(custom)), persist, "update"
        )

    def _update(
        self,
        path: str,
        change: Callable[[FileEntry], FileEntry],
        persist: PersistMode,
        verb: str,
    ) -> FileEntry:
        path = normalize_file_path(path)
        with self._lock:
            entry = self._index.get(path)
            if entry is None:
                raise FileNotFound(f"File not found: {path}")
            config = self.config_for_path(path)
            self._check_writable(config, path, verb)
            updated = change(entry)
            if updated is entry:
                return entry
            if updated.persistence == "persisted":
                updated = replace(updated, dirty_non_content=True)
            self._index.put(updated)
            if config is not None and updated.persistence == "persisted":
                if persist == "debounce":
                    self._debouncer.schedule(path, config.debounce_ms or 5000)
                else:
                    self._persist(path)
            updated = self._index.get(path) or updated
        self._announce([("file_updated", path)])
        return updated
