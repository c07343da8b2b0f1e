"""Virtual paths: one canonical form, validated once, before anything touches storage.

The model sends paths; every one goes through ``normalize_path`` before a lookup, so
the in-memory map, the backends and the events all see the same string for the same
file. The namespace is rooted at ``/``; a relative path is read from the root (the
reference's own examples use both forms). What a storage backend could misread is
refused here with a message the model can act on: ``..`` and ``.`` segments, ``~``,
NUL and other control characters, empty or whitespace-padded segments, names longer
than a disk allows, paths deeper than ``MAX_PATH_SEGMENTS`` (each level may be a
directory to create). Backslashes become slashes first, so ``..\\x`` is caught as ``..``.
"""

from __future__ import annotations

from ..limits import MAX_PATH_SEGMENTS
from .errors import InvalidPath

ROOT = "/"
MAX_SEGMENT_BYTES = 255
"""What common disk filesystems allow for one name."""
MAX_PATH_BYTES = 4096

_CONTROL = frozenset(chr(c) for c in [*range(0x20), 0x7F])


def normalize_path(path: object) -> str:
    """The canonical form of ``path`` (``"/a/b.txt"``); raises ``InvalidPath``.

    The root itself (``"/"``) is accepted; ``normalize_file_path`` refuses it.
    """
    if not isinstance(path, str):
        raise InvalidPath(f"A path must be a string, not {type(path).__name__}.")
    if "\x00" in path:
        raise InvalidPath(f"Path {path!r} contains a NUL byte; remove it.")
    if not path or not path.strip():
        raise InvalidPath("The path is empty; give a path such as '/notes.txt'.")
    if path != path.strip():
        raise InvalidPath(
            f"Path {path!r} begins or ends with whitespace; remove the spaces."
        )
    if any(ch in _CONTROL for ch in path):
        raise InvalidPath(f"Path {path!r} contains a control character; remove it.")
    text = path.replace("\\", "/")
    if not text.startswith("/"):
        text = "/" + text
    if len(text) > 1 and text.endswith("/"):
        text = text[:-1]
    if text == ROOT:
        return ROOT
    if len(text) > MAX_PATH_BYTES:  # characters: fewer than bytes, never more
        raise InvalidPath(
            f"Path is too long ({len(text)} characters; the limit is "
            f"{MAX_PATH_BYTES} bytes)."
        )
    segments = text[1:].split("/")
    for segment in segments:
        _check_segment(segment, path)
    if len(segments) > MAX_PATH_SEGMENTS:
        raise InvalidPath(
            f"Path {path[:60]!r}... is {len(segments)} levels deep; the limit is "
            f"{MAX_PATH_SEGMENTS}. Use a shallower path."
        )
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidPath(f"Path {path!r} is not valid Unicode text.") from None
    if size > MAX_PATH_BYTES:
        raise InvalidPath(
            f"Path is too long ({size} bytes; the limit is {MAX_PATH_BYTES})."
        )
    return text


def normalize_file_path(path: object) -> str:
    """``normalize_path`` for a file or directory entry: the root is not one."""
    text = normalize_path(path)
    if text == ROOT:
        raise InvalidPath(
            "'/' is the root directory; give a file path such as '/notes.txt'."
        )
    return text


def _check_segment(segment: str, original: str) -> None:
    if segment == "":
        raise InvalidPath(
            f"Path {original!r} has an empty segment ('//'); use single slashes."
        )
    if segment in (".", ".."):
        raise InvalidPath(
            f"Path {original!r} uses {segment!r}; path traversal is not allowed. "
            "Give the full path from '/'."
        )
    if segment.startswith("~"):
        raise InvalidPath(
            f"Path {original!r} uses '~'; home directory shortcuts are not allowed. "
            "Give the full path from '/'."
        )
    if segment != segment.strip():
        raise InvalidPath(
            f"Path segment {segment!r} in {original!r} begins or ends with whitespace."
        )
    try:
        size = len(segment.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidPath(f"Path {original!r} is not valid Unicode text.") from None
    if size > MAX_SEGMENT_BYTES:
        raise InvalidPath(
            f"The name {segment[:40]!r}... is too long ({size} bytes; the limit is "
            f"{MAX_SEGMENT_BYTES})."
        )


def valid_name(name: object) -> bool:
    """Whether ``name`` (a title or one path segment) is safe in a path: a non-empty
    string without ``/``, NUL or surrounding whitespace (the reference's rule)."""
    return (
        isinstance(name, str)
        and bool(name)
        and "/" not in name
        and "\x00" not in name
        and name == name.strip()
    )


def ancestor_paths(path: str) -> list[str]:
    """Directories above ``path``, shallowest first, without the root.

    ``ancestor_paths("/Characters/Hero/Backstory")`` is
    ``["/Characters", "/Characters/Hero"]``.
    """
    parts = [p for p in path.split("/") if p][:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def parent_path(path: str) -> str:
    head = path.rsplit("/", 1)[0]
    return head or ROOT


def basename(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def is_within(path: str, directory: str) -> bool:
    """Whether ``path`` is ``directory`` or below it (by whole segments)."""
    if directory == ROOT:
        return True
    return path == directory or path.startswith(directory + "/")


def rebase(path: str, old: str, new: str) -> str:
    """``path`` below ``old`` moved below ``new``."""
    return new + path[len(old) :]
