"""The process registry: one filesystem per scope, shared, created once."""

from __future__ import annotations

import threading

from sagents_django.core.filesystem import (
    FileSystemConfig,
    MemoryPersistence,
    filesystem_running,
    flush_all_filesystems,
    get_filesystem,
    list_filesystems,
    stop_filesystem,
)


def test_the_same_scope_gets_the_same_filesystem(scope: tuple[str, str]) -> None:
    first = get_filesystem(scope)
    assert get_filesystem(list(scope)) is first
    assert filesystem_running(scope)
    assert scope in list_filesystems()


def test_different_scopes_do_not_share_files(scope: tuple[str, str]) -> None:
    get_filesystem(scope).write_file("/mine.txt", "x")
    other = (scope[0], scope[1] + "-other")
    assert get_filesystem(other).list_files() == []


def test_concurrent_first_calls_create_one_filesystem(scope: tuple[str, str]) -> None:
    found = []
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait()
        found.append(get_filesystem(scope))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(fs) for fs in found}) == 1


def test_configs_for_new_base_directories_are_registered_later(
    scope: tuple[str, str],
) -> None:
    fs = get_filesystem(scope)
    config = FileSystemConfig(base_directory="docs", persistence=MemoryPersistence())
    assert get_filesystem(scope, configs=[config]) is fs
    assert fs.config_for_path("/docs/a.md") is config
    # Asking again with an equivalent config is not an error: it is ignored.
    again = FileSystemConfig(base_directory="docs", persistence=MemoryPersistence())
    get_filesystem(scope, configs=[again])
    assert fs.config_for_path("/docs/a.md") is config


def test_stopping_flushes_pending_writes_and_forgets_the_scope(
    scope: tuple[str, str],
) -> None:
    store = MemoryPersistence()
    config = FileSystemConfig(default=True, persistence=store, debounce_ms=60_000)
    fs = get_filesystem(scope, configs=[config])
    fs.write_file("/a.txt", "one")
    entry = fs.write_file("/a.txt", "two")
    assert stop_filesystem(scope)
    assert not filesystem_running(scope)
    assert store.load(entry, config.build_storage_opts(scope)).content == "two"
    assert not stop_filesystem(scope)


def test_flush_all_filesystems_stores_every_pending_change(
    scope: tuple[str, str],
) -> None:
    store = MemoryPersistence()
    config = FileSystemConfig(default=True, persistence=store, debounce_ms=60_000)
    fs = get_filesystem(scope, configs=[config])
    fs.write_file("/a.txt", "one")
    fs.write_file("/a.txt", "two")
    assert flush_all_filesystems() >= 1
    assert fs.pending_paths == []
