"""Storage objects: writing over a key, and the metadata records beside files.

A Django ``Storage`` offers save, open, delete, exists, listdir, size and (often)
get_modified_time; there is no overwrite, rename or metadata. So:

- ``put`` overwrites through the storage's own policy: when ``get_available_name``
  keeps the key (S3 with ``file_overwrite``, ``FileSystemStorage(allow_overwrite=
  True)``) the save replaces the object in one call; otherwise the old object is
  deleted first, and a save that still lands elsewhere is undone and reported.
- Every key is checked for symbolic links first on storages with local paths
  (see ``links``).
- What a key and ``size`` cannot tell (title, custom metadata, an explicit MIME type,
  and that an empty directory exists at all) goes to a record beside the entry:
  ``<directory>/.sagents-meta-<hash of the name>.json``, holding the name. Files
  without such metadata get no record (most files: no second object per write).
  Records sit beside their entries so that one ``listdir`` per directory finds both,
  and a hashed name stays short whatever the entry's name.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from datetime import datetime
from typing import Any

from django.core.files.base import ContentFile
from django.core.files.storage import Storage

from sagents_django.core.filesystem.backends.sidecar import (
    entry_extras,
    with_created_at,
)
from sagents_django.core.filesystem.entries import (
    FileEntry,
    FileMetadata,
    guess_mime_type,
)
from sagents_django.core.filesystem.errors import PersistenceError
from sagents_django.core.filesystem.paths import basename

from .encoding import check_json
from .links import check_key

RESERVED_PREFIX = ".sagents-"
"""Names the backend keeps for itself; the model cannot create them."""
RECORD_PREFIX = ".sagents-meta-"
MAX_RECORD = 1024 * 1024
MISSING = (FileNotFoundError, IsADirectoryError, NotADirectoryError, FileExistsError)
"""What storages raise for a key that is not a file (InMemoryStorage raises
FileExistsError when a path runs through a file)."""

Record = dict[str, Any]


# Objects ----------------------------------------------------------------------------
def put(storage: Storage, key: str, data: bytes) -> None:
    check_key(storage, key)
    if storage.get_available_name(key) != key:
        # This storage renames instead of overwriting: make room first.
        storage.delete(key)
    saved = storage.save(key, ContentFile(data))
    if saved != key:
        with contextlib.suppress(Exception):
            storage.delete(saved)
        raise PersistenceError(
            f"The storage saved {key!r} as {saved!r} (written by someone else at "
            "the same moment?); try again."
        )


def read(storage: Storage, key: str, limit: int) -> bytes:
    """The object's bytes; ``MISSING`` errors propagate."""
    check_key(storage, key)
    with storage.open(key, "rb") as handle:
        data = handle.read(limit + 1)
    if isinstance(data, str):  # a storage that ignores the binary mode
        data = data.encode("utf-8", "surrogatepass")
    if len(data) > limit:
        raise PersistenceError(
            f"{key} is over {limit} bytes; files that large are not read."
        )
    return data


def remove(storage: Storage, key: str) -> None:
    """Delete ``key``; a missing one is not an error."""
    check_key(storage, key)
    with contextlib.suppress(*MISSING):
        storage.delete(key)


def modified_time(storage: Storage, key: str) -> datetime | None:
    try:
        return storage.get_modified_time(key)
    except (NotImplementedError, *MISSING):
        return None


# Records ----------------------------------------------------------------------------
def record_name(name: str) -> str:
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{RECORD_PREFIX}{digest[:40]}.json"


def record_for(entry: FileEntry) -> Record | None:
    """What a key cannot tell about ``entry``; None when nothing (files only: a
    directory always has a record, its only trace in an object store)."""
    record = entry_extras(entry)
    if not record and not entry.is_directory:
        return None
    record = with_created_at(entry, record)
    return {"name": basename(entry.path), "entry_type": entry.entry_type, **record}


def checked_record(entry: FileEntry) -> Record | None:
    """``record_for(entry)``, refused before anything is written if a storage
    could not round-trip it."""
    record = record_for(entry)
    if record is not None:
        check_json(record, f"Metadata of {entry.path}")
    return record


def write_record(
    storage: Storage, directory_key: str, name: str, record: Record | None
) -> None:
    """Store the record of entry ``name`` (None: remove any stale one)."""
    key = f"{directory_key}/{record_name(name)}"
    if record is None:
        remove(storage, key)
    else:
        put(storage, key, json.dumps(record, ensure_ascii=False).encode("utf-8"))


def read_record(storage: Storage, directory_key: str, name: str) -> Record | None:
    """The record of entry ``name`` in that directory, if a valid one exists."""
    return _load(storage, directory_key, record_name(name))


def listed_record(storage: Storage, directory_key: str, filename: str) -> Record | None:
    """The record stored as ``filename`` (a name a listing returned), if valid."""
    return _load(storage, directory_key, filename)


def _load(storage: Storage, directory_key: str, filename: str) -> Record | None:
    try:
        record = json.loads(read(storage, f"{directory_key}/{filename}", MAX_RECORD))
    except (*MISSING, PersistenceError, ValueError):
        return None
    if not (
        isinstance(record, dict)
        and isinstance(record.get("name"), str)
        and record_name(record["name"]) == filename
    ):
        return None  # a record must name the entry its key was made for
    return record


def entry_from_record(
    path: str,
    entry_type: str,
    *,
    size: int | None,
    modified: datetime | None,
    record: Record | None,
) -> FileEntry:
    """An unloaded entry from what the storage says and the entry's record."""
    record = record or {}
    directory = entry_type == "directory"
    custom = record.get("custom")
    mime = record.get("mime_type")
    title = _text(record.get("title"))
    if title is None and directory:
        title = basename(path)
    metadata = FileMetadata(
        size=0 if directory else size,
        created_at=_time(record.get("created_at")) or modified,
        modified_at=modified,
        mime_type=mime
        if isinstance(mime, str)
        else ("inode/directory" if directory else guess_mime_type(path)),
        custom=dict(custom) if isinstance(custom, dict) else {},
    )
    return FileEntry.new_indexed_file(
        path,
        entry_type="directory" if directory else "file",
        title=title,
        metadata=metadata,
        id=_text(record.get("id")),
        file_type=_text(record.get("file_type")),
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None
