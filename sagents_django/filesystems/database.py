"""DatabasePersistence: an agent filesystem kept in ``StoredFile`` rows.

Rows belong to the filesystem scope (``("user", 42)`` → ``scope_kind="user"``,
``scope_id="42"``) and hold the full virtual path, so several configs of one scope
can share the table. Every operation is one query except a move, which is a read
and one ``UPDATE`` in its own savepoint:

- ``list_persisted_entries`` reads every column but the content: files are indexed
  unloaded, and ``load`` fetches the content of one file when it is first read;
- ``write`` is an upsert (``INSERT ... ON CONFLICT DO UPDATE``), so two workers
  writing one path never collide on the unique constraint;
- ``update_metadata_in_storage`` updates ``custom_metadata`` and ``mime_type`` only;
- ``move_in_storage`` renames a row and, for a directory, every row below it at
  once; the filesystem's later calls for those children find them moved already.

Content with NUL characters is stored encoded (see ``encoding``). Calls made on an
event loop's thread run in a worker thread (see ``threads``); from any other thread
they run in place, inside the caller's transaction.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.db import DataError, IntegrityError, router, transaction
from django.db.models import CharField, Field, Q, QuerySet, Value
from django.db.models.functions import Concat, Left, Substr
from django.db.models.lookups import Exact

from sagents_django.core.exceptions import ConfigurationError
from sagents_django.core.filesystem.entries import FileEntry
from sagents_django.core.filesystem.errors import FileExists, FileNotFound, InvalidPath
from sagents_django.core.filesystem.paths import is_within
from sagents_django.core.filesystem.persistence import Persistence, StorageOpts
from sagents_django.models import StoredFile

from .encoding import decode_content, encode_content
from .keys import checked_path, mount, opts_scope
from .rows import LISTED_FIELDS, entry_from_row, mime_type, row_json, stored_metadata
from .threads import backend_call

UPSERT_FIELDS = ["content", "size", "mime_type", "custom_metadata", "updated_at"]


class DatabasePersistence(Persistence):
    """Stores a filesystem scope's files in the ``StoredFile`` table."""

    def __init__(self, *, using: str | None = None) -> None:
        self.using = using
        """A database alias (or ``storage_opts["using"]``); None lets the database
        routers choose."""

    def __repr__(self) -> str:
        return f"<DatabasePersistence using={self.using!r}>"

    # Persistence ------------------------------------------------------------------
    @backend_call
    def write(self, entry: FileEntry, opts: StorageOpts) -> FileEntry:
        path = _storable_path(entry.path, opts)
        kind, ident = self._scope(opts)
        stored = replace(
            entry,
            metadata=stored_metadata(entry),
            persistence="persisted",
            dirty_content=False,
            dirty_non_content=False,
        )
        row = StoredFile(
            scope_kind=kind,
            scope_id=ident,
            path=path,
            content="" if entry.is_directory else encode_content(entry.content or ""),
            size=stored.size,
            mime_type=mime_type(stored),
            custom_metadata=row_json(stored),
        )
        self._manager(opts).bulk_create(
            [row],
            update_conflicts=True,
            unique_fields=["scope_kind", "scope_id", "path"],
            update_fields=UPSERT_FIELDS,
        )
        return stored

    @backend_call
    def load(self, entry: FileEntry, opts: StorageOpts) -> FileEntry:
        path = checked_path(entry.path, opts)
        found = list(
            self._rows(opts).filter(path=path).values(*LISTED_FIELDS, "content")[:1]
        )
        if not found:
            raise FileNotFound(f"File not found: {entry.path}")
        row = found[0]
        return entry_from_row(row, decode_content(row["content"]))

    @backend_call
    def delete(self, entry: FileEntry, opts: StorageOpts) -> None:
        path = checked_path(entry.path, opts)
        self._rows(opts).filter(path=path).delete()

    @backend_call
    def list_persisted_entries(self, opts: StorageOpts) -> list[FileEntry]:
        rows = self._rows(opts)
        if mount(opts):
            rows = rows.filter(_within(mount(opts)))
        return [entry_from_row(row) for row in rows.values(*LISTED_FIELDS)]

    @backend_call
    def move_in_storage(
        self, entry: FileEntry, new_path: str, opts: StorageOpts
    ) -> FileEntry | None:
        old = checked_path(entry.path, opts)
        new = _storable_path(new_path, opts)
        if is_within(new, old):
            raise InvalidPath(f"Cannot move {old} into itself ({new}).")
        rows = self._rows(opts)
        present = set(rows.filter(path__in=[old, new]).values_list("path", flat=True))
        if new in present and old not in present:
            # Moved already, by the call for its directory (the filesystem calls
            # once per entry, parents first): a read, not a write and a commit.
            return replace(entry, path=new).mark_clean()
        renamed = Concat(
            Value(new), Substr("path", len(old) + 1), output_field=CharField()
        )
        try:
            # A savepoint: a clash inside the subtree undoes the whole rename and
            # leaves the caller's transaction usable.
            with transaction.atomic(using=self._alias(opts)):
                moved = rows.filter(_within(old)).update(path=renamed)
        except IntegrityError:
            raise FileExists(f"Target already exists: {new}") from None
        except DataError:
            raise InvalidPath(
                f"Moving {old} to {new} would make paths longer than "
                f"{_max_path()} characters."
            ) from None
        if not moved:
            raise FileNotFound(f"File not found: {old}")
        return replace(entry, path=new).mark_clean()

    @backend_call
    def update_metadata_in_storage(
        self, entry: FileEntry, opts: StorageOpts
    ) -> FileEntry | None:
        path = checked_path(entry.path, opts)
        updated = (
            self._rows(opts)
            .filter(path=path)
            .update(custom_metadata=row_json(entry), mime_type=mime_type(entry))
        )
        if not updated:
            raise FileNotFound(f"File not found: {entry.path}")
        return entry.mark_clean()

    # Helpers ----------------------------------------------------------------------
    def _using(self, opts: StorageOpts) -> str | None:
        return opts.get("using") or self.using

    def _alias(self, opts: StorageOpts) -> str:
        return self._using(opts) or router.db_for_write(StoredFile)

    def _manager(self, opts: StorageOpts) -> Any:
        using = self._using(opts)
        return StoredFile.objects.using(using) if using else StoredFile.objects

    def _scope(self, opts: StorageOpts) -> tuple[str, str]:
        kind, ident = opts_scope(opts)
        for name, value in (("scope_kind", kind), ("scope_id", ident)):
            column = StoredFile._meta.get_field(name)
            limit = column.max_length if isinstance(column, Field) else None
            if limit is not None and len(value) > limit:
                raise ConfigurationError(
                    f"The filesystem scope's {name} {value[:40]!r}... is longer than "
                    f"the {limit} characters the database holds."
                )
        return kind, ident

    def _rows(self, opts: StorageOpts) -> QuerySet[StoredFile]:
        kind, ident = self._scope(opts)
        return self._manager(opts).filter(scope_kind=kind, scope_id=ident)


def _within(directory: str) -> Q:
    """Rows at ``directory`` or below it. ``startswith`` lets an index narrow the
    rows; SQLite's LIKE ignores ASCII case, so the prefix is compared exactly too
    ("/Notes" must not take "/notes/a.md" along)."""
    prefix = directory + "/"
    return Q(path=directory) | (
        Q(path__startswith=prefix) & Q(Exact(Left("path", len(prefix)), prefix))
    )


def _max_path() -> int:
    return StoredFile._meta.get_field("path").max_length or 0


def _storable_path(path: str, opts: StorageOpts) -> str:
    checked = checked_path(path, opts)
    if len(checked) > _max_path():
        raise InvalidPath(
            f"Path is too long for the database ({len(checked)} characters; the "
            f"limit is {_max_path()}). Use a shorter path."
        )
    return checked
