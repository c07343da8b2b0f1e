"""Storages on a local disk: no key may run through a symbolic link.

Django's ``FileSystemStorage`` follows symbolic links: a link planted below the
media directory (by another process, an unpacked upload, a careless deploy) would
let a scope list, read, overwrite and delete files of another tenant or outside the
media root. So, for a storage with local paths (``storage.path()`` answers; remote
storages raise NotImplementedError and have no links), every key is checked before
the storage sees it, as ``DiskPersistence`` checks its paths:

- no existing component below the storage's own directory is a link (the directory
  itself may be one: ``MEDIA_ROOT`` pointing at a mounted volume is a deployment
  choice, not something a tenant can plant);
- the key's real path lies inside the directory's real path, by whole components.

The Storage API has no ``O_NOFOLLOW``, so a link swapped in between this check and
the storage's own call is not caught; a directory that untrusted processes can
write should use ``DiskPersistence``, which never follows a link at any moment.
"""

from __future__ import annotations

import os
import stat

from django.core.exceptions import SuspiciousFileOperation
from django.core.files.storage import Storage

from sagents_django.core.filesystem.errors import UnsafePath


def local_directory(storage: Storage) -> str | None:
    """The storage's directory on this machine, or None for a remote storage."""
    try:
        return storage.path("")
    except NotImplementedError:
        return None


def check_key(storage: Storage, key: str) -> None:
    """Refuse ``key`` if, on a local storage, it runs through a symbolic link or
    resolves outside the storage's directory (``UnsafePath``)."""
    base = local_directory(storage)
    if base is None:
        return
    try:
        path = storage.path(key)
    except SuspiciousFileOperation:
        raise UnsafePath(f"{key!r} would leave the storage") from None
    current = base
    for part in os.path.relpath(path, base).split(os.sep):
        current = os.path.join(current, part)
        try:
            info = os.lstat(current)
        except (FileNotFoundError, NotADirectoryError):
            break  # nothing more exists below: a write will create real entries
        if stat.S_ISLNK(info.st_mode):
            raise UnsafePath(
                f"{key!r} runs through a symbolic link in the storage; links are "
                "not followed"
            )
    real_base = os.path.realpath(base)
    if os.path.commonpath([real_base, os.path.realpath(path)]) != real_base:
        raise UnsafePath(f"{key!r} would leave the storage directory")


def is_link(storage: Storage, key: str) -> bool:
    """Whether ``key`` (a name a listing returned) is itself a symbolic link."""
    base = local_directory(storage)
    if base is None:
        return False
    try:
        return os.path.islink(storage.path(key))
    except SuspiciousFileOperation:
        return True  # not a name the storage should have listed: skip it too
