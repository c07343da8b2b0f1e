"""FileEntry and FileMetadata: one file or directory of the virtual filesystem.

Entries are frozen: the filesystem replaces an entry instead of changing it, so a
listing handed to a caller (or to another thread) never changes under it and needs no
copy. Every "update" below returns a new entry.
"""

from __future__ import annotations

import hashlib
import mimetypes
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal, TypeAlias

from .errors import PathIsDirectory
from .paths import basename, valid_name

EntryType: TypeAlias = Literal["file", "directory"]
Persistence: TypeAlias = Literal["memory", "persisted"]

__all__ = ["EntryType", "FileEntry", "FileMetadata", "guess_mime_type", "valid_name"]

# Text formats the stdlib table lacks; the table is used without the system's files
# so that the inferred type does not depend on the machine.
_EXTRA_TYPES = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".toml": "application/toml",
}
_mime_table: mimetypes.MimeTypes | None = None


def guess_mime_type(path: str) -> str:
    """The MIME type for ``path``'s extension; ``text/plain`` when unknown."""
    global _mime_table
    name = basename(path).lower()
    dot = name.rfind(".")
    if dot > 0 and name[dot:] in _EXTRA_TYPES:
        return _EXTRA_TYPES[name[dot:]]
    if _mime_table is None:
        _mime_table = mimetypes.MimeTypes()
    return _mime_table.guess_type(name, strict=False)[0] or "text/plain"


def now() -> datetime:
    return datetime.now(UTC)


