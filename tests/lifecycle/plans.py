"""A site's retention rule, as tests name it: owners listed in ``DAYS`` get theirs,
the others the site default."""

from __future__ import annotations

from typing import Any

DAYS: dict[Any, int | None] = {}


def retention_for(owner_pk: Any, *, default: int | None) -> int | None:
    return DAYS.get(owner_pk, default)
