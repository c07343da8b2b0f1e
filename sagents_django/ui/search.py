"""Search results as the list page shows them: one per conversation, with the
matching words in a plain-text snippet.

The snippet is cut from what a person reads, not the markdown source: the text is
rendered and sanitized (``markdown.render_markdown``), its tags dropped and its
entities decoded, then a window around the first match is escaped piece by piece
with the match wrapped in ``<mark>``. Nothing of the text is marked safe unescaped.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any

from django.utils.html import escape, strip_tags
from django.utils.safestring import SafeString, mark_safe

from sagents_django.services import SearchResult

from .markdown import render_markdown

CONTEXT = 70
"""Characters of text kept on each side of the match."""
MAX_SOURCE = 20_000


@dataclass(kw_only=True, slots=True)
class Hit:
    """One conversation found: its newest matching message's snippet (or the
    title's, when only the title matched)."""

    conversation: Any
    snippet: SafeString
    by_title: bool


def plain(text: str) -> str:
    """What a person reads of markdown ``text``, on one line."""
    rendered = render_markdown(text[:MAX_SOURCE])
    return " ".join(html.unescape(strip_tags(rendered)).split())


def highlight(text: str, query: str) -> SafeString:
    """``text`` around the first match of ``query``, escaped, the match marked."""
    found = re.search(re.escape(query), text, flags=re.IGNORECASE) if query else None
    if found is None:
        cut = text[: CONTEXT * 2]
        return SafeString(escape(cut) + ("…" if len(text) > len(cut) else ""))
    start = max(0, found.start() - CONTEXT)
    end = min(len(text), found.end() + CONTEXT)
    before = ("…" if start else "") + text[start : found.start()]
    after = text[found.end() : end] + ("…" if end < len(text) else "")
    # Every piece escaped; only our own <mark> is markup.
    return mark_safe(
        f"{escape(before)}<mark>{escape(found.group(0))}</mark>{escape(after)}"
    )


def hits(results: list[SearchResult], query: str) -> list[Hit]:
    """``results`` folded to one per conversation, in their order (titles first,
    then the newest message)."""
    seen: dict[Any, Hit] = {}
    for result in results:
        key = result.conversation.pk
        if key in seen:
            continue
        if result.message is None:
            title = str(result.conversation.title or "")
            seen[key] = Hit(
                conversation=result.conversation,
                snippet=highlight(title, query),
                by_title=True,
            )
            continue
        content = (
            result.message.content if isinstance(result.message.content, dict) else {}
        )
        text = content.get("text")
        seen[key] = Hit(
            conversation=result.conversation,
            snippet=highlight(plain(text if isinstance(text, str) else ""), query),
            by_title=False,
        )
    return list(seen.values())
