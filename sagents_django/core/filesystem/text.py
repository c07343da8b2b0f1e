"""Text operations behind the file tools, as pure functions on strings.

Numbered views (``read_file``), exact replacements (``edit_file``), line ranges
(``edit_lines``) and ``ls`` patterns (``search_text`` is in ``search``). Output formats
follow the reference: six-column right-aligned line numbers and a tab, 1-based.
Problems the model can fix raise ``EditError`` with a message for it.

Every function is bounded by its input, never by what the model asks for: lines are
found with ``str.find`` (a file of a million short lines is never split into a
million strings), a view stops at ``MAX_TOOL_RESULT_CHARS``, an edit computes the
size of its result before building it, and an ``ls`` pattern is matched in linear
time (a regular expression made from ``*a*a*a*c`` backtracks exponentially).
"""

from __future__ import annotations

from collections.abc import Callable

from ..limits import MAX_PATTERN_CHARS, MAX_TOOL_RESULT_CHARS
from .entries import byte_size
from .errors import FileSystemError, SizeLimitExceeded

DEFAULT_READ_LIMIT = 2000
MAX_LINE_CHARS = 2000
_BLOCK = 1 << 16
"""Characters counted at a time while looking for a line by number."""


class EditError(FileSystemError):
    """An edit or search the model asked for cannot be done as asked."""


def cut_line(line: str) -> str:
    if len(line) > MAX_LINE_CHARS:
        return line[:MAX_LINE_CHARS] + "... (line truncated)"
    return line


def line_count(content: str) -> int:
    return content.count("\n") + 1


def line_start(content: str, index: int) -> int:
    """Where line ``index`` (0-based, < ``line_count``) starts in ``content``."""
    position, remaining = 0, index
    # Whole blocks first (a count in C), then the last newlines one by one.
    while remaining:
        end = min(position + _BLOCK, len(content))
        found = content.count("\n", position, end)
        if found >= remaining:
            break
        remaining -= found
        position = end
    for _ in range(remaining):
        position = content.index("\n", position) + 1
    return position


def number_lines(
    content: str,
    offset: int = 0,
    limit: int = DEFAULT_READ_LIMIT,
    *,
    max_chars: int = MAX_TOOL_RESULT_CHARS,
) -> str:
    """``content`` with line numbers, ``limit`` lines from ``offset`` (0-based),
    stopping before ``max_chars`` characters with a note on how to read on."""
    total = line_count(content)
    if not content or offset >= total:
        return "File is empty or offset is beyond file length."
    position = line_start(content, offset)
    last = min(offset + limit, total)
    lines: list[str] = []
    size = 200  # room for the header and the note
    number = offset
    while number < last:
        end = content.find("\n", position)
        if end < 0:
            end = len(content)
        line = f"{number + 1:>6}\t{cut_line(content[position : min(end, position + MAX_LINE_CHARS + 1)])}"
        if lines and size + len(line) + 1 > max_chars:
            break
        lines.append(line)
        size += len(line) + 1
        number += 1
        position = end + 1
    body = "\n".join(lines)
    if number < last:
        return (
            f"Showing lines {offset + 1} to {number} of {total}:\n{body}\n"
            f"(Output truncated at {max_chars} characters; continue with "
            f"offset={number}.)"
        )
    if offset > 0 or last < total:
        return f"Showing lines {offset + 1} to {last} of {total}:\n{body}"
    return body


def replace_text(
    content: str,
    old: str,
    new: str,
    *,
    replace_all: bool = False,
    max_bytes: int | None = None,
) -> tuple[str, int]:
    """``content`` with ``old`` replaced; the new text and the number of replacements.

    With ``max_bytes``, a result larger than that is refused before it is built.
    """
    if old == "":
        raise EditError("old_string is empty; give the exact text to replace.")
    if old == new:
        raise EditError("old_string and new_string are identical; nothing to change.")
    count = content.count(old)
    if count == 0:
        raise EditError(f"String not found in file: {_preview(old)!r}")
    if count > 1 and not replace_all:
        raise EditError(
            f"String appears {count} times in file. Use replace_all: true or provide "
            "more context in old_string."
        )
    if max_bytes is not None:
        growth = count * (byte_size(new) - byte_size(old))
        size = byte_size(content) + growth
        if growth > 0 and size > max_bytes:
            raise SizeLimitExceeded(
                f"Replacing {count} occurrence(s) would make the file {size} bytes; "
                f"the limit per file is {max_bytes} bytes. Replace fewer occurrences "
                "or shorten new_string."
            )
    return content.replace(old, new), count


def _preview(text: str) -> str:
    return text if len(text) <= 200 else text[:200] + "..."


def replace_lines(
    content: str,
    start_line: int,
    end_line: int,
    new_content: str,
    *,
    max_bytes: int | None = None,
) -> tuple[str, int]:
    """Lines ``start_line``..``end_line`` (1-based, inclusive) replaced by
    ``new_content``; the new text and how many lines were replaced. With
    ``max_bytes``, a result larger than that is refused before it is built."""
    if start_line < 1:
        raise EditError("start_line must be >= 1 (line numbers are 1-based)")
    if end_line < start_line:
        raise EditError("end_line must be >= start_line")
    total = line_count(content)
    if start_line > total:
        raise EditError(
            f"start_line {start_line} is beyond file length ({total} lines)"
        )
    if end_line > total:
        raise EditError(f"end_line {end_line} is beyond file length ({total} lines)")
    head = line_start(content, start_line - 1)
    # The newline ending end_line stays (the next line keeps its own start).
    tail = line_start(content, end_line) - 1 if end_line < total else len(content)
    if max_bytes is not None:
        size = byte_size(content) - byte_size(content[head:tail])
        size += byte_size(new_content)
        if size > max_bytes:
            raise SizeLimitExceeded(
                f"The edit would make the file {size} bytes; the limit per file is "
                f"{max_bytes} bytes. Split the content into smaller files."
            )
    return content[:head] + new_content + content[tail:], end_line - start_line + 1


# ls patterns ----------------------------------------------------------------------
def pattern_matcher(pattern: str) -> Callable[[str], bool]:
    """A test for paths: ``*`` matches any characters (slashes too); a pattern not
    starting with ``/`` or ``*`` may also match from below the root ("Chapter 1/*"
    matches "/Chapter 1/a.md"); a pattern without ``*`` matches as a substring.

    Matching is linear: the literal pieces between stars are found left to right
    (with only ``*`` as a wildcard, the leftmost place of each piece is always a
    right one), never by backtracking.
    """
    if len(pattern) > MAX_PATTERN_CHARS:
        raise EditError(
            f"The pattern is {len(pattern)} characters long; the limit is "
            f"{MAX_PATTERN_CHARS}."
        )
    if "*" not in pattern:
        return lambda path: pattern in path
    pieces = pattern.split("*")
    rooted = pattern.startswith(("/", "*"))

    def match(path: str) -> bool:
        if _glob(pieces, path):
            return True
        return not rooted and _glob(pieces, path[1:])

    return match


def _glob(pieces: list[str], text: str) -> bool:
    first, last = pieces[0], pieces[-1]
    if len(first) + len(last) > len(text):
        return False
    if not text.startswith(first) or not text.endswith(last):
        return False
    position, end = len(first), len(text) - len(last)
    for piece in pieces[1:-1]:
        if piece:
            found = text.find(piece, position, end)
            if found < 0:
                return False
            position = found + len(piece)
    return True
