"""Filesystem scopes shared on their own, as conversations are.

**Who owns a filesystem scope.** A ``Filesystem`` row says, written by the first
use that needs an owner:

- the site's assignment: a conversation's own filesystem (the site's
  ``SAGENTS["FILESYSTEM_SCOPE"]``, else ``("agent", <agent_id>)``) belongs to the
  conversation's owner, claimed when that owner first uses it (a turn, an
  upload, sharing it, or naming it in a call);
- a new name: a scope a call names that no one has claimed *and that holds no
  files yet* (``("project", 7)`` made up for the occasion) becomes the caller's.

The site's assignment beats a name: a conversation's owner claiming its own
filesystem takes over a row someone made by naming the key first (their shares
of it go), so a key that is easy to guess (``("user", 42)``) cannot be kept by
whoever named it before its rightful owner used it. Files of a scope no one has
claimed can only be claimed through a conversation whose own filesystem it is.

**What a scope may do with one.** The owner (the owner's own scope, never a lent
one) and a "write" share may have a turn use it and upload to it; a "read" share
may list and read its files (``tree``/``read``, the shared files page, the
socket's ``follow_files``). A call naming a scope the caller may not write is
refused before anything is written: ``PermissionDenied`` for a read share,
``NotFound`` otherwise (someone else's scope is the same answer as one that does
not exist). A conversation used through a conversation share (a lent scope)
uses its own files only. A worker opening a queued turn asks again, so a share
revoked meanwhile is refused there too.

The owner manages the shares through one of their conversations whose own
filesystem it is (``share_files(scope, conversation_id, target, access)``):
the same targets, policy (``SAGENTS["SHARE_WITH"]``) and notifications as a
conversation's shares.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction

from sagents_django.core.exceptions import ConfigurationError
from sagents_django.exceptions import InvalidInput, NotFound
from sagents_django.filesystems.keys import scope_parts
from sagents_django.models import StoredFile
from sagents_django.runtime.file_scopes import conversation_filesystem_scope
from sagents_django.scope import Access, Scope, conversation_model
from sagents_django.services.conversations import get_conversation

from . import notify
from .access import _authenticated, _member_of, best_access
from .models import Filesystem, FilesystemShare
from .policy import may_share_with
from .services import (
    MAX_LISTED,
    _access,
    _target,
    delete_share,
    listed,
    owned_conversation,
    save_share,
)

Level = Literal["own", "write", "read"]

READ_ONLY = (
    "The filesystem {key} is shared with you read-only: a turn cannot use it "
    "and nothing can be uploaded to it"
)
LENT = (
    "A conversation shared with you uses its own files: a call cannot name "
    "another filesystem scope"
)


def key_of(value: Any) -> tuple[str, str]:
    """``(kind, id)`` of a filesystem scope as text, else ``InvalidInput``."""
    try:
        return scope_parts(value)
    except ConfigurationError as exc:
        raise InvalidInput(f"filesystem_scope: {exc}") from None


def _shown(key: tuple[str, str]) -> str:
    return f"{key[0]}:{key[1]}"


def _owner_key(scope: Scope) -> str | None:
    """What ``scope`` owns filesystems as (None: nothing; a lent scope owns none)."""
    if getattr(scope, "lent", None) is not None:
        return None
    pk = scope.owner_pk(conversation_model())
    return None if pk is None else str(pk)


def access_to(scope: Scope, filesystem: Filesystem) -> Level | None:
    """What ``scope`` may do with ``filesystem``: own it, or what the best of the
    shares reaching its user gives; None: nothing."""
    owner = _owner_key(scope)
    if owner is not None and owner == filesystem.owner_key:
        return "own"
    return best_access(
        FilesystemShare.objects.filter(filesystem=filesystem), scope.user
    )


def _row(key: tuple[str, str]) -> Filesystem | None:
    return Filesystem.objects.filter(kind=key[0], ident=key[1]).first()


def claim(scope: Scope, conversation: Any) -> Filesystem | None:
    """The row of ``conversation``'s own filesystem, written for its owner when
    none is (or taking over a row made by naming it); None for a lent scope or a
    site whose filesystem is not a ``(kind, id)`` pair."""
    owner = _owner_key(scope)
    if owner is None:
        return None
    try:
        key = scope_parts(conversation_filesystem_scope(scope, conversation))
    except ConfigurationError:
        return None
    row = _row(key)
    if row is not None and (row.owner_key == owner or row.conversation_id is not None):
        return row
    with transaction.atomic():
        if row is not None:  # claimed by naming it: the site's assignment wins
            row.shares.all().delete()
            row.owner_key, row.conversation = owner, conversation
            row.save(update_fields=["owner_key", "conversation"])
            notify.files_share_changed(row.key)
            return row
        try:
            with transaction.atomic():
                return Filesystem.objects.create(
                    kind=key[0],
                    ident=key[1],
                    owner_key=owner,
                    conversation=conversation,
                )
        except IntegrityError:  # claimed at the same moment: the first one won
            return _row(key)


def check_named(scope: Scope, conversation_id: Any, value: Any) -> None:
    """Refuse a filesystem scope a call names (``add_message(...,
    filesystem_scope=...)``, ``execute``, ``resume``, an edit) unless ``scope``
    may write it: the conversation's own, one it owns or claims now (a new name),
    or one a "write" share gives. ``PermissionDenied`` for a read share,
    ``NotFound`` for anything else. A conversation ``scope`` cannot see is left
    to the caller's own check (its usual ``NotFound``)."""
    if value is None:
        return
    key = key_of(value)
    conversation = get_conversation(scope, conversation_id)
    if conversation is None:
        return
    try:
        own = scope_parts(conversation_filesystem_scope(scope, conversation))
    except ConfigurationError:
        own = None
    if key == own:
        claim(scope, conversation)
        return
    if getattr(scope, "lent", None) is not None:
        raise PermissionDenied(LENT)
    row = _row(key)
    if row is None:
        owner = _owner_key(scope)
        taken = StoredFile.objects.filter(scope_kind=key[0], scope_id=key[1]).exists()
        if owner is None or taken:
            raise NotFound("filesystem scope", _shown(key))
        try:
            with transaction.atomic():
                Filesystem.objects.create(kind=key[0], ident=key[1], owner_key=owner)
        except IntegrityError:
            return check_named(scope, conversation_id, value)
        return
    level = access_to(scope, row)
    if level == "read":
        raise PermissionDenied(READ_ONLY.format(key=_shown(key)))
    if level is None:
        raise NotFound("filesystem scope", _shown(key))


