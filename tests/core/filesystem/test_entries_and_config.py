"""FileEntry, FileMetadata and FileSystemConfig: constructors, updates, JSON, rules."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError

import pytest

from sagents_django.core.exceptions import ConfigurationError
from sagents_django.core.filesystem import (
    FileEntry,
    FileMetadata,
    FileSystemConfig,
    MemoryPersistence,
    PathIsDirectory,
    canonical_scope,
    guess_mime_type,
    scope_to_json,
)


def test_a_memory_file_is_loaded_clean_and_described_by_its_metadata() -> None:
    entry = FileEntry.new_memory_file("/notes.md", "héllo", custom={"tag": "x"})
    assert entry.loaded and not entry.dirty
    assert entry.persistence == "memory"
    assert entry.metadata is not None
    assert entry.metadata.size == len("héllo".encode())
    assert entry.metadata.mime_type == "text/markdown"
    assert entry.metadata.custom == {"tag": "x"}
    assert entry.metadata.checksum and len(entry.metadata.checksum) == 64


def test_a_new_persisted_file_is_dirty_until_stored() -> None:
    entry = FileEntry.new_persisted_file("/a.txt", "x")
    assert entry.dirty_content and entry.persistence == "persisted"
    assert not entry.mark_clean().dirty


def test_an_indexed_file_is_not_loaded_but_an_indexed_directory_is() -> None:
    assert not FileEntry.new_indexed_file("/a.txt").loaded
    assert FileEntry.new_indexed_file("/d", entry_type="directory").loaded


def test_updating_content_keeps_created_at_and_custom_metadata() -> None:
    entry = FileEntry.new_persisted_file("/a.txt", "one", custom={"k": 1}).mark_clean()
    updated = entry.update_content("two!")
    assert updated.content == "two!"
    assert updated.dirty_content
    assert updated.metadata.created_at == entry.metadata.created_at
    assert updated.metadata.custom == {"k": 1}
    assert updated.metadata.size == 4
    assert updated.metadata.checksum != entry.metadata.checksum


def test_a_directory_has_no_content_to_update() -> None:
    with pytest.raises(PathIsDirectory):
        FileEntry.new_directory("/d").update_content("x")


def test_entries_are_frozen_so_listings_can_be_shared() -> None:
    entry = FileEntry.new_memory_file("/a", "x")
    with pytest.raises(FrozenInstanceError):
        entry.content = "y"  # type: ignore[misc]


def test_custom_metadata_merges() -> None:
    entry = FileEntry.new_memory_file("/a", "x", custom={"a": 1}).with_custom({"b": 2})
    assert entry.custom == {"a": 1, "b": 2}


def test_an_entry_survives_a_json_round_trip() -> None:
    entry = FileEntry.new_memory_file("/a/b.json", "{}", title="B", custom={"n": [1]})
    data = json.loads(json.dumps(entry.to_dict()))
    assert FileEntry.from_dict(data) == entry
    assert "content" not in entry.to_dict(include_content=False)


def test_metadata_survives_a_json_round_trip() -> None:
    meta = FileMetadata.new("abc", mime_type="text/csv", custom={"x": True})
    assert FileMetadata.from_dict(json.loads(json.dumps(meta.to_dict()))) == meta


@pytest.mark.parametrize(
    ("path", "mime"),
    [
        ("/a.md", "text/markdown"),
        ("/a.json", "application/json"),
        ("/a.csv", "text/csv"),
        ("/README", "text/plain"),
        ("/x.unknownext", "text/plain"),
    ],
)
def test_mime_types_are_guessed_from_the_extension(path: str, mime: str) -> None:
    assert guess_mime_type(path) == mime


# Configs -----------------------------------------------------------------------------


def test_a_config_normalizes_its_base_directory_and_matches_paths_under_it() -> None:
    config = FileSystemConfig(
        base_directory="/user_files/", persistence=MemoryPersistence
    )
    assert config.base_directory == "user_files"
    assert config.matches_path("/user_files/data.txt")
    assert config.matches_path("/user_files")
    assert not config.matches_path("/user_files2/data.txt")
    assert not config.matches_path("/other/file.txt")


def test_a_default_config_matches_everything_and_has_the_default_key() -> None:
    config = FileSystemConfig(default=True, persistence=MemoryPersistence())
    assert config.key == "__default__"
    assert config.matches_path("/anything/at/all")


def test_storage_opts_carry_the_scope_and_base_directory() -> None:
    config = FileSystemConfig(
        base_directory="user_files",
        persistence=MemoryPersistence(),
        storage_opts={"path": "/data"},
    )
    assert config.build_storage_opts(("user", 123)) == {
        "path": "/data",
        "scope_key": ("user", 123),
        "base_directory": "user_files",
    }
    default = FileSystemConfig(default=True, persistence=MemoryPersistence())
    assert "base_directory" not in default.build_storage_opts(("user", 1))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "needs a base_directory"),
        ({"base_directory": ""}, "Invalid base_directory"),
        ({"base_directory": "../up"}, "Invalid base_directory"),
        ({"base_directory": "/"}, "default=True"),
        ({"base_directory": "a", "debounce_ms": -1}, "debounce_ms"),
        ({"base_directory": "a", "max_file_size": -5}, "max_file_size"),
    ],
)
def test_a_bad_config_is_a_configuration_error(options: dict, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        FileSystemConfig(persistence=MemoryPersistence(), **options)


def test_persistence_may_be_a_class_or_a_dotted_path_but_must_be_a_backend() -> None:
    by_path = FileSystemConfig(
        default=True,
        persistence="sagents_django.core.filesystem.MemoryPersistence",
    )
    assert isinstance(by_path.persistence, MemoryPersistence)
    with pytest.raises(ConfigurationError, match="must provide write"):
        FileSystemConfig(default=True, persistence=object())
    with pytest.raises(ConfigurationError, match="Cannot import"):
        FileSystemConfig(default=True, persistence="no.such.Backend")


# Scopes ------------------------------------------------------------------------------


def test_a_scope_is_the_same_as_a_tuple_or_as_a_json_list() -> None:
    assert (
        canonical_scope(["user", 42]) == canonical_scope(("user", 42)) == ("user", 42)
    )
    assert scope_to_json(("project", 7)) == ["project", 7]
    assert scope_to_json("plain") == "plain"


@pytest.mark.parametrize("bad", [(), ("user", None), ("user", True), ("", 1), 4.5])
def test_a_scope_is_made_of_strings_and_integers(bad: object) -> None:
    with pytest.raises(ConfigurationError):
        canonical_scope(bad)
