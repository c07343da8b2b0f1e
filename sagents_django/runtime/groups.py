"""Channel-layer group names: one per conversation, its debug stream, its control
line (cancel / notify to the worker running its turn), one per filesystem scope, one
per signed-in session (its sockets), one per user for the sockets a bearer token
signed in, and one per owner (its conversation lists).

Group names allow only ``[A-Za-z0-9._-]`` and fewer than 100 characters, so ids are
written as UUID hex and a filesystem scope (any JSON value) as a short hash.
"""

from __future__ import annotations

import functools
import hashlib
import json
import uuid
from typing import Any

PREFIX = "sagents"


@functools.lru_cache(maxsize=1024)
def _hex(conversation_id: Any) -> str:
    return uuid.UUID(str(conversation_id)).hex


def conversation_group(conversation_id: Any) -> str:
    """Where a conversation's events go (what subscribers join)."""
    return f"{PREFIX}.conversation.{_hex(conversation_id)}"


def debug_group(conversation_id: Any) -> str:
    """Middleware actions and state snapshots of a conversation (for inspectors)."""
    return f"{PREFIX}.debug.{_hex(conversation_id)}"


def control_group(conversation_id: Any) -> str:
    """What reaches the process running the conversation's turn: cancel, notify."""
    return f"{PREFIX}.control.{_hex(conversation_id)}"


def files_group(filesystem_scope: Any) -> str:
    """File events of one filesystem scope (shared by every conversation in it)."""
    key = json.dumps(filesystem_scope, sort_keys=True, default=str)
    return f"{PREFIX}.files.{hashlib.sha256(key.encode()).hexdigest()[:32]}"


def session_group(session_key: str) -> str:
    """Every socket signed in by one session (closed when it signs out). Named by a
    hash: the key is a secret, and group names show in the layer's Redis."""
    return f"{PREFIX}.session.{hashlib.sha256(session_key.encode()).hexdigest()[:32]}"


def token_group(user_pk: Any) -> str:
    """Every socket a bearer token signed in as one user (closed when the user's
    password changes or the user is deactivated: ``sign_out``). Hashed like a
    session key (a primary key may be any text)."""
    digest = hashlib.sha256(str(user_pk).encode()).hexdigest()[:32]
    return f"{PREFIX}.token.{digest}"


def owner_group(owner_key: str) -> str:
    """Changes to the list of one owner's conversations (created, renamed,
    deleted): what the pages' conversation lists follow. ``owner_key`` names the
    owner (``"<app_label.model>:<pk>"``, or ``"*"`` for ownerless conversations);
    hashed like a session key, since group names are short and plain."""
    return f"{PREFIX}.owner.{hashlib.sha256(owner_key.encode()).hexdigest()[:32]}"