def checksum(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()


def byte_size(content: str) -> int:
    return len(content.encode("utf-8", "surrogatepass"))


@dataclass(kw_only=True, slots=True, frozen=True)
class FileMetadata:
    """What is known about a file's content (all content is text, for LLM work)."""

    size: int | None = None
    """Bytes of the UTF-8 content."""
    created_at: datetime | None = None
    modified_at: datetime | None = None
    mime_type: str = "text/plain"
    encoding: str = "utf-8"
    checksum: str | None = None
    """SHA-256 of the UTF-8 content, hex."""
    custom: dict[str, Any] = field(default_factory=dict)
    """Application data (tags, genre ...), JSON only."""

    @classmethod
    def new(
        cls,
        content: str,
        *,
        mime_type: str | None = None,
        custom: dict[str, Any] | None = None,
        path: str | None = None,
    ) -> FileMetadata:
        stamp = now()
        return cls(
            size=byte_size(content),
            created_at=stamp,
            modified_at=stamp,
            mime_type=mime_type or (guess_mime_type(path) if path else "text/plain"),
            checksum=checksum(content),
            custom=dict(custom or {}),
        )

    def update_for_modification(
        self,
        new_content: str,
        *,
        mime_type: str | None = None,
        custom: dict[str, Any] | None = None,
    ) -> FileMetadata:
        """New size, checksum and modified_at; created_at and the rest are kept."""
        return replace(
            self,
            size=byte_size(new_content),
            modified_at=now(),
            checksum=checksum(new_content),
            mime_type=mime_type or self.mime_type,
            custom=dict(custom) if custom is not None else self.custom,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "created_at": _iso(self.created_at),
            "modified_at": _iso(self.modified_at),
            "mime_type": self.mime_type,
            "encoding": self.encoding,
            "checksum": self.checksum,
            "custom": dict(self.custom),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FileMetadata:
        return cls(
            size=data.get("size"),
            created_at=_parse(data.get("created_at")),
            modified_at=_parse(data.get("modified_at")),
            mime_type=data.get("mime_type") or "text/plain",
            encoding=data.get("encoding") or "utf-8",
            checksum=data.get("checksum"),
            custom=dict(data.get("custom") or {}),
        )


@dataclass(kw_only=True, slots=True, frozen=True)
class FileEntry:
    """A file or directory.

    ``persistence`` is ``memory`` (ephemeral) or ``persisted`` (backed by a config's
    storage). ``loaded`` is false for a persisted file whose content is still in
    storage (read lazily). ``dirty_content`` / ``dirty_non_content`` say what differs
    from storage (only meaningful for persisted entries; directories are never dirty
    on creation).
    """

    path: str
    entry_type: EntryType = "file"
    title: str | None = None
    """A human-readable name ("Hero Character Sheet")."""
    id: str | None = None
    """An identifier a backend may assign (a database id)."""
    file_type: str | None = None
    """An application-defined kind ("character", "outline")."""
    persistence: Persistence = "memory"
    loaded: bool = True
    dirty_content: bool = False
    dirty_non_content: bool = False
    content: str | None = None
    metadata: FileMetadata | None = None

    # Constructors (the reference's new_* functions) --------------------------------
    @classmethod
    def new_memory_file(
        cls,
        path: str,
        content: str,
        *,
        title: str | None = None,
        mime_type: str | None = None,
        custom: dict[str, Any] | None = None,
    ) -> FileEntry:
        return cls(
            path=path,
            title=title,
            content=content,
            metadata=FileMetadata.new(
                content, mime_type=mime_type, custom=custom, path=path
            ),
        )

    @classmethod
    def new_persisted_file(
        cls,
        path: str,
        content: str,
        *,
        title: str | None = None,
        mime_type: str | None = None,
        custom: dict[str, Any] | None = None,
    ) -> FileEntry:
        """A new file that still has to reach storage (hence dirty)."""
        return cls(
            path=path,
            title=title,
            content=content,
            persistence="persisted",
            dirty_content=True,
            metadata=FileMetadata.new(
                content, mime_type=mime_type, custom=custom, path=path
            ),
        )

    @classmethod
    def new_indexed_file(
        cls,
        path: str,
        *,
        title: str | None = None,
        entry_type: EntryType = "file",
        metadata: FileMetadata | None = None,
        id: str | None = None,
        file_type: str | None = None,
    ) -> FileEntry:
        """A persisted entry known from storage, content not loaded yet."""
        return cls(
            path=path,
            entry_type=entry_type,
            title=title,
            id=id,
            file_type=file_type,
            persistence="persisted",
            loaded=entry_type == "directory",
            metadata=metadata,
        )

    @classmethod
    def new_directory(
        cls,
        path: str,
        *,
        title: str | None = None,
        custom: dict[str, Any] | None = None,
        persistence: Persistence = "persisted",
    ) -> FileEntry:
        stamp = now()
        return cls(
            path=path,
            entry_type="directory",
            title=title,
            persistence=persistence,
            metadata=FileMetadata(
                size=0,
                created_at=stamp,
                modified_at=stamp,
                mime_type="inode/directory",
                custom=dict(custom or {}),
            ),
        )

    # Reading ----------------------------------------------------------------------
    @property
    def is_directory(self) -> bool:
        return self.entry_type == "directory"

    @property
    def size(self) -> int:
        """Bytes of content, from the metadata when the content is not loaded."""
        if self.is_directory:
            return 0
        if self.metadata is not None and self.metadata.size is not None:
            return self.metadata.size
        return byte_size(self.content) if self.content else 0

    @property
    def custom(self) -> dict[str, Any]:
        return self.metadata.custom if self.metadata else {}

    @property
    def dirty(self) -> bool:
        return self.dirty_content or self.dirty_non_content

    # Updates (new entries) --------------------------------------------------------
    def mark_clean(self) -> FileEntry:
        if not (self.dirty_content or self.dirty_non_content):
            return self
        return replace(self, dirty_content=False, dirty_non_content=False)

    def mark_loaded(
        self, content: str, metadata: FileMetadata | None = None
    ) -> FileEntry:
        """Content from storage; existing metadata is kept unless storage gave some."""
        meta = metadata or self.metadata or FileMetadata.new(content, path=self.path)
        if meta.size is None or meta.checksum is None:
            meta = replace(meta, size=byte_size(content), checksum=checksum(content))
        return replace(self, content=content, loaded=True, metadata=meta)

    def unloaded(self) -> FileEntry:
        """The entry without its content (it stays in storage)."""
        return replace(self, content=None, loaded=self.is_directory)

    def update_content(
        self,
        new_content: str,
        *,
        mime_type: str | None = None,
        custom: dict[str, Any] | None = None,
    ) -> FileEntry:
        """New content, metadata kept (created_at, custom ...); dirty if persisted."""
        if self.is_directory:
            raise PathIsDirectory(f"{self.path} is a directory; it has no content.")
        meta = (
            self.metadata.update_for_modification(
                new_content, mime_type=mime_type, custom=custom
            )
            if self.metadata
            else FileMetadata.new(
                new_content, mime_type=mime_type, custom=custom, path=self.path
            )
        )
        return replace(
            self,
            content=new_content,
            loaded=True,
            metadata=meta,
            dirty_content=self.persistence == "persisted",
        )

    def with_custom(self, custom: dict[str, Any]) -> FileEntry:
        """``custom`` merged into the metadata's custom map."""
        meta = self.metadata or FileMetadata()
        return replace(self, metadata=replace(meta, custom={**meta.custom, **custom}))

    # JSON -------------------------------------------------------------------------
    def to_dict(self, *, include_content: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {
            "path": self.path,
            "entry_type": self.entry_type,
            "title": self.title,
            "id": self.id,
            "file_type": self.file_type,
            "persistence": self.persistence,
            "loaded": self.loaded,
            "dirty_content": self.dirty_content,
            "dirty_non_content": self.dirty_non_content,
            "metadata": self.metadata.to_dict() if self.metadata else None,
        }
        if include_content:
            data["content"] = self.content
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FileEntry:
        metadata = data.get("metadata")
        content = data.get("content")
        return cls(
            path=data["path"],
            entry_type=data.get("entry_type") or "file",
            title=data.get("title"),
            id=data.get("id"),
            file_type=data.get("file_type"),
            persistence=data.get("persistence") or "memory",
            loaded=bool(data.get("loaded", content is not None)),
            dirty_content=bool(data.get("dirty_content", False)),
            dirty_non_content=bool(data.get("dirty_non_content", False)),
            content=content,
            metadata=FileMetadata.from_dict(metadata) if metadata else None,
        )


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _parse(value: Any) -> datetime | None:
    if not value:
        return None
    if isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))
