"""Storages on a local disk: no key may run through a symbolic link.

Django's ``FileSystemStorage`` follows symbolic links: a link planted below the
media directory (by another process, an unpacked upload, a careless deploy) would
let a scope list, read, overwrite and delete files of another tenant or outside the
media root. So, for a storage with local paths (``storage.path()`` answers; remote
storages raise NotImplementedError and have no links), every key is checked before
the storage sees it, as ``DiskPersistence`` checks its paths:

- its name lies inside the storage's directory by whole components (Django's
  ``safe_join`` in ``storage.path``, and a prefix check here);
- no existing component below that directory is a link (the directory itself may
  be one: ``MEDIA_ROOT`` pointing at a mounted volume is a deployment choice, not
  something a tenant can plant).

Together they make the key's real path lie inside the directory's real path: with
no link below it, resolving the path cannot leave it. (One ``lstat`` per component
costs a few microseconds; ``os.path.realpath`` on every key cost five times more.)

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
    # Both are absolute and normalized by storage.path.
    inside = base.rstrip(os.sep) + os.sep
    if path != base and not path.startswith(inside):
        raise UnsafePath(f"{key!r} would leave the storage directory")
    current = base
    for part in path[len(inside) :].split(os.sep) if path != base else ():
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


def is_link(storage: Storage, key: str) -> bool:
    """Whether ``key`` (a name a listing returned) is itself a symbolic link."""
    base = local_directory(storage)
    if base is None:
        return False
    try:
        return os.path.islink(storage.path(key))
    except SuspiciousFileOperation:
        return True  # not a name the storage should have listed: skip it too
