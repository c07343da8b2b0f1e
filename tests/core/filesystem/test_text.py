"""The text operations behind the tools: numbered views, edits, searches, patterns."""

from __future__ import annotations

import pytest

from sagents_django.core.filesystem.budget import Deadline
from sagents_django.core.filesystem.search import Searcher, format_search_results
from sagents_django.core.filesystem.text import (
    EditError,
    number_lines,
    pattern_matcher,
    replace_lines,
    replace_text,
)

TEN = "\n".join(f"line {i}" for i in range(1, 11))


def test_number_lines_pads_numbers_to_six_columns_and_a_tab() -> None:
    assert number_lines("a\nb") == "     1\ta\n     2\tb"


def test_number_lines_pages_with_offset_and_limit_and_says_where_it_is() -> None:
    page = number_lines(TEN, offset=3, limit=2)
    assert page == "Showing lines 4 to 5 of 10:\n     4\tline 4\n     5\tline 5"


def test_number_lines_reports_an_empty_file_or_an_offset_past_the_end() -> None:
    assert number_lines("") == "File is empty or offset is beyond file length."
    assert number_lines(TEN, offset=50) == (
        "File is empty or offset is beyond file length."
    )


def test_number_lines_truncates_very_long_lines() -> None:
    shown = number_lines("x" * 2500)
    assert shown.endswith("x... (line truncated)")
    assert len(shown) == len("     1\t") + 2000 + len("... (line truncated)")


def test_replace_text_replaces_a_unique_match() -> None:
    assert replace_text("a b c", "b", "B") == ("a B c", 1)


def test_replace_text_refuses_an_ambiguous_match_unless_replace_all() -> None:
    with pytest.raises(EditError, match="appears 2 times"):
        replace_text("x x", "x", "y")
    assert replace_text("x x", "x", "y", replace_all=True) == ("y y", 2)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [("zzz", "y", "not found"), ("", "y", "empty"), ("a", "a", "identical")],
)
def test_replace_text_errors_say_what_to_change(
    old: str, new: str, message: str
) -> None:
    with pytest.raises(EditError, match=message):
        replace_text("abc", old, new)


def test_replace_lines_replaces_an_inclusive_one_based_range() -> None:
    updated, count = replace_lines(TEN, 2, 4, "two\nthree")
    assert count == 3
    assert updated.split("\n")[:4] == ["line 1", "two", "three", "line 5"]


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        (0, 1, "1-based"),
        (5, 4, "end_line must be >= start_line"),
        (11, 12, "start_line 11 is beyond file length"),
        (9, 11, "end_line 11 is beyond file length"),
    ],
)
def test_replace_lines_refuses_ranges_outside_the_file(
    start: int, end: int, message: str
) -> None:
    with pytest.raises(EditError, match=message):
        replace_lines(TEN, start, end, "x")


def test_search_finds_lines_with_context_and_formats_them() -> None:
    matches, truncated = Searcher("line 5").matches(TEN, context_lines=1)
    assert not truncated
    assert [m.line_number for m in matches] == [5]
    shown = format_search_results([("/ten.txt", matches)], 50, truncated)
    assert shown.splitlines() == [
        "File: /ten.txt",
        "     4 |\tline 4",
        "     5\tline 5",
        "     6 |\tline 6",
    ]


def test_search_is_case_sensitive_unless_asked_otherwise() -> None:
    assert Searcher("LINE").matches(TEN)[0] == []
    assert len(Searcher("LINE", case_sensitive=False).matches(TEN)[0]) == 10


def test_search_stops_at_max_results_and_says_so() -> None:
    matches, truncated = Searcher(r"line \d").matches(TEN, max_results=3)
    assert len(matches) == 3 and truncated
    assert "(Results truncated at 3 matches)" in format_search_results(
        [("/t", matches)], 3, truncated
    )


def test_no_match_is_reported_plainly() -> None:
    assert format_search_results([("/t", [])], 50, False) == "No matches found"


def test_an_invalid_regex_is_an_error_the_model_can_fix() -> None:
    with pytest.raises(EditError, match="Invalid regex pattern"):
        Searcher("(unclosed")


def test_a_catastrophic_backtracking_regex_runs_in_linear_time() -> None:
    searcher = Searcher(r"(a|aa)+c", deadline=Deadline(5.0))
    assert searcher.matches("a" * 100_000) == ([], False)


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("*.md", "/a/b.md", True),
        ("*.md", "/a/b.md.bak", False),
        ("*summary*", "/Chapter 1/summary.md", True),
        ("Chapter 1/*", "/Chapter 1/a.md", True),
        ("/Chapter 1/*", "/Chapter 1/a.md", True),
        ("/Chapter 1/*", "/Other/Chapter 1/a.md", False),
        ("notes", "/my-notes.txt", True),
        ("a.c", "/abc", False),
        ("[x]*", "/[x]y", True),
    ],
)
def test_ls_patterns_use_star_as_the_only_wildcard(
    pattern: str, path: str, matches: bool
) -> None:
    assert pattern_matcher(pattern)(path) is matches
