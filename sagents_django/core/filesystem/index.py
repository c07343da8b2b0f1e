"""The in-memory map of entries with the counts derived from it, kept in step.

Every change to the map goes through ``put`` and ``pop`` so that three derived views
never drift: how many entries each implied directory holds (a file at ``/a/b/c`` makes
``/a`` and ``/a/b`` directories even without entries of their own), the bytes used per
config (for size limits, without summing 10,000 files on every write), and a sorted
listing cached until the next change (``ls`` after ``ls`` costs a list copy).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from .entries import FileEntry, Persistence
from .paths import ancestor_paths, basename

SizeKey = Callable[[str], "str | None"]


class EntryIndex:
    """Entries by path; not thread-safe (the filesystem holds its lock)."""

    def __init__(self, size_key: SizeKey) -> None:
        self.files: dict[str, FileEntry] = {}
        self.dir_refs: dict[str, int] = {}
        """Implied directory -> number of entries below it."""
        self.sizes: dict[str | None, int] = {}
        """Config key (None: no config) -> bytes of the files under it."""
        self._size_key = size_key
        self._listing: list[FileEntry] | None = None

    def __contains__(self, path: object) -> bool:
        return path in self.files

    def __len__(self) -> int:
        return len(self.files)

    def __iter__(self) -> Iterator[str]:
        return iter(self.files)

    def get(self, path: str) -> FileEntry | None:
        return self.files.get(path)

    def put(self, entry: FileEntry) -> None:
        old = self.files.get(entry.path)
        if old is None:
            for parent in ancestor_paths(entry.path):
                self.dir_refs[parent] = self.dir_refs.get(parent, 0) + 1
        key = self._size_key(entry.path)
        self.sizes[key] = self.sizes.get(key, 0) + entry.size - (old.size if old else 0)
        self.files[entry.path] = entry
        self._listing = None

    def pop(self, path: str) -> FileEntry | None:
        old = self.files.pop(path, None)
        if old is None:
            return None
        for parent in ancestor_paths(path):
            left = self.dir_refs[parent] - 1
            if left:
                self.dir_refs[parent] = left
            else:
                del self.dir_refs[parent]
        key = self._size_key(path)
        self.sizes[key] = self.sizes.get(key, 0) - old.size
        self._listing = None
        return old

    def clear(self) -> None:
        self.files.clear()
        self.dir_refs.clear()
        self.sizes.clear()
        self._listing = None

    def recount(self) -> None:
        """Recompute the sizes per config (after the configs changed)."""
        self.sizes = {}
        for path, entry in self.files.items():
            key = self._size_key(path)
            self.sizes[key] = self.sizes.get(key, 0) + entry.size
        self._listing = None

    def is_directory(self, path: str) -> bool:
        entry = self.files.get(path)
        return entry.is_directory if entry else path in self.dir_refs

    def has_children(self, path: str) -> bool:
        return path in self.dir_refs

    def children(self, path: str) -> list[str]:
        """Every path below ``path`` (O(n); used by delete and move only)."""
        if path not in self.dir_refs:
            return []
        prefix = path + "/"
        return [p for p in self.files if p.startswith(prefix)]

    def total_size(self) -> int:
        return sum(self.sizes.values())

    def listing(self, persistence_of: Callable[[str], Persistence]) -> list[FileEntry]:
        """Every entry plus a directory entry for each implied directory, by path."""
        if self._listing is None:
            synthesized = [
                self.synthesized_directory(path, persistence_of(path))
                for path in self.dir_refs
                if path not in self.files
            ]
            self._listing = sorted(
                [*self.files.values(), *synthesized], key=lambda e: e.path
            )
        return list(self._listing)

    def synthesized_directory(self, path: str, persistence: Persistence) -> FileEntry:
        return FileEntry(
            path=path,
            entry_type="directory",
            title=basename(path),
            persistence=persistence,
        )
