"""What each file tool does: the model's arguments in, the text it reads out.

Split from the middleware (which owns the lifecycle, the tool wrapping and the time
budget) so each operation reads as one function of a ``FileSystemState``. Every
operation takes the call's ``Deadline`` and keeps to three bounds: its output stays
under ``MAX_TOOL_RESULT_CHARS`` (saying how to see the rest), its transient memory
stays within a small multiple of the file size limit (an edit computes its result's
size before building it, a search holds one file at a time and does not keep what
it read in memory), and long loops check the deadline.

With persistence callbacks (``callbacks``), reads go through ``on_read``, listings
add ``on_list``'s paths, and every change is told to the callbacks under the
filesystem's lock, with what undoes it should they fail in fail mode.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..limits import MAX_FILE_BYTES, MAX_TOOL_RESULT_CHARS
from .budget import Deadline
from .callbacks import PersistenceCallbacks
from .entries import FileEntry
from .errors import (
    FileExists,
    FileNotFound,
    FileSystemError,
    PathIsDirectory,
    PersistenceError,
)
from .paths import is_within, normalize_file_path, normalize_path, rebase
from .search import MATCHES_MAX_CHARS, Searcher, format_search_results
from .state import FileSystemState
from .text import (
    DEFAULT_READ_LIMIT,
    number_lines,
    pattern_matcher,
    replace_lines,
    replace_text,
)

EntryToMap = Callable[[FileEntry], dict[str, Any]]
Operation = Callable[[dict[str, Any], Deadline], str]
_JSON = json.JSONEncoder(ensure_ascii=False, default=str)
_LS_MAX_CHARS = MAX_TOOL_RESULT_CHARS - 200
"""ls output, leaving room for the closing note."""
UNLIMITED_EDIT_BYTES = 64 * MAX_FILE_BYTES
"""The largest result of one edit on a filesystem configured without any size
limit: one edit never builds an unbounded string."""


class FileOperations:
    """The file tools over one filesystem."""

    def __init__(
        self,
        filesystem: FileSystemState,
        *,
        entry_to_map: EntryToMap,
        max_ls_entries: int,
        callbacks: PersistenceCallbacks | None = None,
    ) -> None:
        self.filesystem = filesystem
        self.entry_to_map = entry_to_map
        self.max_ls_entries = max_ls_entries
        self.callbacks = callbacks or None

    def by_name(self) -> dict[str, Operation]:
        return {
            "ls": self.ls,
            "read_file": self.read_file,
            "write_file": self.write_file,
            "edit_file": self.edit_file,
            "search_text": self.search_text,
            "edit_lines": self.edit_lines,
            "delete_file": self.delete_file,
            "move_file": self.move_file,
        }

    def ls(self, args: dict[str, Any], deadline: Deadline) -> str:
        pattern = args.get("pattern") or None
        entries = self.filesystem.list_entries()
        if self.callbacks is not None and self.callbacks.lists:
            known = {e.path for e in entries}
            extra = [
                FileEntry.new_indexed_file(p)
                for p in self.callbacks.listed()
                if p not in known
            ]
            if extra:
                entries = sorted([*entries, *extra], key=lambda e: e.path)
        if pattern:
            directory = _directory_named(self.filesystem, pattern)
            if directory is not None:
                entries = [
                    e
                    for e in entries
                    if is_within(e.path, directory) and e.path != directory
                ]
            else:
                match = pattern_matcher(pattern)
                kept = []
                for index, entry in enumerate(entries):
                    if index % 1024 == 0:
                        deadline.check("narrow the listing with a simpler pattern.")
                    if match(entry.path):
                        kept.append(entry)
                entries = kept
        if not entries:
            return (
                f"No files match pattern: {pattern}"
                if pattern
                else "No files in filesystem"
            )
        shown = [self.entry_to_map(e) for e in entries[: self.max_ls_entries]]
        text = _JSON.encode(shown)
        if len(text) > _LS_MAX_CHARS:
            # Long paths: as many entries as fit, each encoded alone.
            items: list[str] = []
            size = 2
            for item in map(_JSON.encode, shown):
                if items and size + len(item) + 2 > _LS_MAX_CHARS:
                    break
                items.append(item)
                size += len(item) + 2
            text = "[" + ", ".join(items) + "]"
            shown = shown[: len(items)]
        if len(entries) > len(shown):
            text += (
                f"\n({len(entries) - len(shown)} more entries not shown; narrow the "
                "listing with a pattern)"
            )
        return text

    def _file(self, path: Any) -> FileEntry:
        entry = self._read(path)
        if entry.is_directory:
            raise PathIsDirectory(
                f"{entry.path} is a directory; use ls to see its files."
            )
        return entry

    def _read(self, path: Any, *, peek: bool = False) -> FileEntry:
        """The entry at ``path`` with its content: from the filesystem, else (or,
        without ``cache_reads``, first) from ``on_read``."""
        callbacks = self.callbacks
        read = self.filesystem.peek_file if peek else self.filesystem.read_file
        if callbacks is None or not callbacks.reads:
            return read(path)
        path = normalize_file_path(path)
        limit = self.filesystem.file_size_limit(path)
        if callbacks.cache_reads:
            try:
                return read(path)
            except FileNotFound:
                content = callbacks.read(path, limit=limit, keep=not peek)
                if content is None:
                    raise
                return callbacks.entry(path, content)
        content = callbacks.read(path, limit=limit, keep=not peek)
        if content is None:
            return read(path)
        return callbacks.entry(path, content)

    def _in_filesystem(self, path: str) -> FileEntry | None:
        """The filesystem's entry at ``path`` with its content, for undoing a
        change (None: it has none)."""
        if self.callbacks is None or not self.callbacks.fail:
            return None
        try:
            return self.filesystem.read_file(path)
        except FileNotFound:
            return None

    def _restore(self, path: str, previous: FileEntry | None) -> None:
        """Put back what the filesystem held at ``path`` before a change."""
        fs = self.filesystem
        if previous is None:
            if fs.file_exists(path):
                fs.delete_file(path)
        elif previous.is_directory:
            if not fs.file_exists(path):
                fs.create_directory(path)
        else:
            fs.write_file(path, previous.content or "")

    def read_file(self, args: dict[str, Any], deadline: Deadline) -> str:
        entry = self._file(args["file_path"])
        offset = int(args.get("offset") or 0)
        limit = int(args.get("limit") or DEFAULT_READ_LIMIT)
        return number_lines(entry.content or "", offset, limit)

    def write_file(self, args: dict[str, Any], deadline: Deadline) -> str:
        if self.callbacks is None:
            entry = self.filesystem.write_file(args["file_path"], args["content"])
            return _JSON.encode(self.entry_to_map(entry))
        path = normalize_file_path(args["file_path"])
        with self.filesystem.locked():
            previous = self._in_filesystem(path)
            entry = self.filesystem.write_file(path, args["content"])
            warning = self._written(path, args["content"], previous)
        return _JSON.encode(self.entry_to_map(entry)) + warning

    def _written(self, path: str, content: str, previous: FileEntry | None) -> str:
        if self.callbacks is None:
            return ""
        return self.callbacks.changed(
            written={path: content}, undo=lambda: self._restore(path, previous)
        )

    def _edit_limit(self, path: str) -> int:
        limit = self.filesystem.file_size_limit(path)
        if limit is None:
            limit = self.filesystem.max_total_size or UNLIMITED_EDIT_BYTES
        return limit

    def edit_file(self, args: dict[str, Any], deadline: Deadline) -> str:
        with self.filesystem.locked():
            entry = self._file(args["file_path"])
            previous = self._in_filesystem(entry.path)
            text, count = replace_text(
                entry.content or "",
                args["old_string"],
                args["new_string"],
                replace_all=bool(args.get("replace_all", False)),
                max_bytes=self._edit_limit(entry.path),
            )
            self.filesystem.write_file(entry.path, text)
            warning = self._written(entry.path, text, previous)
        more = f" ({count} replacements)" if count > 1 else ""
        return f"File edited successfully: {entry.path}{more}{warning}"

    def edit_lines(self, args: dict[str, Any], deadline: Deadline) -> str:
        start, end = int(args["start_line"]), int(args["end_line"])
        with self.filesystem.locked():
            entry = self._file(args["file_path"])
            previous = self._in_filesystem(entry.path)
            text, count = replace_lines(
                entry.content or "",
                start,
                end,
                args["new_content"],
                max_bytes=self._edit_limit(entry.path),
            )
            self.filesystem.write_file(entry.path, text)
            warning = self._written(entry.path, text, previous)
        return (
            f"File edited successfully: {entry.path}\n"
            f"Replaced {count} lines ({start}-{end}){warning}"
        )

    def search_text(self, args: dict[str, Any], deadline: Deadline) -> str:
        searcher = Searcher(
            args["pattern"],
            case_sensitive=bool(args.get("case_sensitive", True)),
            deadline=deadline,
        )
        context_lines = int(args.get("context_lines") or 0)
        max_results = int(args.get("max_results") or 50)
        if args.get("file_path"):
            entry = self._file(args["file_path"])
            matches, truncated = searcher.matches(
                entry.content or "",
                context_lines=context_lines,
                max_results=max_results,
            )
            return format_search_results(
                [(entry.path, matches)], max_results, truncated
            )
        results, total, chars, truncated = [], 0, 0, False
        skipped: list[str] = []
        paths = self.filesystem.list_files()
        if self.callbacks is not None and self.callbacks.lists:
            paths = sorted({*paths, *self.callbacks.listed()})
        for path in paths:
            if total >= max_results or chars >= MATCHES_MAX_CHARS:
                truncated = True
                break
            try:
                # Each file is read once and not kept: a search over every file
                # holds one file's content at a time.
                entry = self._read(path, peek=True)
            except (FileNotFound, PathIsDirectory):
                continue  # deleted meanwhile, or a directory the site listed
            except PersistenceError as exc:
                skipped.append(f"{path} ({exc})")
                continue
            matches, more = searcher.matches(
                entry.content or "",
                context_lines=context_lines,
                max_results=max_results - total,
                max_chars=MATCHES_MAX_CHARS - chars - len(path) - 8,
            )
            if matches:
                results.append((path, matches))
                total += len(matches)
                chars += sum(m.size() for m in matches) + len(path) + 8
            truncated = truncated or more
        text = format_search_results(results, max_results, truncated)
        if skipped:
            text += "\n\n(Not searched: " + "; ".join(skipped[:10]) + ")"
        return text

    def delete_file(self, args: dict[str, Any], deadline: Deadline) -> str:
        path = normalize_file_path(args["file_path"])
        if self.callbacks is None:
            self.filesystem.delete_file(path)
            return f"File deleted successfully: {path}"
        with self.filesystem.locked():
            previous = self._in_filesystem(path)
            try:
                self.filesystem.delete_file(path)
            except FileNotFound:
                # Perhaps only in the site's storage.
                self.callbacks.delete_outside(path, self._held_outside(path))
                return f"File deleted successfully: {path}"
            warning = self.callbacks.changed(
                deleted=[path], undo=lambda: self._restore(path, previous)
            )
        return f"File deleted successfully: {path}{warning}"

    def _held_outside(self, path: str) -> bool:
        """Whether the site's storage holds ``path`` (by ``on_read``, else
        ``on_list``)."""
        callbacks = self.callbacks
        if callbacks is None:
            return False
        if callbacks.reads:
            limit = self.filesystem.file_size_limit(path)
            return callbacks.read(path, limit=limit) is not None
        return callbacks.lists and path in callbacks.listed()

    def move_file(self, args: dict[str, Any], deadline: Deadline) -> str:
        old, new = (
            normalize_file_path(args["old_path"]),
            normalize_file_path(args["new_path"]),
        )
        if self.callbacks is None:
            moved = self.filesystem.move_file(old, new)
            return f"Moved successfully: {old} -> {new} ({len(moved)} entries)"
        fs = self.filesystem
        with fs.locked():
            try:
                moved = fs.move_file(old, new)
            except FileNotFound:
                # Only in the site's storage: read it there, write it here.
                entry = self._read(old)
                if fs.file_exists(new):
                    raise FileExists(f"Target already exists: {new}") from None
                fs.write_file(new, entry.content or "")
                warning = self.callbacks.changed(
                    written={new: entry.content or ""},
                    deleted=[old],
                    undo=lambda: self._restore(new, None),
                )
                return f"Moved successfully: {old} -> {new} (1 entries){warning}"
            files = [e.path for e in moved if not e.is_directory]
            written = (
                {p: fs.read_file(p).content or "" for p in files}
                if self.callbacks.writes
                else {}
            )
            deleted = [rebase(p, new, old) for p in files]
            warning = self.callbacks.changed(
                written=written, deleted=deleted, undo=lambda: fs.move_file(new, old)
            )
        return f"Moved successfully: {old} -> {new} ({len(moved)} entries){warning}"


def _directory_named(filesystem: FileSystemState, pattern: str) -> str | None:
    """The directory ``pattern`` names, when it names one (no wildcard)."""
    if "*" in pattern:
        return None
    try:
        path = normalize_path(pattern)
    except FileSystemError:
        return None
    return path if filesystem.is_directory(path) else None
