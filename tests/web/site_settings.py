"""Settings of the site the browser tests serve with daphne: the project's, with
the approval-asking factory of ``tests.web.agents``."""

from __future__ import annotations

import os

from django.conf import global_settings

from project.settings import *  # noqa: F403
from project.settings import SAGENTS

SAGENTS = {
    **SAGENTS,
    "FACTORY": "tests.web.agents.build_agent",
    "EXPORT_STORAGE": "exports",
}
# Export archives in this process's memory (the site is one daphne process).
STORAGES = {
    **global_settings.STORAGES,
    "exports": {"BACKEND": "django.core.files.storage.InMemoryStorage"},
}
# A production site's turns go to a queue of its own (tests.web.browser.serve):
# sites of parallel test processes share one broker.
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("SAGENTS_TEST_QUEUE", "celery")
