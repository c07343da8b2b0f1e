"""Markdown from models and tools: rendered, highlighted, and never executable."""

from __future__ import annotations

import re

import pytest

from sagents_django.ui.markdown import MAX_MARKDOWN_CHARS, render_markdown


@pytest.mark.parametrize(
    "source",
    [
        "<script>alert(1)</script>",
        "<img src=x onerror=alert(1)>",
        "[x](javascript:alert(1))",
        "[x](JaVaScRiPt:alert(1))",
        "[x](data:text/html;base64,PHNjcmlwdD4=)",
        "![x](javascript:alert(1))",
        '<a href="javascript:alert(1)">x</a>',
        "[x](vbscript:msgbox)",
        '" onmouseover="alert(1)',
        "<svg/onload=alert(1)>",
        "```html\n<script>alert(1)</script>\n```",
        "<iframe src=//evil></iframe>",
    ],
)
def test_no_markup_that_runs_survives(source: str) -> None:
    html = str(render_markdown(source)).lower()
    for bad in ("<script", "<img", "<svg", "<iframe"):
        assert bad not in html
    assert not re.search(r"<[^>]*\son\w+\s*=", html)
    assert not re.search(
        r"<[^>]*(href|src)\s*=\s*[\"']?\s*(javascript|vbscript|data):", html
    )


def test_markdown_renders_emphasis_links_tables_and_highlighted_code() -> None:
    html = str(
        render_markdown(
            "**bold** [site](https://example.com)\n\n| a |\n|---|\n| 1 |\n\n"
            "```python\nprint('x')\n```"
        )
    )
    assert "<strong>bold</strong>" in html
    assert 'href="https://example.com"' in html and 'rel="noopener noreferrer' in html
    assert "<table>" in html
    assert '<span class="pg-nb">print</span>' in html


def test_very_long_text_is_shown_plain() -> None:
    html = str(render_markdown("**x**" * (MAX_MARKDOWN_CHARS // 5 + 1)))
    assert html.startswith('<pre class="plain">') and "<strong>" not in html


def test_anything_but_text_is_shown_as_its_text() -> None:
    assert str(render_markdown(None)) == ""
    assert "42" in str(render_markdown(42))
