"""Settings of the site the browser tests serve with daphne: the project's, with
the approval-asking factory of ``tests.web.agents``."""

from __future__ import annotations

from project.settings import *  # noqa: F403
from project.settings import SAGENTS

SAGENTS = {**SAGENTS, "FACTORY": "tests.web.agents.build_agent"}
