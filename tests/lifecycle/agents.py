"""The factory of the lifecycle tests: an agent whose files live in three
backends at once (the database by default, a Django storage under /exports, a
disk under /notes with a root per filesystem scope), so erasure and export are
seen to reach every one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.files.storage import InMemoryStorage

from sagents_django.conf import sagents_settings
from sagents_django.core import Agent, ChatModel
from sagents_django.core.filesystem import DiskPersistence, FileSystemConfig
from sagents_django.core.filesystem.entries import FileEntry
from sagents_django.core.middleware.filesystem import FileSystem
from sagents_django.filesystems import DatabasePersistence, StoragePersistence

STORAGE = InMemoryStorage()
DISK_ROOT: list[Path] = []
"""The disk backend's parent directory, set by the test (one at a time)."""
SHARED_DISK: list[bool] = [False]
"""True: every scope's disk files under one root (a root erasure must not empty)."""


def disk_root(key: Any) -> Path:
    if SHARED_DISK[0]:
        return DISK_ROOT[0] / "shared"
    kind, ident = key
    return DISK_ROOT[0] / str(kind) / str(ident)


def file_configs(key: Any) -> list[FileSystemConfig]:
    configs = [
        FileSystemConfig(default=True, persistence=DatabasePersistence()),
        FileSystemConfig(
            base_directory="exports",
            persistence=StoragePersistence(STORAGE, prefix="agent-files"),
        ),
    ]
    if DISK_ROOT:
        configs.append(
            FileSystemConfig(
                base_directory="notes",
                persistence=DiskPersistence(),
                storage_opts={"path": str(disk_root(key))},
            )
        )
    return configs


def build_agent(*, agent_id: str, scope: Any, filesystem_scope: Any = None) -> Agent:
    key = filesystem_scope or ("agent", agent_id)
    return Agent(
        agent_id=agent_id,
        model=ChatModel(
            model=sagents_settings.MODEL,
            params=sagents_settings.MODEL_PARAMS,
            max_retries=0,
        ),
        middleware=[FileSystem(configs=file_configs(key))],
        replace_default_middleware=True,
        filesystem_scope=filesystem_scope,
    )


def seed_files(key: Any, text: str) -> None:
    """One file in each backend of ``key``'s filesystem."""
    for config, path in zip(
        file_configs(key), ("/a.md", "/exports/b.md", "/notes/deep/c.md"), strict=False
    ):
        entry = FileEntry.new_persisted_file(path, text)
        config.persistence.write(entry, config.build_storage_opts(key))


def stored_paths(key: Any) -> list[str]:
    """Every file path any backend holds for ``key``."""
    paths: list[str] = []
    for config in file_configs(key):
        opts = config.build_storage_opts(key)
        for entry in config.persistence.list_persisted_entries(opts):
            if entry.entry_type == "file":
                paths.append(entry.path)
    return sorted(paths)
