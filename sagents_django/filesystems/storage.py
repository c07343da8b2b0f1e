"""StoragePersistence: an agent filesystem in any Django ``Storage``.

Whatever storage a site already configures (``STORAGES``: django-storages' S3, GCS or
Azure, ``FileSystemStorage``, ``InMemoryStorage`` in tests) can hold agent files. A
scope's files live under ``<prefix>/<kind>/<id>/`` followed by the full virtual path,
kind and id percent-quoted so each stays one key segment::

    sagents/user/42/notes.md
    sagents/user/42/Memories/profile.md
    sagents/user/42/Memories/.sagents-meta-3f2a....json   (see ``records``)

Keys are built only from checked paths (canonical, inside the config's directory,
no ``.sagents-`` names), and every key is checked to lie under the scope's root
before the storage sees it. On a storage with local paths (``FileSystemStorage``) a
key that runs through a symbolic link is refused, and a listing skips links and
reports them in the log (see ``links``): a planted link reaches nothing outside the
scope, and a cyclic one no longer empties the listing. Size and modification time come from the storage
(``size``, ``get_modified_time`` when it has one), other metadata from records.

Costs, for remote storages: a listing makes one ``listdir`` per directory and, per
file, a ``size`` and a ``get_modified_time`` request; a write makes an existence check,
the save, and a record write or delete. Moves use the filesystem's fallback: a
write at the new path, then a delete of the old (a copy, as the Storage API has no
rename). Writes are atomic when the storage overwrites in place (see ``records.put``).
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
from dataclasses import replace
from typing import Any
from urllib.parse import quote

from django.core.files.storage import Storage

from sagents_django.core.exceptions import ConfigurationError
from sagents_django.core.filesystem.entries import FileEntry
from sagents_django.core.filesystem.errors import (
    FileNotFound,
    InvalidPath,
    PathIsDirectory,
    UnsafePath,
)
from sagents_django.core.filesystem.paths import basename, normalize_path, parent_path
from sagents_django.core.filesystem.persistence import Persistence, StorageOpts

from . import records
from .keys import checked_path, mount, opts_scope
from .links import check_key, is_link
from .rows import stored_metadata
from .threads import backend_call

logger = logging.getLogger(__name__)

DEFAULT_PREFIX = "sagents"
DEFAULT_MAX_READ = 50 * 1024 * 1024


class StoragePersistence(Persistence):
    """Stores files in a Django storage (an instance, or an alias of ``STORAGES``)."""

    def __init__(
        self,
        storage: Storage | str = "default",
        *,
        prefix: str = DEFAULT_PREFIX,
        max_read_bytes: int = DEFAULT_MAX_READ,
    ) -> None:
        self.storage = storage
        """Resolved on use, so a backend can be built before settings are read."""
        self.prefix = _checked_prefix(prefix)
        self.max_read_bytes = max_read_bytes
        """Files larger than this (or the config's max_file_size) are not read."""

    def __repr__(self) -> str:
        return f"<StoragePersistence {self.storage!r} prefix={self.prefix!r}>"

    # Persistence ------------------------------------------------------------------
    @backend_call
    def write(self, entry: FileEntry, opts: StorageOpts) -> FileEntry:
        storage, root = self._where(opts)
        key = _key(root, entry.path, opts)
        stored = replace(
            entry,
            metadata=stored_metadata(entry),
            persistence="persisted",
            dirty_content=False,
            dirty_non_content=False,
        )
        # Checked first: a refused record must not leave the content written.
        record = records.checked_record(stored)
        if not entry.is_directory:
            data = (entry.content or "").encode("utf-8", "surrogatepass")
            records.put(storage, key, data)
            modified = records.modified_time(storage, key)
            if modified is not None and stored.metadata is not None:
                # The storage's own time, so the next listing compares equal.
                stored = replace(
                    stored, metadata=replace(stored.metadata, modified_at=modified)
                )
        records.write_record(
            storage, _parent_key(root, entry.path), basename(entry.path), record
        )
        return stored

    @backend_call
    def load(self, entry: FileEntry, opts: StorageOpts) -> FileEntry:
        storage, root = self._where(opts)
        key = _key(root, entry.path, opts)
        limit = min(
            opts.get("max_file_size") or self.max_read_bytes, self.max_read_bytes
        )
        try:
            data = records.read(storage, key, limit)
        except records.MISSING:
            record = records.read_record(
                storage, _parent_key(root, entry.path), basename(entry.path)
            )
            if record is not None and record.get("entry_type") == "directory":
                return self._entry(storage, root, entry.path, "directory", record)
            raise FileNotFound(f"File not found: {entry.path}") from None
        if entry.metadata is None:
            # Not indexed here yet (written by another worker): read its record.
            record = records.read_record(
                storage, _parent_key(root, entry.path), basename(entry.path)
            )
            entry = self._entry(storage, root, entry.path, "file", record)
        if entry.is_directory:
            raise PathIsDirectory(f"{entry.path} is a directory")
        content = _decode(data)
        meta = entry.metadata
        if meta is not None:
            meta = replace(meta, size=len(data), checksum=None)
        return entry.mark_loaded(content, meta)

    @backend_call
    def delete(self, entry: FileEntry, opts: StorageOpts) -> None:
        storage, root = self._where(opts)
        key = _key(root, entry.path, opts)
        if entry.is_directory:
            # Only an empty directory is removed (FileSystemStorage keeps real
            # ones, which would block a file of that name later); a storage whose
            # delete is recursive must never take files the index did not know.
            check_key(storage, key)
            with contextlib.suppress(*records.MISSING, OSError):
                if not any(storage.listdir(key)):
                    storage.delete(key)
        else:
            records.remove(storage, key)
        records.remove(
            storage,
            f"{_parent_key(root, entry.path)}/{records.record_name(basename(entry.path))}",
        )

    @backend_call
    def list_persisted_entries(self, opts: StorageOpts) -> list[FileEntry]:
        storage, root = self._where(opts)
        base = mount(opts)
        check_key(storage, root + base)  # the scope's own directory is no link
        entries: list[FileEntry] = []
        refused: list[str] = []
        stack = [(root + base, base)]
        while stack:
            key, directory = stack.pop()
            try:
                folders, files = storage.listdir(key)
            except records.MISSING:
                continue
            except OSError as exc:  # one unreadable directory, not the listing
                refused.append(f"{directory or '/'} ({exc.strerror or exc})")
                continue
            for name in [*folders, *files]:
                if is_link(storage, f"{key}/{name}"):
                    refused.append(f"{directory}/{name}")
            skipped = set(refused)
            folders = [n for n in folders if f"{directory}/{n}" not in skipped]
            files = [n for n in files if f"{directory}/{n}" not in skipped]
            marks: dict[str, records.Record] = {}
            for filename in files:
                if filename.startswith(records.RECORD_PREFIX):
                    record = records.listed_record(storage, key, filename)
                    if record is not None:
                        marks[record["name"]] = record
            for name in files:
                path = _listed_path(directory, name)
                if path is not None:
                    entries.append(
                        self._entry(storage, root, path, "file", marks.pop(name, None))
                    )
            for name, record in marks.items():
                path = _listed_path(directory, name)
                if path is not None and record.get("entry_type") == "directory":
                    entries.append(
                        self._entry(storage, root, path, "directory", record)
                    )
            stack.extend(
                (f"{key}/{name}", path)
                for name in folders
                if (path := _listed_path(directory, name)) is not None
            )
        if refused:
            logger.warning(
                "Files of scope %s/%s: %d entries refused (symbolic links are not "
                "followed, unreadable directories are skipped): %r",
                *opts_scope(opts),
                len(refused),
                refused,
            )
        return entries

    @backend_call
    def update_metadata_in_storage(
        self, entry: FileEntry, opts: StorageOpts
    ) -> FileEntry | None:
        storage, root = self._where(opts)
        _key(root, entry.path, opts)  # checks the path
        records.write_record(
            storage,
            _parent_key(root, entry.path),
            basename(entry.path),
            records.checked_record(entry),
        )
        return entry.mark_clean()

    # Helpers ----------------------------------------------------------------------
    def _where(self, opts: StorageOpts) -> tuple[Storage, str]:
        """The storage and the scope's root key."""
        storage: Any = opts.get("storage") or self.storage
        if isinstance(storage, str):
            from django.core.files.storage import storages

            storage = storages[storage]
        if not isinstance(storage, Storage):
            raise ConfigurationError(
                f"StoragePersistence needs a Django Storage or an alias of "
                f"settings.STORAGES; got {storage!r}"
            )
        prefix = _checked_prefix(opts.get("prefix") or self.prefix)
        kind, ident = opts_scope(opts)
        return storage, f"{prefix}/{_segment(kind)}/{_segment(ident)}"

    def _entry(
        self,
        storage: Storage,
        root: str,
        path: str,
        entry_type: str,
        record: records.Record | None,
    ) -> FileEntry:
        size = modified = None
        if entry_type == "file":
            key = root + path
            size = storage.size(key)
            modified = records.modified_time(storage, key)
        return records.entry_from_record(
            path, entry_type, size=size, modified=modified, record=record
        )


def _checked_prefix(prefix: Any) -> str:
    text = prefix.strip("/") if isinstance(prefix, str) else ""
    try:
        ok = bool(text) and normalize_path("/" + text) == "/" + text
    except InvalidPath:
        ok = False
    if not ok:
        raise ConfigurationError(
            f"The storage prefix must be a relative key such as 'sagents'; got "
            f"{prefix!r}"
        )
    return text


def _segment(value: str) -> str:
    """One key segment, whatever ``value`` holds ('/', '..', '%' ...)."""
    text = quote(value, safe="")
    return text.replace(".", "%2E") if text.strip(".") == "" else text


def _key(root: str, path: str, opts: StorageOpts) -> str:
    """The key of a checked virtual path, under ``root`` by construction and by
    a final check."""
    path = checked_path(path, opts)
    for part in path[1:].split("/"):
        if part.startswith(records.RESERVED_PREFIX):
            raise InvalidPath(
                f"Names starting with {records.RESERVED_PREFIX!r} are reserved: "
                f"{part!r}"
            )
    key = root + path
    if posixpath.normpath(key) != key or not key.startswith(root + "/"):
        raise UnsafePath(f"{path!r} would leave the scope's storage")
    return key


def _parent_key(root: str, path: str) -> str:
    parent = parent_path(path)
    return root if parent == "/" else root + parent


def _listed_path(directory: str, name: str) -> str | None:
    """The virtual path of a name a listing returned, or None to skip it
    (reserved, or a name the namespace refuses)."""
    if name.startswith(records.RESERVED_PREFIX):
        return None
    path = f"{directory}/{name}"
    try:
        return path if normalize_path(path) == path else None
    except InvalidPath:
        return None


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace")
