"""Settings of the server processes the draining tests start: the project's
(``SAGENTS_DRAIN_SECONDS`` sets the drain), with the approval-asking factory of
``tests.web.agents``, and docs/deploy.md's ``LOGGING`` (uvicorn, unlike daphne's
command line, gives the root logger no handler: without it the drain's log lines,
which the tests read, are not printed)."""

from __future__ import annotations

from typing import Any

from project.settings import *  # noqa: F403
from project.settings import SAGENTS

SAGENTS = {**SAGENTS, "FACTORY": "tests.web.agents.build_agent"}

LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "INFO"},
}
