"""Telling open sockets that a conversation's shares changed.

A socket checks what it may do when it opens; a share revoked afterwards must
reach it at once. After the change commits, a ``share.changed`` message goes to
the conversation's group (every socket following it is there); each socket that
follows it through a share asks again (``sockets.AgentConsumerBase``) and, left
with nothing, closes (4404). Owners' sockets ignore it. Asking again instead of
naming users covers groups, whose members the message would otherwise have to
list. A layer that cannot be reached never fails the change itself.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction


def share_changed(conversation_id: Any) -> None:
    """After commit: tell the conversation's sockets its shares changed."""
    transaction.on_commit(lambda: _send(str(conversation_id)))


def _send(conversation_id: str) -> None:
    from sagents_django.runtime import groups, layer

    layer.send_from_sync(
        groups.conversation_group(conversation_id),
        {"type": "share.changed", "conversation": conversation_id},
        what=f"tell the sockets of {conversation_id} about a share",
    )


def file_groups(key: tuple[str, str]) -> list[str]:
    """The groups a filesystem's file events go to (``groups.files_group`` of its
    JSON form: an id the site gave as an integer and as text name the same files)."""
    from sagents_django.runtime import groups

    kind, ident = key
    forms: list[list[Any]] = [[kind, ident]]
    if ident.isdigit() and len(ident) < 19 and str(int(ident)) == ident:
        forms.append([kind, int(ident)])
    return [groups.files_group(form) for form in forms]


def files_share_changed(key: tuple[str, str]) -> None:
    """After commit: tell the sockets following a filesystem its shares changed."""
    transaction.on_commit(lambda: _send_files(key))


def _send_files(key: tuple[str, str]) -> None:
    from sagents_django.runtime import layer

    for group in file_groups(key):
        layer.send_from_sync(
            group,
            {"type": "files.share_changed", "filesystem": list(key)},
            what=f"tell the sockets of {key[0]}:{key[1]} about a share",
        )
