"""Which virtual filesystem a conversation's agent uses, and so which files its
chat page's panel shows.

A call may name one (``add_message(..., filesystem_scope=("user", 42))``, for that
turn); else the site's ``SAGENTS["FILESYSTEM_SCOPE"]``, a function of the caller's
scope and the conversation, decides; else the conversation has its own,
``("agent", <agent_id>)`` (what the FileSystem middleware takes when given none).
Conversations given one scope share their files: what one agent writes, the other
reads on its next turn, and each page's file panel follows the other's changes (its
socket joins the scope's group, ``groups.files_group``; the runtime publishes every
file event there too). ``owner_files`` is a ready-made choice: every conversation of
one owner (a user, or a team for a team-owned conversation model) shares the
owner's files.
"""

from __future__ import annotations

from typing import Any

from django.utils.module_loading import import_string

from sagents_django.conf import sagents_settings
from sagents_django.core.filesystem.scope import ScopeKey, canonical_scope
from sagents_django.scope import Scope, owner_field, owner_model


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


def owner_files(scope: Scope, conversation: Any) -> ScopeKey | None:
    """``SAGENTS["FILESYSTEM_SCOPE"] = "sagents_django.runtime.file_scopes.owner_files"``:
    the conversation's owner's files, ``(<owner model>, <owner pk>)`` such as
    ``("user", 42)``; an ownerless conversation keeps its own."""
    model = type(conversation)
    field = owner_field(model)
    if field is None:
        return None
    owner_id = getattr(conversation, model._meta.get_field(field).attname, None)
    if owner_id is None:
        return None
    owner = owner_model(model)
    kind = owner._meta.model_name if owner is not None else field
    # A scope is made of strings and integers: a UUID key goes as text.
    return (str(kind), owner_id if isinstance(owner_id, int) else str(owner_id))
