"""The file panel: a conversation's agent files, listed, opened, uploaded.

The panel shows the files of the conversation's filesystem scope
(``runtime.file_scopes``: the site's ``SAGENTS["FILESYSTEM_SCOPE"]``, else the
conversation's own ``("agent", <agent_id>)``), as kept by ``DatabasePersistence``
(the generated factory's storage). An upload goes through that backend's
``write``, so the agent's next ``read_file`` finds it; it is announced with
``file_updated`` like a file the agent wrote, to the conversation and to every page
sharing the scope. Every call takes the caller's scope first: another tenant's
conversation is not found.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from sagents_django.core.filesystem.entries import FileEntry
from sagents_django.core.filesystem.errors import FileSystemError
from sagents_django.core.filesystem.paths import normalize_file_path
from sagents_django.core.filesystem.scope import scope_to_json
from sagents_django.core.limits import MAX_FILE_BYTES
from sagents_django.filesystems import DatabasePersistence
from sagents_django.filesystems.encoding import decode_content
from sagents_django.filesystems.keys import scope_parts
from sagents_django.models import StoredFile
from sagents_django.runtime import agent_server, loop
from sagents_django.runtime.file_scopes import conversation_filesystem_scope
from sagents_django.runtime.publisher import publish_file_event
from sagents_django.scope import Scope
from sagents_django.services.conversations import refuse_read_only

UPLOAD_DIRECTORY = "/uploads"
MAX_FILES_LISTED = 500


class UploadError(ValueError):
    """An upload that cannot be stored (too big, not text, a bad name)."""


@dataclass(kw_only=True, slots=True)
class FileRow:
    path: str
    size: int
    depth: int
    name: str
    is_directory: bool


def _rows(scope: Scope, conversation: Any) -> Any:
    return rows_in(conversation_filesystem_scope(scope, conversation))


def rows_in(filesystem_scope: Any) -> Any:
    """The stored files of a filesystem scope (callers check who may see them)."""
    kind, ident = scope_parts(filesystem_scope)
    return StoredFile.objects.filter(scope_kind=kind, scope_id=ident)


def tree(scope: Scope, conversation: Any) -> list[FileRow]:
    """Files and their directories, sorted by path, indented by depth."""
    return tree_of(_rows(scope, conversation))


def tree_of(rows: Any) -> list[FileRow]:
    """``tree`` of a filesystem's stored files (``rows_in``)."""
    paths = list(
        rows.order_by("path").values_list("path", "size", "mime_type")[
            :MAX_FILES_LISTED
        ]
    )
    out: list[FileRow] = []
    shown: set[str] = set()
    for path, size, mime in paths:
        parts = path.strip("/").split("/")
        for depth in range(1, len(parts)):
            folder = "/" + "/".join(parts[:depth])
            if folder not in shown:
                shown.add(folder)
                out.append(
                    FileRow(
                        path=folder,
                        size=0,
                        depth=depth - 1,
                        name=parts[depth - 1],
                        is_directory=True,
                    )
                )
        if path in shown:
            continue
        shown.add(path)
        out.append(
            FileRow(
                path=path,
                size=size,
                depth=len(parts) - 1,
                name=parts[-1],
                is_directory=mime == "inode/directory",
            )
        )
    return out


def read(scope: Scope, conversation: Any, path: str) -> tuple[str, str] | None:
    """(content, MIME type) of a file, or None when there is none at ``path``."""
    return read_in(_rows(scope, conversation), path)


def read_in(rows: Any, path: str) -> tuple[str, str] | None:
    """``read`` in a filesystem's stored files (``rows_in``)."""
    try:
        path = normalize_file_path(path)
    except FileSystemError:
        return None
    row = (
        rows.filter(path=path)
        .exclude(mime_type="inode/directory")
        .values_list("content", "mime_type")
        .first()
    )
    if row is None:
        return None
    return decode_content(row[0]), row[1] or "text/plain"


def upload(scope: Scope, conversation: Any, name: str, data: bytes) -> str:
    """Store ``data`` as ``/uploads/<name>``; its path (NotFound for a read
    share's lent scope: its files are read-only)."""
    refuse_read_only(scope, conversation.pk)
    if len(data) > MAX_FILE_BYTES:
        raise UploadError(f"A file may hold at most {MAX_FILE_BYTES} bytes.")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UploadError("Only UTF-8 text files can be uploaded.") from None
    base = name.replace("\\", "/").rsplit("/", 1)[-1].strip()
    if not base or base in (".", ".."):
        raise UploadError("The file needs a name.")
    try:
        path = normalize_file_path(f"{UPLOAD_DIRECTORY}/{base}")
    except FileSystemError as exc:
        raise UploadError(f"That name cannot be used: {exc}") from None
    entry = FileEntry.new_persisted_file(path, text)
    files = conversation_filesystem_scope(scope, conversation)
    from sagents_django.sharing.filesystems import claim

    claim(scope, conversation)  # the owner's files, recorded at their first use
    opts = {"scope_key": files, "base_directory": None}
    try:
        DatabasePersistence().write(entry, opts)
    except FileSystemError as exc:
        raise UploadError(str(exc)) from None
    event = {"path": path, "scope": scope_to_json(files)}
    agent_server.publish_event_from(scope, conversation.pk, "file_updated", event)
    transaction.on_commit(
        lambda: loop.submit(publish_file_event(conversation.pk, "file_updated", event))
    )
    return path
