"""Disk access that cannot leave a root directory, whatever path it is given.

These primitives are the disk backend's security boundary, kept small so they can be
read in one sitting. A path is checked twice. First by name: no ``..``, ``.``, empty,
NUL, backslash or reserved components, and its real path must sit inside the real
root by whole components (``commonpath``, never a string prefix: "/data2" is not in
"/data"). Then by construction: directories are opened one component at a time with
``O_NOFOLLOW`` relative to their parent's descriptor (``openat``), and files are
opened, created, renamed and removed relative to that descriptor, so a symbolic link
anywhere on the path, even one swapped in after the first check, makes the call fail
instead of being followed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator

from ..errors import (
    FileNotFound,
    InvalidPath,
    PathIsDirectory,
    PathNotDirectory,
    UnsafePath,
)
from ..paths import MAX_SEGMENT_BYTES

RESERVED_PREFIX = ".sagents-"
"""Names the backend keeps for itself (temporary files, sidecars)."""
TMP_PREFIX = ".sagents-tmp-"
CLOEXEC = getattr(os, "O_CLOEXEC", 0)
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
DIRECTORY = getattr(os, "O_DIRECTORY", 0)
DIR_FLAGS = os.O_RDONLY | DIRECTORY | NOFOLLOW | CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | NOFOLLOW | CLOEXEC
"""O_NONBLOCK: opening a FIFO planted in the tree must not hang the worker."""


def supported() -> bool:
    """Whether this platform offers the ``*at`` calls the checks rely on."""
    return bool(
        NOFOLLOW
        and DIRECTORY
        # os.replace shares os.rename's implementation (and its dir_fd support).
        and {os.open, os.mkdir, os.stat, os.rename, os.unlink, os.rmdir}
        <= os.supports_dir_fd
        and {os.scandir, os.listdir} <= os.supports_fd
    )


def check_part(part: str, virtual_path: str) -> None:
    """Refuse a path component the disk could misread."""
    if part in ("", ".", "..") or "\x00" in part or "\\" in part or "/" in part:
        raise UnsafePath(f"{virtual_path!r} has an unsafe component {part!r}")
    if part.startswith(RESERVED_PREFIX):
        raise InvalidPath(
            f"Names starting with {RESERVED_PREFIX!r} are reserved: {part!r}"
        )
    try:
        size = len(part.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidPath(f"{virtual_path!r} is not valid Unicode text") from None
    if size > MAX_SEGMENT_BYTES:
        raise InvalidPath(f"The name {part[:40]!r}... is too long for a disk")


def relative_parts(root: str, virtual_path: str, mount: str) -> list[str]:
    """The components of ``virtual_path`` below ``mount`` ("" or "/Memories"),
    checked by name and by real-path containment in ``root`` (already real)."""
    if not isinstance(virtual_path, str) or not virtual_path.startswith("/"):
        raise UnsafePath(f"Storage paths are absolute virtual paths: {virtual_path!r}")
    if mount and virtual_path == mount:
        return []
    if not virtual_path.startswith(mount + "/"):
        raise UnsafePath(f"{virtual_path!r} is outside {mount or '/'}")
    relative = virtual_path[len(mount) + 1 :]
    parts = relative.split("/") if relative else []
    for part in parts:
        check_part(part, virtual_path)
    target = os.path.realpath(os.path.join(root, *parts))
    if os.path.commonpath([root, target]) != root:
        raise UnsafePath(
            f"{virtual_path!r} would leave the storage directory (symbolic link)"
        )
    return parts


@contextlib.contextmanager
def open_directory(root: str, parts: list[str], *, create: bool) -> Iterator[int]:
    """A descriptor of ``root/parts``, opened component by component without
    following links; missing directories are created when ``create``."""
    if create:
        os.makedirs(root, exist_ok=True)
    try:
        fd = os.open(root, os.O_RDONLY | DIRECTORY | CLOEXEC)
    except FileNotFoundError:
        raise FileNotFound("The storage directory does not exist yet") from None
    try:
        for index, part in enumerate(parts):
            fd = _open_child(fd, part, parts[: index + 1], create=create)
        yield fd
    finally:
        os.close(fd)


def _open_child(fd: int, part: str, shown: list[str], *, create: bool) -> int:
    """Open ``part`` below ``fd`` and close ``fd`` (only on success)."""
    try:
        child = os.open(part, DIR_FLAGS, dir_fd=fd)
    except FileNotFoundError:
        if not create:
            raise FileNotFound(f"File not found: /{'/'.join(shown)}") from None
        with contextlib.suppress(FileExistsError):
            os.mkdir(part, 0o755, dir_fd=fd)
        return _open_child(fd, part, shown, create=False)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise
        info = os.stat(part, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            raise UnsafePath(
                f"/{'/'.join(shown)} is a symbolic link; links are not followed"
            ) from None
        raise PathNotDirectory(
            f"/{'/'.join(shown)} is a file, not a directory"
        ) from None
    os.close(fd)
    return child


def atomic_write(dfd: int, name: str, data: bytes, *, fsync: bool = False) -> None:
    """Write ``name`` in directory ``dfd`` through a temporary file renamed over it:
    a reader sees the old content or the new, never half; rename replaces a link
    itself rather than writing through it."""
    temp = TMP_PREFIX + secrets.token_hex(8)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | CLOEXEC
    fd = os.open(temp, flags, 0o644, dir_fd=dfd)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if fsync:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(temp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dfd)
        raise


def lstat(dfd: int, name: str) -> os.stat_result | None:
    """``name``'s own status in ``dfd`` (a link is not followed); None if missing."""
    try:
        return os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def refuse_link_or_directory(dfd: int, name: str, path: str) -> None:
    info = lstat(dfd, name)
    if info is None:
        return
    if stat.S_ISLNK(info.st_mode):
        raise UnsafePath(f"{path} is a symbolic link; it cannot be written through")
    if stat.S_ISDIR(info.st_mode):
        raise PathIsDirectory(f"{path} is a directory")