# The owner's API ----------------------------------------------------------------------
def filesystem_of(scope: Scope, conversation_id: Any) -> Filesystem:
    """The filesystem of the conversation (``scope``'s own), claimed for its
    owner if no one had; ``NotFound`` when it is not ``scope``'s to manage (a
    conversation it does not own, a lent scope, or files another owner claimed
    first through their own conversation)."""
    conversation = owned_conversation(scope, conversation_id)
    row = claim(scope, conversation)
    if row is None or row.owner_key != _owner_key(scope):
        raise NotFound("filesystem of conversation", str(conversation.pk))
    return row


def share_files(
    scope: Scope, conversation_id: Any, target: Any, access: Any = "read"
) -> FilesystemShare:
    """Share the conversation's filesystem with ``target`` (a user or a
    ``Group``) at ``access``; sharing again changes the access. The row.
    ``PermissionDenied`` when the site does not let the owner share with them."""
    access = _access(access)
    kind, who = _target(target)
    if who.pk is None:
        raise InvalidInput(f"The {kind} to share with is not saved")
    with transaction.atomic():
        filesystem = filesystem_of(scope, conversation_id)
        if kind == "user" and _owner_key(scope.__class__.for_user(who)) == (
            filesystem.owner_key
        ):
            raise InvalidInput("That user already owns these files")
        conversation = owned_conversation(scope, conversation_id)
        if not may_share_with(scope, conversation, who):
            raise PermissionDenied(f"These files cannot be shared with that {kind}.")
        row: FilesystemShare = save_share(
            FilesystemShare,
            {"filesystem": filesystem, kind: who},
            access,
            scope.user if scope.is_authenticated else None,
        )
        notify.files_share_changed(filesystem.key)
    return row


