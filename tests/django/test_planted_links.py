"""The planted-link corpus, run on every file backend.

Someone who can write the media directory (another process, an unpacked upload)
plants symbolic links inside a scope's files: to a directory outside the storage, to
a secret file, to another tenant's files, to the directory itself (a cycle), to its
parent, to nowhere, and in place of a metadata record. Then the model and the
backend API try every operation on them. Nothing outside the scope may be read,
written or deleted, the scope's own files stay listed (a cycle used to empty the
listing in silence), and what was refused is reported in the log.

Backends without a disk (the database, InMemoryStorage, MemoryPersistence) have no
links to plant: for them the same operations run against the same names next to a
neighbour's files, which must stay out of reach all the same.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.core.files.storage import FileSystemStorage, InMemoryStorage

from sagents_django.core.filesystem import (
    DiskPersistence,
    FileEntry,
    FileSystemConfig,
    FileSystemError,
    FileSystemState,
    MemoryPersistence,
    UnsafePath,
)
from sagents_django.filesystems import DatabasePersistence, StoragePersistence
from sagents_django.filesystems.records import record_name

pytestmark = pytest.mark.django_db

SECRET = "TOP SECRET"
THEIRS = "THEIRS"
LINKED_BACKENDS = ("filesystem-storage", "disk")
HOSTILE_PATHS = [
    "/secret-link",
    "/link/secret.txt",
    "/link/new.txt",
    "/tenant/their.txt",
    "/loop/mine.txt",
    "/up/outside/secret.txt",
    "/dangling",
    "/dangling-dir/new.txt",
]


@dataclass
class Site:
    """One backend with my scope, a neighbour's scope and a secret outside both."""

    kind: str
    backend: Any
    configs: dict[tuple[str, str], FileSystemConfig]
    """The config of each scope: mine first, then the neighbour's."""
    outside: Path
    root: Path | None = None
    """My scope's directory on disk (where links can be planted)."""
    their_root: Path | None = None
    planted: list[str] = field(default_factory=list)

    @property
    def me(self) -> tuple[str, str]:
        return next(iter(self.configs))

    @property
    def them(self) -> tuple[str, str]:
        return list(self.configs)[1]

    @property
    def mine(self) -> dict[str, Any]:
        """What the backend receives on calls for my scope."""
        return self.configs[self.me].build_storage_opts(self.me)

    def fs(self, scope: tuple[str, str]) -> FileSystemState:
        return FileSystemState(scope, configs=[self.configs[scope]])


def tree(directory: Path) -> dict[str, bytes | str]:
    """Every path below ``directory`` with its content (or link target)."""
    found: dict[str, bytes | str] = {}
    for path in sorted(directory.rglob("*")):
        relative = str(path.relative_to(directory))
        if path.is_symlink():
            found[relative] = "-> " + os.readlink(path)
        elif path.is_file():
            found[relative] = path.read_bytes()
    return found


def build_site(kind: str, tmp_path: Path) -> Site:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    (outside / "record.json").write_text(
        json.dumps({"name": "mine.txt", "title": SECRET})
    )
    me, them = uuid.uuid4().hex[:8], uuid.uuid4().hex[:8]
    options: dict[str, dict[str, Any]] = {me: {}, them: {}}
    root = their_root = None
    if kind == "database":
        backend: Any = DatabasePersistence()
    elif kind == "memory-storage":
        backend = StoragePersistence(InMemoryStorage())
    elif kind == "memory":
        backend = MemoryPersistence()
    elif kind == "filesystem-storage":
        media = tmp_path / "media"
        backend = StoragePersistence(FileSystemStorage(location=media))
        root, their_root = media / "sagents/user" / me, media / "sagents/user" / them
    else:
        backend = DiskPersistence()
        root, their_root = tmp_path / "disk" / me, tmp_path / "disk" / them
        options = {me: {"path": str(root)}, them: {"path": str(their_root)}}
    site = Site(
        kind=kind,
        backend=backend,
        configs={
            ("user", ident): FileSystemConfig(
                default=True, persistence=backend, storage_opts=opts
            )
            for ident, opts in options.items()
        },
        outside=outside,
        root=root,
        their_root=their_root,
    )
    site.fs(site.them).write_file("/their.txt", THEIRS)
    site.fs(site.me).write_file("/mine.txt", "mine")
    site.fs(site.me).write_file("/movable.txt", "movable")
    if root is not None:
        links = {
            "link": outside,
            "secret-link": outside / "secret.txt",
            "tenant": their_root,
            "loop": Path("."),
            "up": Path(".."),
            "dangling": tmp_path / "nowhere",
            "dangling-dir": tmp_path / "nowhere-dir",
        }
        if kind == "filesystem-storage":
            # In place of the metadata record of /mine.txt.
            links[record_name("mine.txt")] = outside / "record.json"
        for name, target in links.items():
            os.symlink(target, root / name)
        site.planted = sorted(links)
    return site


@pytest.fixture(
    params=["database", "filesystem-storage", "memory-storage", "disk", "memory"]
)
def site(request: pytest.FixtureRequest, tmp_path: Path) -> Site:
    return build_site(request.param, tmp_path)


