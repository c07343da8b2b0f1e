"""Text operations behind the file tools, as pure functions on strings.

Numbered views (``read_file``), exact replacements (``edit_file``), line ranges
(``edit_lines``), searches (``search_text``) and ``ls`` patterns. Output formats follow
the reference: six-column right-aligned line numbers and a tab, 1-based. Problems the
model can fix raise ``EditError`` with a message for it.

Search patterns are regular expressions written by a model, so a pathological one
(``(a+)+$``) must not hang a worker: with the ``regex`` package (installed with
litellm) every search has a time budget; with only ``re``, lines are cut to a length
that bounds the damage.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from .errors import FileSystemError

_regex: ModuleType | None
try:  # pragma: no cover - which branch runs depends on the environment
    import regex as _regex
except ImportError:  # pragma: no cover
    _regex = None

DEFAULT_READ_LIMIT = 2000
MAX_LINE_CHARS = 2000
SEARCH_BUDGET_SECONDS = 2.0
_RE_LINE_CAP = 10_000


class EditError(FileSystemError):
    """An edit or search the model asked for cannot be done as asked."""


def number_lines(content: str, offset: int = 0, limit: int = DEFAULT_READ_LIMIT) -> str:
    """``content`` with line numbers, ``limit`` lines from ``offset`` (0-based)."""
    lines = content.split("\n")
    total = len(lines)
    selected = lines[offset : offset + limit]
    if not content or not selected:
        return "File is empty or offset is beyond file length."
    body = "\n".join(
        f"{offset + i + 1:>6}\t{_cut(line)}" for i, line in enumerate(selected)
    )
    if offset > 0 or offset + limit < total:
        end = min(offset + limit, total)
        return f"Showing lines {offset + 1} to {end} of {total}:\n{body}"
    return body


def _cut(line: str) -> str:
    if len(line) > MAX_LINE_CHARS:
        return line[:MAX_LINE_CHARS] + "... (line truncated)"
    return line


def replace_text(
    content: str, old: str, new: str, *, replace_all: bool = False
) -> tuple[str, int]:
    """``content`` with ``old`` replaced; the new text and the number of replacements."""
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
    return content.replace(old, new), count


def _preview(text: str) -> str:
    return text if len(text) <= 200 else text[:200] + "..."


def replace_lines(
    content: str, start_line: int, end_line: int, new_content: str
) -> tuple[str, int]:
    """Lines ``start_line``..``end_line`` (1-based, inclusive) replaced by
    ``new_content``; the new text and how many lines were replaced."""
    if start_line < 1:
        raise EditError("start_line must be >= 1 (line numbers are 1-based)")
    if end_line < start_line:
        raise EditError("end_line must be >= start_line")
    lines = content.split("\n")
    total = len(lines)
    if start_line > total:
        raise EditError(
            f"start_line {start_line} is beyond file length ({total} lines)"
        )
    if end_line > total:
        raise EditError(f"end_line {end_line} is beyond file length ({total} lines)")
    updated = lines[: start_line - 1] + new_content.split("\n") + lines[end_line:]
    return "\n".join(updated), end_line - start_line + 1


# Search ---------------------------------------------------------------------------
@dataclass(kw_only=True, slots=True)
class Match:
    line_number: int
    line: str
    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)


class Searcher:
    """A compiled pattern with a time budget shared by every file it searches."""

    def __init__(
        self,
        pattern: str,
        *,
        case_sensitive: bool = True,
        budget: float = SEARCH_BUDGET_SECONDS,
    ) -> None:
        flags = 0 if case_sensitive else re.IGNORECASE
        engine: Any = _regex or re
        errors: tuple[type[Exception], ...] = (
            re.error,
            getattr(_regex, "error", re.error),
        )
        try:
            self._compiled = engine.compile(pattern, flags)
        except errors as exc:
            raise EditError(f"Invalid regex pattern: {pattern!r} ({exc})") from None
        self._deadline = time.monotonic() + budget

    def _search(self, line: str) -> bool:
        if _regex is None:
            return self._compiled.search(line[:_RE_LINE_CAP]) is not None
        remaining = self._deadline - time.monotonic()
        try:
            if remaining <= 0:
                raise TimeoutError
            return self._compiled.search(line, timeout=remaining) is not None
        except TimeoutError:
            raise EditError(
                "The search took too long; use a simpler pattern or search one file."
            ) from None

    def matches(
        self, content: str, *, context_lines: int = 0, max_results: int = 50
    ) -> tuple[list[Match], bool]:
        """Matching lines of ``content`` (at most ``max_results``) and whether more
        matched."""
        lines = content.split("\n")
        found: list[Match] = []
        for index, line in enumerate(lines):
            if not self._search(line):
                continue
            if len(found) == max_results:
                return found, True
            start = max(0, index - context_lines)
            found.append(
                Match(
                    line_number=index + 1,
                    line=line,
                    before=lines[start:index] if context_lines else [],
                    after=lines[index + 1 : index + 1 + context_lines]
                    if context_lines
                    else [],
                )
            )
        return found, False


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
            out += [f"{first + i:>6} |\t{_cut(t)}" for i, t in enumerate(match.before)]
            out.append(f"{match.line_number:>6}\t{_cut(match.line)}")
            out += [
                f"{match.line_number + 1 + i:>6} |\t{_cut(t)}"
                for i, t in enumerate(match.after)
            ]
    text = "\n".join(out[1:])  # no blank line before the first file
    if truncated:
        text += f"\n\n(Results truncated at {max_results} matches)"
    return text


# ls patterns ----------------------------------------------------------------------
def pattern_matcher(pattern: str) -> Callable[[str], bool]:
    """A test for paths: ``*`` matches any characters (slashes too); a pattern not
    starting with ``/`` or ``*`` may also match from below the root ("Chapter 1/*"
    matches "/Chapter 1/a.md"); a pattern without ``*`` matches as a substring."""
    if "*" not in pattern:
        return lambda path: pattern in path
    text = "".join(".*" if ch == "*" else re.escape(ch) for ch in pattern)
    compiled = re.compile(text, re.DOTALL)
    rooted = pattern.startswith(("/", "*"))

    def match(path: str) -> bool:
        if compiled.fullmatch(path):
            return True
        return not rooted and bool(compiled.fullmatch(path[1:]))

    return match
