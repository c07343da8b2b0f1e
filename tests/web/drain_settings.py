"""Settings of the daphne processes the draining tests start: the project's, with a
short drain (``SAGENTS_TEST_DRAIN_SECONDS``) and the approval-asking factory of
``tests.web.agents``."""

from __future__ import annotations

import os

from project.settings import *  # noqa: F403
from project.settings import SAGENTS

SAGENTS = {
    **SAGENTS,
    "FACTORY": "tests.web.agents.build_agent",
    "DRAIN_SECONDS": float(os.environ.get("SAGENTS_TEST_DRAIN_SECONDS", "2")),
}
