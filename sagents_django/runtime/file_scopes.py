"""Which virtual filesystem a conversation's agent uses, and so which files its
chat page's panel shows.

A call may name one (``add_message(..., filesystem_scope=("user", 42))``, for that
turn); else the site's ``SAGENTS["FILESYSTEM_SCOPE"]``, a function of the caller's
scope and the conversation, decides; else the conversation has its own,
``("agent", <agent_id>)`` (what the FileSystem middleware takes when given none).
Conversations given one scope share their files: what one agent writes, the other
reads on its next turn, and each page's file panel follows the other's changes (its
socket joins the scope's group, ``groups.files_group``; the runtime publishes every
file event there too).
"""

from __future__ import annotations

from typing import Any

from django.utils.module_loading import import_string

from sagents_django.conf import sagents_settings
from sagents_django.core.filesystem.scope import ScopeKey, canonical_scope
from sagents_django.scope import Scope


def site_filesystem_scope(scope: Scope, conversation: Any) -> ScopeKey | None:
    """The site's choice for ``conversation`` (None: the site makes none). A
    function that returns something other than a scope is a
    ``ConfigurationError``."""
    path = sagents_settings.FILESYSTEM_SCOPE
    if path is None:
        return None
    value = import_string(path)(scope, conversation)
    return None if value is None else canonical_scope(value)


def conversation_filesystem_scope(scope: Scope, conversation: Any) -> ScopeKey:
    """The filesystem ``conversation``'s agent uses when a call names none."""
    chosen = site_filesystem_scope(scope, conversation)
    return chosen if chosen is not None else ("agent", str(conversation.agent_id))
