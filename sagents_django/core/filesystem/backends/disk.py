"""DiskPersistence: files under a root directory, and never anywhere else.

Virtual paths come from a model, so every disk access goes through ``safe_io``: names
checked, real-path containment by component, and ``openat``-style calls with
``O_NOFOLLOW`` so no symbolic link is ever followed (see that module). Writes go to a
temporary file renamed over the target, so a reader never sees half a file and a
crash leaves the old content; ``fsync=True`` also survives a power cut.

Layout: ``<path>/<virtual path minus base_directory>``, as in the reference; the root
is ``storage_opts["path"]`` or the ``path`` given to the constructor. Metadata the disk
cannot give lives in sidecars (see ``sidecar``). Names starting with ``.sagents-``
are reserved for the backend.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
from dataclasses import replace

from ...exceptions import ConfigurationError
from ..entries import FileEntry, FileMetadata
from ..errors import (
    DirectoryNotEmpty,
    FileExists,
    FileNotFound,
    InvalidPath,
    PathIsDirectory,
    PersistenceError,
    UnsafePath,
)
from ..paths import normalize_path
from ..persistence import Persistence, StorageOpts
from . import safe_io, sidecar

logger = logging.getLogger(__name__)

DEFAULT_MAX_READ = 50 * 1024 * 1024


class DiskPersistence(Persistence):
    """Stores files under ``storage_opts["path"]`` (or the ``path`` given here)."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        fsync: bool = False,
        max_read_bytes: int = DEFAULT_MAX_READ,
    ) -> None:
        if not safe_io.supported():
            raise ConfigurationError(
                "DiskPersistence needs openat-style calls (dir_fd, O_NOFOLLOW), "
                "which this platform lacks"
            )
        self.path = os.fspath(path) if path is not None else None
        self.fsync = fsync
        self.max_read_bytes = max_read_bytes
        """Files larger than this (or the config's max_file_size) are not read."""

    def __repr__(self) -> str:
        return f"<DiskPersistence {self.path!r}>"

    def _locate(self, path: str, opts: StorageOpts) -> tuple[str, list[str]]:
        """The real root and ``path``'s checked components below it."""
        root = opts.get("path") or self.path
        if not root:
            raise ConfigurationError(
                "DiskPersistence needs a root: storage_opts={'path': ...} or "
                "DiskPersistence(path)"
            )
        root = os.path.realpath(os.fspath(root))
        return root, safe_io.relative_parts(root, path, _mount(opts))

    # Persistence ------------------------------------------------------------------
    def write(self, entry: FileEntry, opts: StorageOpts) -> FileEntry:
        root, parts = self._locate(entry.path, opts)
        if entry.is_directory:
            with safe_io.open_directory(root, parts, create=True):
                pass
            sidecar.write_record(root, parts, entry, fsync=self.fsync)
            return entry.mark_clean()
        if not parts:
            raise PathIsDirectory(f"{entry.path} is the storage directory itself")
        data = (entry.content or "").encode("utf-8", "surrogatepass")
        with safe_io.open_directory(root, parts[:-1], create=True) as dfd:
            name = parts[-1]
            safe_io.refuse_link_or_directory(dfd, name, entry.path)
            safe_io.atomic_write(dfd, name, data, fsync=self.fsync)
            info = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        sidecar.write_record(root, parts, entry, fsync=self.fsync)
        meta = entry.metadata or FileMetadata.new(entry.content or "", path=entry.path)
        # Disk's own mtime, so a later listing compares equal (see refresh).
        meta = replace(meta, size=len(data), modified_at=sidecar.stamp(info.st_mtime))
        return replace(
            entry,
            metadata=meta,
            persistence="persisted",
            dirty_content=False,
            dirty_non_content=False,
        )

    def load(self, entry: FileEntry, opts: StorageOpts) -> FileEntry:
        root, parts = self._locate(entry.path, opts)
        if not parts:
            raise PathIsDirectory(f"{entry.path} is a directory")
        limit = min(
            opts.get("max_file_size") or self.max_read_bytes, self.max_read_bytes
        )
        with safe_io.open_directory(root, parts[:-1], create=False) as dfd:
            try:
                fd = os.open(parts[-1], safe_io.READ_FLAGS, dir_fd=dfd)
            except FileNotFoundError:
                raise FileNotFound(f"File not found: {entry.path}") from None
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise UnsafePath(f"{entry.path} is a symbolic link") from None
                raise
            with os.fdopen(fd, "rb") as handle:
                info = os.fstat(handle.fileno())
                if stat.S_ISDIR(info.st_mode):
                    raise PathIsDirectory(f"{entry.path} is a directory")
                if not stat.S_ISREG(info.st_mode):
                    raise UnsafePath(f"{entry.path} is not a regular file")
                if info.st_size > limit:
                    raise PersistenceError(
                        f"{entry.path} is {info.st_size} bytes; files over {limit} "
                        "bytes are not read"
                    )
                data = handle.read(limit + 1)
                if len(data) > limit:  # it grew since fstat
                    raise PersistenceError(
                        f"{entry.path} is over {limit} bytes; files over {limit} "
                        "bytes are not read"
                    )
        record = sidecar.read_record(root, parts)
        return sidecar.entry_from_disk(
            entry.path, "file", info, record, content=_decode(data)
        )

    def delete(self, entry: FileEntry, opts: StorageOpts) -> None:
        root, parts = self._locate(entry.path, opts)
        if not parts:
            return  # the storage directory itself stays
        with (
            contextlib.suppress(FileNotFound),  # its directory is gone already
            safe_io.open_directory(root, parts[:-1], create=False) as dfd,
        ):
            _remove(dfd, parts[-1], entry.path)
        sidecar.delete_record(root, parts)

    def move_in_storage(
        self, entry: FileEntry, new_path: str, opts: StorageOpts
    ) -> FileEntry | None:
        root, source = self._locate(entry.path, opts)
        _, target = self._locate(new_path, opts)
        if not source or not target:
            raise UnsafePath("The storage directory itself cannot be moved")
        with safe_io.open_directory(root, target[:-1], create=True) as dfd:
            target_exists = safe_io.lstat(dfd, target[-1]) is not None
            try:
                with safe_io.open_directory(root, source[:-1], create=False) as sfd:
                    info = safe_io.lstat(sfd, source[-1])
                    if info is None:
                        raise FileNotFound(entry.path)
                    if stat.S_ISLNK(info.st_mode):
                        raise UnsafePath(f"{entry.path} is a symbolic link")
                    if target_exists:
                        raise FileExists(f"Target already exists: {new_path}")
                    os.rename(source[-1], target[-1], src_dir_fd=sfd, dst_dir_fd=dfd)
            except FileNotFound:
                # Moved already with its parent directory: only the record is left.
                if not target_exists:
                    raise FileNotFound(f"File not found: {entry.path}") from None
        moved = replace(entry, path=new_path)
        if sidecar.read_record(root, source) is not None:
            sidecar.delete_record(root, source)
            sidecar.write_record(root, target, moved, fsync=self.fsync)
        return moved.mark_clean()

    def update_metadata_in_storage(
        self, entry: FileEntry, opts: StorageOpts
    ) -> FileEntry | None:
        root, parts = self._locate(entry.path, opts)
        sidecar.write_record(root, parts, entry, fsync=self.fsync)
        return entry.mark_clean()

    def list_persisted_entries(self, opts: StorageOpts) -> list[FileEntry]:
        root, _ = self._locate(_mount(opts) or "/", opts)
        mount = _mount(opts)
        records = sidecar.all_records(root)
        try:
            root_fd = os.open(root, os.O_RDONLY | safe_io.DIRECTORY | safe_io.CLOEXEC)
        except FileNotFoundError:
            return []
        entries: list[FileEntry] = []
        links: list[str] = []
        stack: list[tuple[int, str]] = [(root_fd, "")]
        while stack:
            fd, prefix = stack.pop()
            try:
                with os.scandir(fd) as items:
                    found = list(items)
                for item in found:
                    relative = f"{prefix}/{item.name}" if prefix else item.name
                    if item.is_symlink():
                        links.append(f"{mount}/{relative}")
                        continue  # links are never followed, nor listed
                    path = _virtual(mount, relative, item.name)
                    if path is None:
                        continue
                    info = item.stat(follow_symlinks=False)
                    record = records.get(relative)
                    if stat.S_ISDIR(info.st_mode):
                        entries.append(
                            sidecar.entry_from_disk(path, "directory", info, record)
                        )
                        with contextlib.suppress(OSError):
                            child = os.open(item.name, safe_io.DIR_FLAGS, dir_fd=fd)
                            stack.append((child, relative))
                    elif stat.S_ISREG(info.st_mode):
                        entries.append(
                            sidecar.entry_from_disk(path, "file", info, record)
                        )
            finally:
                os.close(fd)
        if links:
            logger.warning(
                "Files under %s: %d symbolic links refused (links are not followed): "
                "%r",
                mount or "/",
                len(links),
                links,
            )
        return entries


def _mount(opts: StorageOpts) -> str:
    base = opts.get("base_directory")
    return "/" + base if base else ""


def _remove(dfd: int, name: str, path: str) -> None:
    info = safe_io.lstat(dfd, name)
    if info is None:
        return
    if stat.S_ISLNK(info.st_mode):
        raise UnsafePath(f"{path} is a symbolic link")
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(name, dir_fd=dfd)
        return
    try:
        os.rmdir(name, dir_fd=dfd)
    except OSError as exc:
        if exc.errno != errno.ENOTEMPTY:
            raise
        raise DirectoryNotEmpty(f"{path} still holds files on disk") from None


def _virtual(mount: str, relative: str, name: str) -> str | None:
    """The virtual path of a name found on disk, or None to skip it (reserved,
    or not a name the namespace accepts)."""
    path = f"{mount}/{relative}"
    try:
        safe_io.check_part(name, path)
        if normalize_path(path) != path:
            return None
    except InvalidPath:
        return None
    return path


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace")
