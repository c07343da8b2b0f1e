"""Text the database cannot hold as is: NUL characters and unpaired surrogates.

PostgreSQL refuses NUL in ``text`` and ``jsonb`` values, and neither PostgreSQL nor
SQLite accepts a lone surrogate (which a model's JSON can carry as ``"\\ud800"``).
Invariant 6 says NUL bytes never break a write, so content is encoded rather than
refused: such content is stored as ``ESCAPED`` followed by its JSON string form,
which spells both as ``\\u0000`` escapes, and decoded on load. Content that happens
to begin with ``ESCAPED`` is escaped too, so decoding is exact for every string.
Ordinary content (all but a few files) is stored verbatim, readable in the admin.

The marker lives in the content itself, not in the row's metadata, so a
metadata-only update can never detach content from its encoding.

Metadata (title, custom values) is refused instead: it comes from host code rather
than the model, and an error naming the key is more useful there than an encoding.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sagents_django.core.filesystem.errors import InvalidEntry

ESCAPED = "\x01sagents:json\x01"
"""Starts stored content that is the JSON form of the real content."""


def storable(text: str) -> bool:
    """Whether both databases accept ``text`` in a text column."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def encode_content(content: str) -> str:
    if storable(content) and not content.startswith(ESCAPED):
        return content
    # ensure_ascii only when needed: it keeps escaped Unicode text readable.
    body = json.dumps(content, ensure_ascii=False)
    if not storable(body):
        body = json.dumps(content)
    return ESCAPED + body


def decode_content(stored: str) -> str:
    if not stored.startswith(ESCAPED):
        return stored
    try:
        value = json.loads(stored[len(ESCAPED) :])
    except ValueError:
        return stored  # not ours after all (a row written by hand)
    return value if isinstance(value, str) else stored


def check_json(value: Any, what: str) -> None:
    """Refuse metadata a ``jsonb`` column would reject, naming where it is."""
    if isinstance(value, str):
        if not storable(value):
            raise InvalidEntry(
                f"{what} contains a NUL character or invalid Unicode; remove it."
            )
    elif isinstance(value, Mapping):
        for key, item in value.items():
            check_json(str(key), f"{what} key {str(key)[:40]!r}")
            check_json(item, f"{what}[{str(key)[:40]!r}]")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            check_json(item, f"{what}[{index}]")
