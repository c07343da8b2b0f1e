"""The browser tests' site (``site_settings``) with every conversation of a user
sharing that user's files (``SAGENTS["FILESYSTEM_SCOPE"]``)."""

from __future__ import annotations

from tests.web.site_settings import *  # noqa: F403
from tests.web.site_settings import SAGENTS

SAGENTS = {
    **SAGENTS,
    "FILESYSTEM_SCOPE": "sagents_django.runtime.file_scopes.owner_files",
}
