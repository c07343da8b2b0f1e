"""The file panel: a conversation's agent files, listed, opened, uploaded.

The panel shows the files of the conversation's default filesystem scope,
``("agent", <agent_id>)`` (what the file tools use when the factory names no other),
as kept by ``DatabasePersistence`` (the generated factory's storage). An upload goes
through that backend's ``write``, so the agent's next ``read_file`` finds it; it is
announced with ``file_updated`` like a file the agent wrote. Every call takes the
caller's scope first: another tenant's conversation is not found.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sagents_django.core.filesystem.entries import FileEntry
from sagents_django.core.filesystem.errors import FileSystemError
from sagents_django.core.filesystem.paths import normalize_file_path
from sagents_django.core.limits import MAX_FILE_BYTES
from sagents_django.filesystems import DatabasePersistence
from sagents_django.filesystems.encoding import decode_content
from sagents_django.models import StoredFile
from sagents_django.runtime import agent_server
from sagents_django.scope import Scope

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


def filesystem_scope(conversation: Any) -> tuple[str, str]:
    return ("agent", str(conversation.agent_id))


def _rows(conversation: Any) -> Any:
    kind, ident = filesystem_scope(conversation)
    return StoredFile.objects.filter(scope_kind=kind, scope_id=ident)


def tree(conversation: Any) -> list[FileRow]:
    """Files and their directories, sorted by path, indented by depth."""
    paths = list(
        _rows(conversation)
        .order_by("path")
        .values_list("path", "size", "mime_type")[:MAX_FILES_LISTED]
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


def read(conversation: Any, path: str) -> tuple[str, str] | None:
    """(content, MIME type) of a file, or None when there is none at ``path``."""
    try:
        path = normalize_file_path(path)
    except FileSystemError:
        return None
    row = (
        _rows(conversation)
        .filter(path=path)
        .exclude(mime_type="inode/directory")
        .values_list("content", "mime_type")
        .first()
    )
    if row is None:
        return None
    return decode_content(row[0]), row[1] or "text/plain"


def upload(scope: Scope, conversation: Any, name: str, data: bytes) -> str:
    """Store ``data`` as ``/uploads/<name>``; its path."""
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
    opts = {"scope_key": filesystem_scope(conversation), "base_directory": None}
    try:
        DatabasePersistence().write(entry, opts)
    except FileSystemError as exc:
        raise UploadError(str(exc)) from None
    agent_server.publish_event_from(
        scope,
        conversation.pk,
        "file_updated",
        {"path": path, "scope": list(filesystem_scope(conversation))},
    )
    return path
