"""What a file tool waiting for approval would change: a diff against the file.

``write_file`` and ``edit_file`` are the calls a person most often has to judge,
and their arguments alone (a path and a wall of text) do not say what changes.
The diff is computed on the server with ``difflib`` from the file as stored now
(the conversation's file panel reads the same rows) and the content the call would
leave; every line is text the template escapes. Bounded: a large file or diff is
cut with a note, so a hostile call cannot make the page heavy.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Literal

from sagents_django.core.filesystem.errors import FileSystemError
from sagents_django.core.filesystem.text import replace_text

from . import files

MAX_FILE_CHARS = 200_000
MAX_DIFF_LINES = 400

LineKind = Literal["add", "del", "hunk", "ctx", "head"]


@dataclass(kw_only=True, slots=True)
class Preview:
    """The change a file call would make."""

    path: str
    lines: list[tuple[LineKind, str]]
    note: str = ""
    """Said instead of, or after, the diff (a new file, an edit that finds nothing)."""


def preview(
    scope: Any, conversation: Any, tool: str, arguments: dict[str, Any]
) -> Preview | None:
    """The diff of a ``write_file``/``edit_file`` call (None for any other call)."""
    if tool not in ("write_file", "edit_file"):
        return None
    path = arguments.get("file_path", arguments.get("path"))
    if not isinstance(path, str) or not path:
        return None
    found = files.read(scope, conversation, path)
    before = found[0] if found is not None else None
    if before is not None and len(before) > MAX_FILE_CHARS:
        return Preview(
            path=path, lines=[], note="The file is too large to show a diff."
        )
    if tool == "write_file":
        after = arguments.get("content")
        if not isinstance(after, str):
            return None
        if len(after) > MAX_FILE_CHARS:
            return Preview(
                path=path, lines=[], note="The new content is too large to show."
            )
        note = "A new file." if before is None else ""
        return _diff(path, before or "", after, note)
    if before is None:
        return Preview(path=path, lines=[], note="There is no such file to edit.")
    old, new = arguments.get("old_string"), arguments.get("new_string")
    if not isinstance(old, str) or not isinstance(new, str) or not old:
        return None
    try:
        after, _count = replace_text(
            before,
            old,
            new,
            replace_all=bool(arguments.get("replace_all", False)),
            max_bytes=MAX_FILE_CHARS * 4,
        )
    except FileSystemError as exc:  # the tool would answer the model the same
        return Preview(path=path, lines=[], note=f"The edit would fail: {exc}")
    return _diff(path, before, after, "")


def _diff(path: str, before: str, after: str, note: str) -> Preview:
    lines: list[tuple[LineKind, str]] = []
    diff = difflib.unified_diff(
        before.splitlines(),
        after.splitlines(),
        fromfile=f"{path} (now)",
        tofile=f"{path} (after)",
        lineterm="",
    )
    for n, line in enumerate(diff):
        if n >= MAX_DIFF_LINES:
            note = (note + " " if note else "") + "The diff is cut here."
            break
        if line.startswith(("---", "+++")) and n < 2:
            kind: LineKind = "head"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "ctx"
        lines.append((kind, line))
    if not lines and not note:
        note = "No change: the file already holds this content."
    return Preview(path=path, lines=lines, note=note)
