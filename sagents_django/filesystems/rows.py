"""How a FileEntry maps onto a ``StoredFile`` row, and back.

The row's columns hold what they name (path, content, size, MIME type, timestamps);
everything else about an entry goes into ``custom_metadata`` under fixed keys, so the
application's own custom values never collide with the backend's::

    {"custom": {...}, "title": "...", "file_type": "...", "id": "...",
     "entry_type": "directory", "checksum": "<sha256 of the content>"}

Keys are written only when they carry something. A title equal to the entry's name
is not written, so it follows the entry when it is renamed. The checksum lets a
second worker's ``refresh`` tell a changed file from an unchanged one without reading
content. ``updated_at`` is the content's modification time: metadata-only updates
leave it alone. Loaded JSON is checked key by key; a value of the wrong type is
ignored, never trusted (invariant 6).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sagents_django.core.filesystem.entries import (
    FileEntry,
    FileMetadata,
    byte_size,
    checksum,
    guess_mime_type,
)
from sagents_django.core.filesystem.errors import InvalidEntry
from sagents_django.core.filesystem.paths import basename

from .encoding import check_json

DIRECTORY_MIME_TYPE = "inode/directory"
LISTED_FIELDS = (
    "path",
    "size",
    "mime_type",
    "custom_metadata",
    "created_at",
    "updated_at",
)
"""What a listing reads: everything but the content."""
MAX_MIME_TYPE = 255


def stored_metadata(entry: FileEntry) -> FileMetadata:
    """``entry``'s metadata with size and checksum matching its content."""
    content = "" if entry.is_directory else (entry.content or "")
    meta = entry.metadata or FileMetadata.new(content, path=entry.path)
    size = 0 if entry.is_directory else byte_size(content)
    if entry.is_directory:
        return meta if meta.size == 0 else replace(meta, size=0)
    if meta.size != size or meta.checksum is None:
        meta = replace(meta, size=size, checksum=checksum(content))
    return meta


def row_json(entry: FileEntry) -> dict[str, Any]:
    """The ``custom_metadata`` column for ``entry``."""
    meta = entry.metadata
    data: dict[str, Any] = {}
    if meta is not None and meta.custom:
        data["custom"] = dict(meta.custom)
    if entry.title is not None and entry.title != basename(entry.path):
        data["title"] = entry.title
    if entry.file_type is not None:
        data["file_type"] = entry.file_type
    if entry.id is not None:
        data["id"] = entry.id
    if entry.is_directory:
        data["entry_type"] = "directory"
    elif meta is not None and meta.checksum:
        data["checksum"] = meta.checksum
    check_json(data, f"Metadata of {entry.path}")
    return data


def mime_type(entry: FileEntry) -> str:
    if entry.is_directory:
        return DIRECTORY_MIME_TYPE
    value = entry.metadata.mime_type if entry.metadata else guess_mime_type(entry.path)
    if len(value) > MAX_MIME_TYPE:
        raise InvalidEntry(
            f"MIME type {value[:40]!r}... of {entry.path} is longer than "
            f"{MAX_MIME_TYPE} characters."
        )
    return value


def entry_from_row(row: dict[str, Any], content: str | None = None) -> FileEntry:
    """An entry from a row's ``LISTED_FIELDS``; loaded when ``content`` is given."""
    path = row["path"]
    data = row["custom_metadata"] if isinstance(row["custom_metadata"], dict) else {}
    directory = data.get("entry_type") == "directory"
    custom = data.get("custom")
    metadata = FileMetadata(
        size=0 if directory else row["size"],
        created_at=row["created_at"],
        modified_at=row["updated_at"],
        mime_type=row["mime_type"]
        or (DIRECTORY_MIME_TYPE if directory else guess_mime_type(path)),
        checksum=_text(data.get("checksum")),
        custom=dict(custom) if isinstance(custom, dict) else {},
    )
    title = _text(data.get("title"))
    if title is None and directory:
        title = basename(path)
    entry = FileEntry.new_indexed_file(
        path,
        entry_type="directory" if directory else "file",
        title=title,
        metadata=metadata,
        id=_text(data.get("id")),
        file_type=_text(data.get("file_type")),
    )
    if content is None or directory:
        return entry
    return entry.mark_loaded(content)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
