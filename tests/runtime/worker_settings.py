"""Settings of the Celery worker processes the production-stack tests start.

The suite's settings (``tests.settings``: the project's and the test apps;
DATABASE_URL names the test database, REDIS_URL the layer),
with the test's agent factory and fake provider (``SAGENTS_TEST_OVERRIDES``, JSON),
a channel-layer prefix and a Celery queue of the test session's own, so that two
test sessions on one machine never take each other's turns or events.
"""

from __future__ import annotations

import json
import os

from tests.settings import *  # noqa: F403
from tests.settings import CHANNEL_LAYERS, SAGENTS

SAGENTS = {**SAGENTS, **json.loads(os.environ["SAGENTS_TEST_OVERRIDES"])}
CHANNEL_LAYERS["default"]["CONFIG"]["prefix"] = os.environ["SAGENTS_TEST_PREFIX"]
CELERY_TASK_DEFAULT_QUEUE = os.environ["SAGENTS_TEST_QUEUE"]
