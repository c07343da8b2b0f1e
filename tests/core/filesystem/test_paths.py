"""Virtual paths: the canonical form, and every path the namespace refuses."""

from __future__ import annotations

import pytest

from sagents_django.core.filesystem.errors import InvalidPath
from sagents_django.core.filesystem.paths import (
    ancestor_paths,
    basename,
    is_within,
    normalize_file_path,
    normalize_path,
    parent_path,
    rebase,
    valid_name,
)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("/notes.txt", "/notes.txt"),
        ("notes.txt", "/notes.txt"),
        ("Chapter 1/summary.md", "/Chapter 1/summary.md"),
        ("/dir/", "/dir"),
        ("\\dir\\file.txt", "/dir/file.txt"),
        ("/données/résumé.md", "/données/résumé.md"),
        ("/a~b/c~", "/a~b/c~"),
        ("/", "/"),
    ],
)
def test_a_path_has_one_canonical_form(given: str, expected: str) -> None:
    assert normalize_path(given) == expected


@pytest.mark.parametrize(
    ("hostile", "message"),
    [
        ("../etc/passwd", "traversal"),
        ("/a/../../etc", "traversal"),
        ("/a/..", "traversal"),
        ("..\\..\\windows", "traversal"),
        ("/./a", "traversal"),
        ("~/secrets", "home directory"),
        ("/~root/x", "home directory"),
        ("/a\x00b", "NUL"),
        ("", "empty"),
        ("   ", "empty"),
        (" /a.txt", "whitespace"),
        ("/a.txt ", "whitespace"),
        ("/a/ b/c", "whitespace"),
        ("/a/b /c", "whitespace"),
        ("/a//b", "empty segment"),
        ("//etc/passwd", "empty segment"),
        ("/a\nb", "control character"),
        ("/a\x1bb", "control character"),
        ("/" + "x" * 256, "too long"),
        ("/" + "é" * 128, "too long"),
        ("/a/" * 1100, "empty segment"),
        ("/\ud800", "Unicode"),
    ],
)
def test_a_hostile_path_is_refused_with_a_reason(hostile: str, message: str) -> None:
    with pytest.raises(InvalidPath, match=message):
        normalize_path(hostile)


def test_a_path_longer_than_a_disk_allows_is_refused() -> None:
    with pytest.raises(InvalidPath, match="too long"):
        normalize_path("/" + "/".join(["d" * 200] * 25))


@pytest.mark.parametrize("value", [None, 5, b"/a", ["/a"]])
def test_a_path_must_be_a_string(value: object) -> None:
    with pytest.raises(InvalidPath, match="must be a string"):
        normalize_path(value)


def test_the_root_is_not_a_file_path() -> None:
    with pytest.raises(InvalidPath, match="root directory"):
        normalize_file_path("/")


def test_ancestor_paths_are_listed_shallowest_first_without_the_root() -> None:
    assert ancestor_paths("/Characters/Hero/Backstory") == [
        "/Characters",
        "/Characters/Hero",
    ]
    assert ancestor_paths("/notes.txt") == []


def test_containment_is_decided_by_whole_segments() -> None:
    assert is_within("/data/x", "/data")
    assert is_within("/data", "/data")
    assert not is_within("/data2/x", "/data")
    assert is_within("/anything", "/")


def test_path_helpers_split_and_rebase() -> None:
    assert parent_path("/a/b/c.txt") == "/a/b"
    assert parent_path("/c.txt") == "/"
    assert basename("/a/b/c.txt") == "c.txt"
    assert rebase("/old/x/y", "/old", "/new/dir") == "/new/dir/x/y"


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        ("Hero Character Sheet", True),
        ("notes.md", True),
        ("", False),
        (" padded", False),
        ("a/b", False),
        ("nul\x00", False),
        (None, False),
    ],
)
def test_valid_name_follows_the_reference_rule(name: object, valid: bool) -> None:
    assert valid_name(name) is valid
