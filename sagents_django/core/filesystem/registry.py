"""The process-level registry: one FileSystemState per scope, shared by every agent.

Sagents starts a FileSystemServer per scope under a supervisor so that several
conversations can share one filesystem. Here the same role is played by a dict guarded
by a lock: ``get_filesystem(("user", 42))`` returns the same object to every agent of
that scope in this process, so a file one agent writes is seen by the next turn of
another. Across processes the backends are the meeting point (write-through storage,
plus ``refresh`` and read-time lookups in ``FileSystemState``); files under no config
live only in the process that wrote them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from .config import FileSystemConfig
from .scope import ScopeKey, canonical_scope
from .state import DEFAULT_MAX_FILE_SIZE, DEFAULT_MAX_TOTAL_SIZE, FileSystemState

_lock = threading.Lock()
_filesystems: dict[Any, FileSystemState] = {}


def get_filesystem(
    scope: Any,
    *,
    configs: Iterable[FileSystemConfig] = (),
    max_file_size: int | None = DEFAULT_MAX_FILE_SIZE,
    max_total_size: int | None = DEFAULT_MAX_TOTAL_SIZE,
) -> FileSystemState:
    """The filesystem of ``scope``, created on first use (the reference's
    ``ensure_filesystem``). Later calls return the same object; configs for base
    directories it does not have yet are registered, the others are ignored, and the
    size limits apply only on creation."""
    key = canonical_scope(scope)
    configs = list(configs)
    with _lock:
        filesystem = _filesystems.get(key)
        if filesystem is None:
            filesystem = FileSystemState(
                key,
                configs=configs,
                max_file_size=max_file_size,
                max_total_size=max_total_size,
            )
            _filesystems[key] = filesystem
            return filesystem
    known = filesystem.get_persistence_configs()
    for config in configs:
        if config.key not in known and not (
            config.default and any(c.default for c in known.values())
        ):
            filesystem.register_persistence(config)
    return filesystem


def filesystem_running(scope: Any) -> bool:
    with _lock:
        return canonical_scope(scope) in _filesystems


def list_filesystems() -> list[ScopeKey]:
    """The scopes with a filesystem in this process."""
    with _lock:
        return list(_filesystems)


def stop_filesystem(scope: Any) -> bool:
    """Flush pending writes and forget the scope's filesystem; False if none."""
    with _lock:
        filesystem = _filesystems.pop(canonical_scope(scope), None)
    if filesystem is None:
        return False
    filesystem.flush_all()
    return True


def flush_all_filesystems() -> int:
    """Flush the pending writes of every filesystem of the registry; returns how
    many changes were stored. (``flush_pending_writes`` covers every filesystem of
    the process, registered or not: what stopping processes call.)"""
    with _lock:
        filesystems = list(_filesystems.values())
    return sum(fs.flush_all() for fs in filesystems)
