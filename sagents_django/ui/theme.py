"""The theme a person chose: a cookie read by the pages and the switch's view.

Remembered per browser in ``sg_theme`` (``light`` or ``dark``; absent or anything
else: the system's ``prefers-color-scheme``), not in the database: it must hold
before signing in, and the server draws the page in it from the first paint.
"""

from __future__ import annotations

from typing import Any

COOKIE = "sg_theme"
THEMES = ("light", "dark")


def chosen_theme(request: Any) -> str:
    """The theme the request's cookie holds ("" : the system's)."""
    value = getattr(request, "COOKIES", {}).get(COOKIE, "")
    return value if value in THEMES else ""
