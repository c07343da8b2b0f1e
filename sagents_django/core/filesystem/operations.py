"""What each file tool does: the model's arguments in, the text it reads out.

Split from the middleware (which owns the lifecycle, the tool wrapping and the time
budget) so each operation reads as one function of a ``FileSystemState``. Every
operation takes the call's ``Deadline`` and keeps to three bounds: its output stays
under ``MAX_TOOL_RESULT_CHARS`` (saying how to see the rest), its transient memory
stays within a small multiple of the file size limit (an edit computes its result's
size before building it, a search holds one file at a time and does not keep what
it read in memory), and long loops check the deadline.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..limits import MAX_FILE_BYTES, MAX_TOOL_RESULT_CHARS
from .budget import Deadline
from .entries import FileEntry
from .errors import (
    FileNotFound,
    FileSystemError,
    PathIsDirectory,
    PersistenceError,
)
from .paths import is_within, normalize_file_path, normalize_path
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
    ) -> None:
        self.filesystem = filesystem
        self.entry_to_map = entry_to_map
        self.max_ls_entries = max_ls_entries

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
        entry = self.filesystem.read_file(path)
        if entry.is_directory:
            raise PathIsDirectory(
                f"{entry.path} is a directory; use ls to see its files."
            )
        return entry

    def read_file(self, args: dict[str, Any], deadline: Deadline) -> str:
        entry = self._file(args["file_path"])
        offset = int(args.get("offset") or 0)
        limit = int(args.get("limit") or DEFAULT_READ_LIMIT)
        return number_lines(entry.content or "", offset, limit)

    def write_file(self, args: dict[str, Any], deadline: Deadline) -> str:
        entry = self.filesystem.write_file(args["file_path"], args["content"])
        return _JSON.encode(self.entry_to_map(entry))

    def _edit_limit(self, path: str) -> int:
        limit = self.filesystem.file_size_limit(path)
        if limit is None:
            limit = self.filesystem.max_total_size or UNLIMITED_EDIT_BYTES
        return limit

    def edit_file(self, args: dict[str, Any], deadline: Deadline) -> str:
        with self.filesystem.locked():
            entry = self._file(args["file_path"])
            text, count = replace_text(
                entry.content or "",
                args["old_string"],
                args["new_string"],
                replace_all=bool(args.get("replace_all", False)),
                max_bytes=self._edit_limit(entry.path),
            )
            self.filesystem.write_file(entry.path, text)
        more = f" ({count} replacements)" if count > 1 else ""
        return f"File edited successfully: {entry.path}{more}"

    def edit_lines(self, args: dict[str, Any], deadline: Deadline) -> str:
        start, end = int(args["start_line"]), int(args["end_line"])
        with self.filesystem.locked():
            entry = self._file(args["file_path"])
            text, count = replace_lines(
                entry.content or "",
                start,
                end,
                args["new_content"],
                max_bytes=self._edit_limit(entry.path),
            )
            self.filesystem.write_file(entry.path, text)
        return (
            f"File edited successfully: {entry.path}\n"
            f"Replaced {count} lines ({start}-{end})"
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
        for path in self.filesystem.list_files():
            if total >= max_results or chars >= MATCHES_MAX_CHARS:
                truncated = True
                break
            try:
                # Each file is read once and not kept: a search over every file
                # holds one file's content at a time.
                entry = self.filesystem.peek_file(path)
            except FileNotFound:
                continue  # deleted meanwhile
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
        self.filesystem.delete_file(path)
        return f"File deleted successfully: {path}"

    def move_file(self, args: dict[str, Any], deadline: Deadline) -> str:
        old, new = (
            normalize_file_path(args["old_path"]),
            normalize_file_path(args["new_path"]),
        )
        moved = self.filesystem.move_file(old, new)
        return f"Moved successfully: {old} -> {new} ({len(moved)} entries)"


def _directory_named(filesystem: FileSystemState, pattern: str) -> str | None:
    """The directory ``pattern`` names, when it names one (no wildcard)."""
    if "*" in pattern:
        return None
    try:
        path = normalize_path(pattern)
    except FileSystemError:
        return None
    return path if filesystem.is_directory(path) else None
