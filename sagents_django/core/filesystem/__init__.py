"""The virtual filesystem: entries, configs, per-scope state, backends, the registry.

from sagents_django.core.filesystem import (
    DiskPersistence, FileSystemConfig, get_filesystem,
)

fs = get_filesystem(("user", 42), configs=[
    FileSystemConfig(default=True, persistence=DiskPersistence("/data/users/42")),
])
fs.write_file("/notes.md", "# Notes")
fs.read_file("/notes.md").content
"""

from __future__ import annotations

from .backends import DiskPersistence, MemoryPersistence
from .callbacks import FilesystemCallbacks
from .config import FileSystemConfig
from .debounce import flush_pending_writes
from .entries import FileEntry, FileMetadata, guess_mime_type
from .errors import (
    DirectoryNotEmpty,
    FileExists,
    FileNotFound,
    FileSystemError,
    InvalidEntry,
    InvalidPath,
    PathIsDirectory,
    PathNotDirectory,
    PersistenceError,
    ReadOnlyPath,
    SizeLimitExceeded,
    UnsafePath,
)
from .paths import ancestor_paths, normalize_file_path, normalize_path, valid_name
from .persistence import Persistence, SupportsPersistence
from .registry import (
    filesystem_running,
    flush_all_filesystems,
    get_filesystem,
    list_filesystems,
    stop_filesystem,
)
from .scope import canonical_scope, scope_to_json
from .state import FileSystemState

__all__ = [
    "DirectoryNotEmpty",
    "DiskPersistence",
    "FileEntry",
    "FileExists",
    "FileMetadata",
    "FileNotFound",
    "FileSystemConfig",
    "FileSystemError",
    "FileSystemState",
    "FilesystemCallbacks",
    "InvalidEntry",
    "InvalidPath",
    "MemoryPersistence",
    "PathIsDirectory",
    "PathNotDirectory",
    "Persistence",
    "PersistenceError",
    "ReadOnlyPath",
    "SizeLimitExceeded",
    "SupportsPersistence",
    "UnsafePath",
    "ancestor_paths",
    "canonical_scope",
    "filesystem_running",
    "flush_all_filesystems",
    "flush_pending_writes",
    "get_filesystem",
    "guess_mime_type",
    "list_filesystems",
    "normalize_file_path",
    "normalize_path",
    "scope_to_json",
    "stop_filesystem",
    "valid_name",
]