def attempt(operation: Callable[..., Any], *args: Any) -> str:
    """Run ``operation(*args)``; a refusal is a FileSystemError that leaks nothing."""
    try:
        result = operation(*args)
    except FileSystemError as exc:
        assert SECRET not in str(exc) and THEIRS not in str(exc)
        return type(exc).__name__
    text = json.dumps(result, default=repr) if result is not None else ""
    assert SECRET not in text and THEIRS not in text
    return "done"


def test_planted_links_reach_nothing_outside_the_scope(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    outside_before = tree(site.outside)
    caplog.set_level(logging.WARNING)
    fs = site.fs(site.me)

    # The scope's own files stay listed; no link, and nothing behind one, is.
    listed = {e.path: e for e in fs.list_entries()}
    assert set(listed) == {"/mine.txt", "/movable.txt"}
    assert listed["/mine.txt"].title != SECRET

    outcomes: dict[str, str] = {}
    backend, opts = site.backend, site.mine
    for path in HOSTILE_PATHS:
        entry = FileEntry.new_indexed_file(path)
        written = FileEntry.new_memory_file(path, "PWNED")
        outcomes[f"read {path}"] = attempt(lambda p: fs.read_file(p).content, path)
        outcomes[f"write {path}"] = attempt(fs.write_file, path, "PWNED")
        outcomes[f"load {path}"] = attempt(
            lambda e: backend.load(e, opts).content, entry
        )
        outcomes[f"delete {path}"] = attempt(backend.delete, entry, opts)
        outcomes[f"backend write {path}"] = attempt(backend.write, written, opts)
    outcomes["metadata of /mine.txt"] = attempt(
        fs.update_custom_metadata, "/mine.txt", {"tag": "x"}
    )
    outcomes["move into a link"] = attempt(
        fs.move_file, "/movable.txt", "/link/movable.txt"
    )
    outcomes["mkdir in a link"] = attempt(fs.create_directory, "/link/sub")

    assert tree(site.outside) == outside_before
    neighbour = site.fs(site.them)
    assert neighbour.list_files() == ["/their.txt"]
    assert neighbour.read_file("/their.txt").content == THEIRS
    assert site.fs(site.me).read_file("/mine.txt").content == "mine"
    if site.root is None:
        return
    # Every operation through a link was refused, and the links are as planted.
    refused = {k: v for k, v in outcomes.items() if v != "done"}
    through_links = {
        k
        for k in outcomes
        if any(f"/{n}" in k for n in ("link", "tenant", "loop", "up"))
    }
    assert through_links <= set(refused), outcomes
    assert sorted(p.name for p in site.root.iterdir() if p.is_symlink()) == site.planted
    assert tree(site.their_root) == {"their.txt": THEIRS.encode()} | {
        k: v for k, v in tree(site.their_root).items() if k.startswith(".sagents-")
    }
    # What the listing skipped is reported, by name.
    report = " ".join(r.getMessage() for r in caplog.records)
    for name in ("link", "loop", "tenant", "secret-link"):
        assert repr(f"/{name}") in report


# Links around a storage's scope directories ------------------------------------------


def storage_fs(location: Path, scope: tuple[str, str]) -> FileSystemState:
    backend = StoragePersistence(FileSystemStorage(location=location))
    return FileSystemState(
        scope, configs=[FileSystemConfig(default=True, persistence=backend)]
    )


def test_a_media_root_that_is_itself_a_link_works_as_before(tmp_path: Path) -> None:
    (tmp_path / "volume").mkdir()
    os.symlink(tmp_path / "volume", tmp_path / "media")
    storage_fs(tmp_path / "media", ("user", "1")).write_file("/a.txt", "on the volume")
    again = storage_fs(tmp_path / "media", ("user", "1"))
    assert again.list_files() == ["/a.txt"]
    assert again.read_file("/a.txt").content == "on the volume"
    assert (tmp_path / "volume/sagents/user/1/a.txt").read_text() == "on the volume"


@pytest.mark.parametrize(
    ("link", "target"),
    [
        pytest.param("sagents/user/1", "sagents/user/2", id="scope dir to a neighbour"),
        pytest.param("sagents/user", "elsewhere", id="kind dir to elsewhere"),
        pytest.param("sagents", "elsewhere", id="prefix to elsewhere"),
    ],
)
def test_a_scope_whose_directory_runs_through_a_link_is_refused_whole(
    tmp_path: Path, link: str, target: str, caplog: pytest.LogCaptureFixture
) -> None:
    media = tmp_path / "media"
    storage_fs(media, ("user", "2")).write_file("/their.txt", THEIRS)
    (media / target).mkdir(parents=True, exist_ok=True)
    (media / "elsewhere/user/1").mkdir(parents=True)
    (media / "elsewhere/user/1/planted.txt").write_text(SECRET)
    (media / "elsewhere/planted.txt").write_text(SECRET)
    (media / link).parent.mkdir(parents=True, exist_ok=True)
    if (media / link).exists():  # the neighbour's write made it: set it aside
        (media / link).rename(media / "set-aside")
    os.symlink(media / target, media / link)
    before = tree(media)
    fs = storage_fs(media, ("user", "1"))
    assert fs.list_files() == []
    assert "symbolic link" in caplog.text
    for operation, args in [
        (fs.read_file, ("/their.txt",)),
        (fs.read_file, ("/planted.txt",)),
        (fs.read_file, ("/user/1/planted.txt",)),
        (fs.write_file, ("/new.txt", "PWNED")),
    ]:
        with pytest.raises(UnsafePath):
            operation(*args)
    assert tree(media) == before
