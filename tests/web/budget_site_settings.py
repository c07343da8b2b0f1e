"""The browser tests' site with spend budgets on (``test_budget_pages``)."""

from __future__ import annotations

from tests.web.site_settings import *  # noqa: F403
from tests.web.site_settings import SAGENTS

SAGENTS = {**SAGENTS, "BUDGETS": {"MAX_OUTPUT_TOKENS": 1000}}
