"""The test suite's settings: the hosting project's, plus ``tests.shop``, a small
multi-tenant app whose models the ORM tools' tests and bench expose to agents."""

from __future__ import annotations

from project.settings import *  # noqa: F403
from project.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.shop"]
