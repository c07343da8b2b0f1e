"""Markdown from models and tools, rendered on the server and sanitized.

Why here and not in the browser: the page must read the same with JavaScript off,
and one sanitizer on the server is easier to trust than one per client. Model and
tool output is untrusted (invariant 8), so three layers stand between it and the
page: markdown-it-py renders with raw HTML disabled (``<script>`` stays text),
its link validator refuses ``javascript:``/``vbscript:``/``data:`` targets, and nh3
(ammonia) then keeps only an allow-list of tags, attributes and URL schemes.
Code blocks are highlighted by Pygments into ``<span class>`` tokens (the colours
are in chat.css, so no inline style is needed and the CSP can forbid them).

``render_markdown`` is the only place in the UI that marks text safe: what it
returns went through nh3.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

try:
    import nh3
    from markdown_it import MarkdownIt
    from pygments import highlight  # type: ignore[import-untyped]
    from pygments.formatters import HtmlFormatter  # type: ignore[import-untyped]
    from pygments.lexers import get_lexer_by_name  # type: ignore[import-untyped]
    from pygments.util import ClassNotFound  # type: ignore[import-untyped]
except ImportError:  # the "web" extra: without it, text is shown escaped, as typed
    nh3 = None  # type: ignore[assignment]

MAX_MARKDOWN_CHARS = 200_000
"""Longer text is shown as plain (escaped) text: rendering cost stays bounded."""

ALLOWED_TAGS = {
    "a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5",
    "h6", "hr", "li", "ol", "p", "pre", "span", "strong", "table", "tbody", "td",
    "th", "thead", "tr", "ul", "div", "s",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "code": {"class"},
    "span": {"class"},
    "div": {"class"},
    "pre": {"class"},
    "th": {"align"},
    "td": {"align"},
    "ol": {"start"},
}
URL_SCHEMES = {"http", "https", "mailto"}


def _highlight(code: str, lang: str, _attrs: str) -> str:
    name = (lang or "").strip().split()[0] if lang and lang.strip() else ""
    if not name:
        return ""  # markdown-it escapes it as a plain block
    try:
        lexer = get_lexer_by_name(name, stripall=False)
    except ClassNotFound:
        return ""
    formatter = HtmlFormatter(nowrap=True, classprefix="pg-")
    return (
        f'<pre class="highlight"><code>{highlight(code, lexer, formatter)}</code></pre>'
    )


@lru_cache(maxsize=1)
def _renderer() -> Any:
    return MarkdownIt(
        "commonmark",
        {
            "html": False,
            "linkify": False,
            "typographer": False,
            "highlight": _highlight,
        },
    ).enable(["table", "strikethrough"])


def sanitize(html: str) -> str:
    """``html`` reduced to the allow-list (links get rel=noopener noreferrer)."""
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )


def render_markdown(text: Any) -> SafeString:
    """``text`` as sanitized HTML (any non-string is shown as its text)."""
    source = text if isinstance(text, str) else ("" if text is None else str(text))
    if nh3 is None or len(source) > MAX_MARKDOWN_CHARS:
        return mark_safe(f'<pre class="plain">{escape(source)}</pre>')
    # nh3's output holds only allow-listed tags and attributes: safe to emit.
    return mark_safe(sanitize(_renderer().render(source)))


def pygments_css() -> str:
    """The token colours chat.css carries (kept there: no inline styles)."""
    return HtmlFormatter(classprefix="pg-").get_style_defs(".highlight")
