"""Fixtures for the filesystem tests: unique scopes, disk roots with a trap outside."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sagents_django.core.filesystem import (
    DiskPersistence,
    FileSystemConfig,
    list_filesystems,
    stop_filesystem,
)


@pytest.fixture
def scope() -> Iterator[tuple[str, str]]:
    """A scope no other test uses; its registry entry is dropped afterwards."""
    key = ("test", uuid.uuid4().hex)
    yield key
    stop_filesystem(key)


@pytest.fixture(autouse=True)
def _no_leaked_filesystems() -> Iterator[None]:
    before = set(list_filesystems())
    yield
    for key in set(list_filesystems()) - before:
        stop_filesystem(key)


@pytest.fixture
def disk_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    return root


@pytest.fixture
def outside(tmp_path: Path, disk_root: Path) -> Path:
    """A directory next to the root holding a secret, linked from inside the root
    (``/link`` -> outside, ``/secret-link`` -> the secret file)."""
    target = tmp_path / "outside"
    target.mkdir()
    (target / "secret.txt").write_text("TOP SECRET")
    os.symlink(target, disk_root / "link")
    os.symlink(target / "secret.txt", disk_root / "secret-link")
    return target


@pytest.fixture
def disk_config(disk_root: Path) -> FileSystemConfig:
    return FileSystemConfig(default=True, persistence=DiskPersistence(disk_root))


def snapshot(directory: Path) -> dict[str, bytes | str]:
    """Every path below ``directory`` with its content (or link target)."""
    found: dict[str, bytes | str] = {}
    for path in sorted(directory.rglob("*")):
        relative = str(path.relative_to(directory))
        if path.is_symlink():
            found[relative] = "-> " + os.readlink(path)
        elif path.is_file():
            found[relative] = path.read_bytes()
        else:
            found[relative] = "<dir>"
    return found