def revoke_files(scope: Scope, conversation_id: Any, target: Any) -> bool:
    """End ``target``'s share of the conversation's filesystem; whether there was
    one. Sockets following those files through it stop at once."""
    kind, who = _target(target)
    with transaction.atomic():
        filesystem = filesystem_of(scope, conversation_id)
        deleted, _ = FilesystemShare.objects.filter(
            filesystem=filesystem, **{kind: who}
        ).delete()
        if deleted:
            notify.files_share_changed(filesystem.key)
    return bool(deleted)


def revoke_file_share(scope: Scope, conversation_id: Any, share_id: Any) -> bool:
    """``revoke_files`` by the share row's id (what the files panel posts)."""
    with transaction.atomic():
        filesystem = filesystem_of(scope, conversation_id)
        rows = FilesystemShare.objects.filter(filesystem=filesystem)
        return delete_share(
            rows, share_id, lambda: notify.files_share_changed(filesystem.key)
        )


def file_shares_of(scope: Scope, conversation_id: Any) -> list[FilesystemShare]:
    """The shares of the conversation's filesystem (the owner's view), users
    first."""
    filesystem = filesystem_of(scope, conversation_id)
    return listed(FilesystemShare.objects.filter(filesystem=filesystem))


@dataclass(frozen=True, kw_only=True, slots=True)
class SharedFilesystem:
    """A filesystem shared with the viewer, and what they may do with it."""

    filesystem: Filesystem
    access: Access
    shared_by: Any = None
    """Who made the latest of the shares reaching the viewer (the owner, or
    whoever shared for them); None when unknown."""


def files_shared_with_me(scope: Scope) -> list[SharedFilesystem]:
    """The filesystems shared with ``scope``'s user (not their own), newest share
    first, with the best access their shares give."""
    user = scope.user
    if not _authenticated(user) or not getattr(user, "is_active", True):
        return []
    best: dict[int, Access] = {}
    rows: dict[int, Filesystem] = {}
    by: dict[int, Any] = {}
    owner = _owner_key(scope)
    shares = (
        FilesystemShare.objects.filter(_member_of(user))
        .select_related("filesystem", "created_by")
        .order_by("-updated_at", "-id")[:MAX_LISTED]
    )
    for share in shares:
        filesystem = share.filesystem
        if owner is not None and filesystem.owner_key == owner:
            continue
        rows.setdefault(filesystem.pk, filesystem)
        by.setdefault(filesystem.pk, share.created_by)
        if best.get(filesystem.pk) != "write":
            best[filesystem.pk] = share.access  # type: ignore[assignment]
    return [
        SharedFilesystem(filesystem=f, access=best[pk], shared_by=by[pk])
        for pk, f in rows.items()
    ]


def open_filesystem(
    scope: Scope, filesystem_id: Any, *, access: Level = "read"
) -> tuple[Filesystem, Level]:
    """The filesystem ``filesystem_id`` names and what ``scope`` may do with it,
    when that is at least ``access``; else ``NotFound`` (one answer for someone
    else's and for none)."""
    if type(filesystem_id) is not int:
        raise InvalidInput(f"filesystem_id must be an integer, not {filesystem_id!r}")
    row = Filesystem.objects.filter(pk=filesystem_id).first()
    level = access_to(scope, row) if row is not None else None
    if row is None or level is None or (access != "read" and level == "read"):
        raise NotFound("filesystem", str(filesystem_id))
    return row, level


def may_follow(scope: Scope, filesystem_id: int) -> bool:
    """Whether ``scope`` may still read the filesystem (a socket asks again when
    its shares change)."""
    try:
        open_filesystem(scope, filesystem_id)
    except NotFound:
        return False
    return True


__all__ = [
    "SharedFilesystem",
    "access_to",
    "check_named",
    "claim",
    "file_shares_of",
    "files_shared_with_me",
    "filesystem_of",
    "key_of",
    "open_filesystem",
    "revoke_file_share",
    "revoke_files",
    "share_files",
]
