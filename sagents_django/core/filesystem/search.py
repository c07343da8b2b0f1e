"""search_text: patterns written by a model, run in bounded time and memory.

Why RE2 (the ``google-re2`` package) and not ``re``: a model's pattern can be
pathological. ``re`` backtracks (``(a+)+$`` takes exponential time) while holding the
GIL, so one search stops every thread and the event loop; the ``regex`` package has a
time limit for matching but expands nested counted repeats while compiling
(``(?:(?:a{1000}){1000}){1000}`` grew to 24 GB before a single match ran). RE2 matches
in time linear in the text, refuses repeats over 1000 and programs over its memory
budget (``REGEX_MAX_MEMORY``) while compiling, and releases the GIL while it matches.
What is left to bound is done here: the pattern's length, and the work of one engine
call (program size times bytes searched, at most ``REGEX_WORK_PER_CALL``), so that
the call's deadline is checked between calls.

Semantics, as the model is told: a match never spans lines (RE2's ``never_nl``), ``^``
and ``$`` match at line boundaries, RE2 syntax has no look-around and no
back-references. Content is searched as UTF-8 bytes in chunks of whole lines; only
matching lines (and their context) are decoded, so memory stays near the file's size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import re2

from ..limits import (
    MAX_PATTERN_CHARS,
    MAX_TOOL_RESULT_CHARS,
    REGEX_MAX_MEMORY,
    REGEX_WORK_PER_CALL,
)
from .budget import Deadline
from .text import MAX_LINE_CHARS, EditError, cut_line

_LINE_BYTES = MAX_LINE_CHARS * 4 + 4
"""Bytes decoded of a long line: enough for MAX_LINE_CHARS characters and a mark."""
_HINT = "use a simpler pattern, or search one file (file_path)."
MATCHES_MAX_CHARS = MAX_TOOL_RESULT_CHARS - 2000
"""What the matching lines of one search may take, leaving room for file headers
and the closing note within MAX_TOOL_RESULT_CHARS."""


@dataclass(kw_only=True, slots=True)
class Match:
    line_number: int
    line: str
    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)

    def size(self) -> int:
        """Characters this match takes in the results (roughly)."""
        lines = [self.line, *self.before, *self.after]
        return sum(min(len(t), MAX_LINE_CHARS + 21) + 9 for t in lines)


class Searcher:
    """A compiled pattern and the deadline of the call that searches with it."""

    def __init__(
        self,
        pattern: str,
        *,
        case_sensitive: bool = True,
        deadline: Deadline | None = None,
    ) -> None:
        if len(pattern) > MAX_PATTERN_CHARS:
            raise EditError(
                f"The pattern is {len(pattern)} characters long; the limit is "
                f"{MAX_PATTERN_CHARS}. Search for a shorter pattern."
            )
        options = re2.Options()
        options.max_mem = REGEX_MAX_MEMORY
        options.log_errors = False
        options.never_nl = True
        options.case_sensitive = case_sensitive
        try:
            self._regex = re2.compile("(?m)" + pattern, options)
        except re2.error as exc:
            reason = exc.args[0] if exc.args else exc
            if isinstance(reason, bytes):
                reason = reason.decode("utf-8", "replace")
            raise EditError(
                f"Invalid regex pattern: {pattern[:200]!r} ({reason}). Patterns use "
                "RE2 syntax: no look-around, no back-references, repeats up to "
                "{1000}, and a size limit."
            ) from None
        self._program = max(self._regex.programsize, 1)
        self._chunk = max(REGEX_WORK_PER_CALL // self._program, 1)
        """Bytes one engine call may search."""
        self._deadline = deadline or Deadline()

    def matches(
        self,
        content: str,
        *,
        context_lines: int = 0,
        max_results: int = 50,
        max_chars: int = MATCHES_MAX_CHARS,
    ) -> tuple[list[Match], bool]:
        """Matching lines of ``content`` (at most ``max_results``, and about
        ``max_chars`` characters with their context) and whether more matched."""
        data = content.encode("utf-8", "surrogatepass")
        size = len(data)
        found: list[Match] = []
        chars = 0
        line_number, counted = 1, 0
        pos = 0
        while pos <= size:
            self._deadline.check(_HINT)
            end = self._chunk_end(data, pos)
            match = self._regex.search(data, pos, end)
            if match is None:
                if end >= size:
                    break
                pos = end + 1
                continue
            start = match.start()
            line_start = data.rfind(b"\n", 0, start) + 1
            line_end = data.find(b"\n", start)
            if line_end < 0:
                line_end = size
            if len(found) >= max_results:
                return found, True
            line_number += data.count(b"\n", counted, line_start)
            counted = line_start
            item = Match(
                line_number=line_number,
                line=_line(data, line_start, line_end),
                before=_lines_before(data, line_start, context_lines),
                after=_lines_after(data, line_end, context_lines),
            )
            chars += item.size()
            if chars > max_chars:
                return found, True
            found.append(item)
            pos = line_end + 1
        return found, False

    def _chunk_end(self, data: bytes, pos: int) -> int:
        """Where the engine call starting at ``pos`` stops: at a line end, after at
        most ``self._chunk`` bytes unless one line is longer (then refused)."""
        size = len(data)
        limit = pos + self._chunk
        if limit >= size:
            return size
        cut = data.rfind(b"\n", pos, limit)
        if cut >= 0:
            return cut
        line_end = data.find(b"\n", limit)
        length = (size if line_end < 0 else line_end) - pos
        raise EditError(
            f"The pattern is too complex ({self._program} instructions) to search a "
            f"line of {length} bytes in bounded time (at most {self._chunk} bytes "
            "per line for this pattern); use a simpler pattern."
        )


def _line(data: bytes, start: int, end: int) -> str:
    raw = data[start : min(end, start + _LINE_BYTES)]
    try:
        return raw.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:  # a character cut at _LINE_BYTES, or bad bytes
        return raw.decode("utf-8", "replace")


def _lines_before(data: bytes, line_start: int, count: int) -> list[str]:
    lines: list[str] = []
    end = line_start - 1  # the newline ending the line before
    while count > 0 and end >= 0:
        start = data.rfind(b"\n", 0, end) + 1
        lines.append(_line(data, start, end))
        end = start - 1
        count -= 1
    lines.reverse()
    return lines


def _lines_after(data: bytes, line_end: int, count: int) -> list[str]:
    lines: list[str] = []
    start = line_end + 1
    while count > 0 and start <= len(data):
        end = data.find(b"\n", start)
        if end < 0:
            end = len(data)
        lines.append(_line(data, start, end))
        start = end + 1
        count -= 1
    return lines


def format_search_results(
    results: list[tuple[str, list[Match]]], max_results: int, truncated: bool
) -> str:
    if not any(matches for _, matches in results):
        return "No matches found"
    out: list[str] = []
    for path, matches in results:
        if not matches:
            continue
        out += ["", f"File: {path}"]
        for match in matches:
            first = match.line_number - len(match.before)
            out += [
                f"{first + i:>6} |\t{cut_line(t)}" for i, t in enumerate(match.before)
            ]
            out.append(f"{match.line_number:>6}\t{cut_line(match.line)}")
            out += [
                f"{match.line_number + 1 + i:>6} |\t{cut_line(t)}"
                for i, t in enumerate(match.after)
            ]
    text = "\n".join(out[1:])  # no blank line before the first file
    if truncated:
        shown = sum(len(m) for _, m in results)
        if shown >= max_results:
            text += f"\n\n(Results truncated at {max_results} matches)"
        else:
            text += (
                f"\n\n(Results truncated at {shown} matches, to keep the output "
                f"under about {MAX_TOOL_RESULT_CHARS} characters; narrow the search)"
            )
    return text
