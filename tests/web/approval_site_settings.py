"""The browser tests' site, where holders of ``decide_approvals`` decide
``write_file`` requests of anyone's conversation."""

from __future__ import annotations

from tests.web.site_settings import *  # noqa: F403
from tests.web.site_settings import SAGENTS

SAGENTS = {
    **SAGENTS,
    "APPROVALS": {"PERMISSIONS": {"write_file": "sagents_django.decide_approvals"}},
}
