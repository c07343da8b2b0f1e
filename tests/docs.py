"""The README's and the docs' code blocks, as the tests read them.

Every fenced block may be preceded by an HTML comment that says what the tests do
with it (``<!-- docs-test: ... -->``, or ``<!-- readme-test: ... -->`` for the
steps of the README's "Add it to your Django project"); docs/development.md lists
the forms. Pages are read in the order of the site's navigation (``mkdocs.yml``),
README first, so "after" chains run in reading order.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^(?P<indent>[ ]*)```(?P<language>[\w-]*)[ ]*$")
MARKER = re.compile(
    r"^[ ]*<!-- (?P<kind>docs-test|readme-test): (?P<spec>.+?) -->[ ]*$"
)


@dataclass(frozen=True)
class Block:
    page: str
    """The file it is in, relative to the repository."""
    line: int
    """The line of its opening fence (1-based)."""
    language: str
    code: str
    """Its lines, without the fences and the indentation of the fence."""
    kind: str | None
    """``docs-test``, ``readme-test``, or None when no comment precedes it."""
    spec: str | None
    """What the comment says after the colon (``run``, ``after quick-start``...)."""

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def _nav_pages(entries: list[Any]) -> Iterator[str]:
    for entry in entries:
        value = entry if isinstance(entry, str) else next(iter(entry.values()))
        if isinstance(value, list):
            yield from _nav_pages(value)
        else:
            yield value


@cache
def pages() -> tuple[str, ...]:
    """README.md, then every page of docs/ in the site's navigation order."""
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    in_nav = [f"docs/{page}" for page in _nav_pages(config["nav"])]
    on_disk = sorted(
        str(path.relative_to(REPO)) for path in (REPO / "docs").rglob("*.md")
    )
    return ("README.md", *in_nav, *(p for p in on_disk if p not in in_nav))


def text(page: str) -> str:
    return (REPO / page).read_text(encoding="utf-8")


def blocks(page: str) -> list[Block]:
    found = []
    lines = text(page).splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent = len(opening["indent"])
        end = index + 1
        while not re.match(rf"^[ ]{{{indent}}}```[ ]*$", lines[end]):
            end += 1
        marker = MARKER.match(lines[index - 1]) if index else None
        found.append(
            Block(
                page=page,
                line=index + 1,
                language=opening["language"],
                code="".join(line[indent:] + "\n" for line in lines[index + 1 : end]),
                kind=marker["kind"] if marker else None,
                spec=marker["spec"] if marker else None,
            )
        )
        index = end + 1
    return found


def python_blocks() -> list[Block]:
    return [b for page in pages() for b in blocks(page) if b.language == "python"]


def marked(spec: str) -> Block:
    """The one python block whose comment is ``<!-- docs-test: spec -->``."""
    found = [b for b in python_blocks() if b.kind == "docs-test" and b.spec == spec]
    assert len(found) == 1, f"{len(found)} python blocks are marked {spec!r}"
    return found[0]


def with_spec(predicate: Any) -> list[Block]:
    return [b for b in python_blocks() if b.kind == "docs-test" and predicate(b.spec)]
