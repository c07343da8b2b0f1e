"""Sidecar metadata of the disk backend: what a file's name and ``stat`` cannot tell.

Size, times and (from the extension) the MIME type come from the disk itself; title,
id, file_type, custom metadata and an explicit MIME type do not, so they go to
``<root>/.sagents-meta/<sha256 of the relative path>.json``, written only for entries
that carry such metadata (most files have none, and cost no second write). Names are
hashes so the sidecar directory stays flat whatever the tree's depth, and a record
holds its own path, so one directory read indexes them all.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from datetime import UTC, datetime
from typing import Any

from ..entries import FileEntry, FileMetadata, guess_mime_type
from ..errors import FileNotFound, PathNotDirectory, UnsafePath
from ..paths import basename
from .safe_io import CLOEXEC, NOFOLLOW, atomic_write, open_directory

META_DIR = ".sagents-meta"
_MAX_RECORD = 1024 * 1024

Record = dict[str, Any]


def record_name(parts: list[str]) -> str:
    digest = hashlib.sha256("/".join(parts).encode("utf-8", "surrogatepass"))
    return digest.hexdigest() + ".json"


def entry_extras(entry: FileEntry) -> Record:
    """What a storage's names and stat cannot tell about ``entry`` (shared by every
    backend that keeps sidecar records)."""
    record: Record = {}
    if entry.title is not None and entry.title != basename(entry.path):
        record["title"] = entry.title
    if entry.id is not None:
        record["id"] = entry.id
    if entry.file_type is not None:
        record["file_type"] = entry.file_type
    meta = entry.metadata
    if meta is not None:
        if meta.custom:
            record["custom"] = dict(meta.custom)
        if not entry.is_directory and meta.mime_type != guess_mime_type(entry.path):
            record["mime_type"] = meta.mime_type
    return record


def with_created_at(entry: FileEntry, record: Record) -> Record:
    meta = entry.metadata
    if meta is not None and meta.created_at is not None:
        record["created_at"] = meta.created_at.isoformat()
    return record


def record_for(entry: FileEntry, parts: list[str]) -> Record | None:
    """What the name and stat cannot tell about ``entry``, or None."""
    record = entry_extras(entry)
    if not record:
        return None
    record = with_created_at(entry, record)
    return {"path": "/".join(parts), "entry_type": entry.entry_type, **record}


def write_record(root: str, parts: list[str], entry: FileEntry, *, fsync: bool) -> None:
    record = record_for(entry, parts)
    if record is None:
        delete_record(root, parts)
        return
    data = json.dumps(record, ensure_ascii=False).encode("utf-8", "surrogatepass")
    with open_directory(root, [META_DIR], create=True) as mfd:
        atomic_write(mfd, record_name(parts), data, fsync=fsync)


def delete_record(root: str, parts: list[str]) -> None:
    with (
        contextlib.suppress(FileNotFound, FileNotFoundError),
        open_directory(root, [META_DIR], create=False) as mfd,
    ):
        os.unlink(record_name(parts), dir_fd=mfd)


def read_record(root: str, parts: list[str]) -> Record | None:
    try:
        with open_directory(root, [META_DIR], create=False) as mfd:
            return _read(mfd, record_name(parts))
    except (FileNotFound, UnsafePath, PathNotDirectory):
        return None


def all_records(root: str) -> dict[str, Record]:
    """Every record by relative path (for indexing a whole tree)."""
    records: dict[str, Record] = {}
    try:
        with open_directory(root, [META_DIR], create=False) as mfd:
            for name in os.listdir(mfd):
                record = _read(mfd, name)
                if record and isinstance(record.get("path"), str):
                    records[record["path"]] = record
    except (FileNotFound, UnsafePath, PathNotDirectory):
        pass
    return records


def _read(mfd: int, name: str) -> Record | None:
    try:
        fd = os.open(name, os.O_RDONLY | NOFOLLOW | CLOEXEC, dir_fd=mfd)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as handle:
            record = json.loads(handle.read(_MAX_RECORD))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def stamp(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, UTC)


def entry_from_disk(
    path: str,
    entry_type: str,
    info: os.stat_result,
    record: Record | None,
    *,
    content: str | None = None,
) -> FileEntry:
    """An entry from what the disk says (``stat``) and its record, if any."""
    record = record or {}
    directory = entry_type == "directory"
    created = record.get("created_at")
    custom = record.get("custom")
    try:
        created_at = (
            datetime.fromisoformat(created) if isinstance(created, str) else None
        )
    except ValueError:
        created_at = None
    mime = record.get("mime_type") or (
        "inode/directory" if directory else guess_mime_type(path)
    )
    metadata = FileMetadata(
        size=0 if directory else info.st_size,
        created_at=created_at or stamp(info.st_mtime),
        modified_at=stamp(info.st_mtime),
        mime_type=str(mime),
        custom=dict(custom) if isinstance(custom, dict) else {},
    )
    title = record.get("title")
    if title is None and directory:
        title = basename(path)
    entry = FileEntry.new_indexed_file(
        path,
        entry_type="directory" if directory else "file",
        title=None if title is None else str(title),
        metadata=metadata,
        id=_text(record.get("id")),
        file_type=_text(record.get("file_type")),
    )
    return entry if content is None else entry.mark_loaded(content)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
