"""Filesystem backends over Django: the database and any configured storage.

Both implement the core's ``Persistence`` seam and are plugged in through a
``FileSystemConfig``::

    from sagents_django.core.filesystem import FileSystemConfig
    from sagents_django.core.middleware.filesystem import FileSystem
    from sagents_django.filesystems import DatabasePersistence, StoragePersistence

    FileSystem(configs=[
        FileSystemConfig(default=True, persistence=DatabasePersistence()),
        FileSystemConfig(
            base_directory="exports",
            persistence=StoragePersistence("default", prefix="agent-files"),
        ),
    ])

A config may name them by dotted path instead
(``"sagents_django.filesystems.DatabasePersistence"``). Files are kept per filesystem
scope, a ``(kind, id)`` pair such as ``("user", 42)``.
"""

from __future__ import annotations

from .database import DatabasePersistence
from .storage import StoragePersistence

__all__ = ["DatabasePersistence", "StoragePersistence"]
