"""Filesystem errors: each message is written for the model that sent the request.

The middleware turns every ``FileSystemError`` into an error tool result carrying the
message as is, so a message names the path and says what to do instead::

    SagentsError
    └── FileSystemError
        ├── InvalidPath            a path the namespace refuses ("..", NUL, "~" ...)
        │   └── UnsafePath         a disk path that would leave the storage root
        ├── FileNotFound
        ├── FileExists
        ├── PathIsDirectory        a file operation on a directory
        ├── PathNotDirectory       a path whose parent is a file
        ├── DirectoryNotEmpty
        ├── ReadOnlyPath           a write under a read-only config
        ├── SizeLimitExceeded      per-file or per-filesystem byte limit
        ├── InvalidEntry           bad attributes for update_entry
        └── PersistenceError       the backend failed (I/O, database ...)
"""

from __future__ import annotations

from ..exceptions import SagentsError


class FileSystemError(SagentsError):
    """Base class of the virtual filesystem's errors."""


class InvalidPath(FileSystemError):
    """The path is not acceptable in the virtual namespace."""


class UnsafePath(InvalidPath):
    """The storage path would leave its root (symbolic link, traversal)."""


class FileNotFound(FileSystemError):
    """No file or directory at the path."""


class FileExists(FileSystemError):
    """Something already exists at the target path."""


class PathIsDirectory(FileSystemError):
    """A file operation was asked of a directory."""


class PathNotDirectory(FileSystemError):
    """A path component that must be a directory is a file."""


class DirectoryNotEmpty(FileSystemError):
    """A directory still holds entries."""


class ReadOnlyPath(FileSystemError):
    """The path lies under a read-only configuration."""


class SizeLimitExceeded(FileSystemError):
    """A write would exceed a per-file or per-filesystem size limit."""


class InvalidEntry(FileSystemError):
    """Entry attributes that update_entry does not accept."""


class PersistenceError(FileSystemError):
    """The storage backend failed."""
