"""Argument checks shared by the services: ids, closed sets, text and JSON documents.

Every check raises ``InvalidInput`` naming the bad value, before anything is written.

NUL characters: PostgreSQL refuses them in ``text`` and in ``jsonb`` (``\\u0000``),
SQLite stores them. So that a NUL in a tool's output can never fail a write (and both
databases store the same thing), every string written by the services, JSON keys
and values included, has each NUL replaced by U+FFFD (the replacement character).
The write succeeds, the text keeps its length and shows where something was. Lone
surrogates (what ``errors="surrogateescape"`` leaves of undecodable bytes) cannot be
encoded as UTF-8 or stored in jsonb either, and are replaced the same way.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Mapping
from typing import Any

from sagents_django.core.limits import MAX_MESSAGE_BYTES, MAX_STATE_DEPTH
from sagents_django.exceptions import InvalidInput

NUL = "\x00"
NUL_REPLACEMENT = "\ufffd"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# Surrogate escapes as the JSON encoder writes them; a pair (12 characters) is an
# astral character such as an emoji, anything shorter is a lone surrogate.
_SURROGATE_ESCAPE = re.compile(
    r"\\ud[89ab][0-9a-f]{2}\\ud[c-f][0-9a-f]{2}|\\ud[89a-f].."
)

# ASCII output encodes about twice as fast; the UTF-8 form is only built to measure a
# document whose escaped form exceeds a limit.
_ENCODER = json.JSONEncoder(ensure_ascii=True, allow_nan=False, separators=(",", ":"))
_UTF8_ENCODER = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, separators=(",", ":")
)


def parse_uuid(value: Any, *, what: str) -> uuid.UUID:
    """A UUID from a UUID or its string form (an int or junk is refused)."""
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, str) and len(value) <= 64:
        try:
            return uuid.UUID(value)
        except ValueError:
            pass
    raise InvalidInput(f"{what} must be a UUID, not {_short(value)}")


def parse_int(value: Any, *, what: str, minimum: int = 0, maximum: int) -> int:
    if type(value) is not int or not minimum <= value <= maximum:
        raise InvalidInput(
            f"{what} must be an integer from {minimum} to {maximum}, not {_short(value)}"
        )
    return value


def choice(value: Any, allowed: tuple[str, ...], *, what: str) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise InvalidInput(
            f"{what} must be one of {', '.join(allowed)}; got {_short(value)}"
        )
    return value


def clean_text(value: Any, *, what: str, max_length: int, strip: bool = False) -> str:
    """A string with NULs (and lone surrogates) replaced, at most ``max_length``
    characters."""
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string, not {type(value).__name__}")
    if strip:
        value = value.strip()
    if len(value) > max_length:
        raise InvalidInput(
            f"{what} is {len(value)} characters long; the limit is {max_length}"
        )
    return _storable(value)


def message_text(value: Any, *, what: str = "the message") -> str:
    """A person's message before a turn: a string with something in it, at most
    ``MAX_MESSAGE_BYTES`` as stored JSON (UTF-8), NULs and lone surrogates replaced
    by U+FFFD. Checked before any model call,
    so an oversized or empty message costs nothing and writes nothing."""
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string, not {type(value).__name__}")
    limit = MAX_MESSAGE_BYTES
    # Every character is at least one byte: far too long needs no encoding.
    if len(value) > limit:
        raise InvalidInput(
            f"{what} is {len(value)} characters long; the limit is {limit} bytes"
        )
    size = len(_UTF8_ENCODER.encode(value).encode("utf-8", "surrogatepass"))
    if size > limit:
        raise InvalidInput(
            f"{what} is {size} bytes as JSON; the limit is {limit} bytes"
        )
    if not value.strip():
        raise InvalidInput(f"{what} is empty")
    # NUL and lone surrogates cannot be stored (PostgreSQL refuses them, UTF-8 has
    # no form for a lone surrogate): replaced, as everywhere the services store.
    return storable(value)


def clean_json(
    value: Any, *, what: str, max_bytes: int, require_dict: bool = True
) -> tuple[Any, str]:
    """Check a JSON document; return it (NULs replaced) and its compact ASCII encoding.

    Refused: anything but dict/list/str/int/float/bool/None, non-string keys (JSON
    would silently turn them into strings), NaN and infinities (not JSON), nesting
    deeper than the state loader accepts, and more than ``max_bytes`` UTF-8 bytes.
    """
    if require_dict and not isinstance(value, dict):
        raise InvalidInput(f"{what} must be a dict, not {type(value).__name__}")
    _check_tree(value, what)
    try:
        encoded = _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:  # belt and braces: _check_tree saw it all
        raise InvalidInput(f"{what} is not JSON-serializable: {exc}") from exc
    # JSON escapes every control character and, in ASCII mode, every surrogate, so
    # scans of the text find anything to replace (false alarms only cost a pass).
    if "\\u0000" in encoded or _lone_surrogate_in(encoded):
        value = _replace_unstorable(value)
        encoded = _ENCODER.encode(value)
    # An escape (\uXXXX, 6 bytes) is never shorter than the character's UTF-8 form,
    # so the ASCII length bounds the size from above.
    if len(encoded) > max_bytes:
        size = len(_UTF8_ENCODER.encode(value).encode("utf-8", "surrogatepass"))
        if size > max_bytes:
            raise InvalidInput(
                f"{what} is {size} bytes as JSON; the limit is {max_bytes} bytes"
            )
    return value, encoded


def clean_mapping(value: Any, *, what: str, max_bytes: int) -> dict[str, Any]:
    """``clean_json`` for an optional dict argument (None means empty)."""
    if value is None:
        return {}
    if isinstance(value, Mapping) and not isinstance(value, dict):
        value = dict(value)
    return clean_json(value, what=what, max_bytes=max_bytes)[0]


def _check_tree(value: Any, what: str) -> None:
    stack: list[tuple[Any, int]] = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth = pop()
        kind = type(node)
        if kind is dict:
            if depth > MAX_STATE_DEPTH:
                raise InvalidInput(f"{what} nests deeper than {MAX_STATE_DEPTH} levels")
            for key, item in node.items():
                if type(key) is not str:
                    raise InvalidInput(
                        f"{what} has a non-string key {_short(key)}; JSON keys are "
                        "strings"
                    )
                if type(item) in _SCALARS:
                    continue
                push((item, depth + 1))
        elif kind is list:
            if depth > MAX_STATE_DEPTH:
                raise InvalidInput(f"{what} nests deeper than {MAX_STATE_DEPTH} levels")
            for item in node:
                if type(item) in _SCALARS:
                    continue
                push((item, depth + 1))
        elif isinstance(node, float):
            if not math.isfinite(node):
                raise InvalidInput(f"{what} contains {node!r}, which JSON cannot hold")
        elif isinstance(node, str | int) or node is None:
            continue
        elif isinstance(node, dict):
            # A subclass (OrderedDict...): checked as the dict it encodes as.
            push((dict(node), depth))
        elif isinstance(node, list | tuple):
            push((list(node), depth))
        else:
            raise InvalidInput(
                f"{what} contains a {kind.__name__}, which is not a JSON value"
            )


# Floats are left out on purpose: they need the finiteness check above.
_SCALARS = frozenset((str, int, bool, type(None)))


def _lone_surrogate_in(encoded: str) -> bool:
    if "\\ud" not in encoded:  # the common case, at the speed of a substring search
        return False
    return any(len(m.group()) != 12 for m in _SURROGATE_ESCAPE.finditer(encoded))


def storable(text: str) -> str:
    """``text`` with NULs and lone surrogates replaced, as the services store it."""
    return _UNSTORABLE.sub(NUL_REPLACEMENT, text) if _UNSTORABLE.search(text) else text


_storable = storable


def _replace_unstorable(value: Any) -> Any:
    if isinstance(value, str):
        return _storable(value)
    if isinstance(value, dict):
        return {_storable(k): _replace_unstorable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_replace_unstorable(v) for v in value]
    return value


def _short(value: Any, limit: int = 80) -> str:
    try:
        text = repr(value)
    except ValueError:  # an int of more digits than Python converts to text
        return f"an {type(value).__name__} too large to print"
    return text if len(text) <= limit else f"{text[:limit]}..."
