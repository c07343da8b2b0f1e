"""Settings of the daphne processes the draining tests start: the project's
(``SAGENTS_DRAIN_SECONDS`` sets the drain), with the approval-asking factory of
``tests.web.agents``."""

from __future__ import annotations

from project.settings import *  # noqa: F403
from project.settings import SAGENTS

SAGENTS = {**SAGENTS, "FACTORY": "tests.web.agents.build_agent"}
