"""A user's data as a zip, built once and downloaded once by that user.

The archive holds ``account.json`` (the user's usage totals, the feedback they gave
anywhere, their votes on approval requests anywhere, their MCP servers: names and
URLs, never secrets), one ``conversations/<id>.json`` per conversation they own (its
messages as shown, approvals decided in it with each request's audit chain,
feedback on it, its runs with their usage), ``usage_ledger.json`` (one row per
model call of theirs: model, tokens, cost), and
``files/<scope>/<path>`` for every file of the filesystems their conversations
used, read through the site's backends as erasure deletes them (``stores``).

A small account's archive is built in the request; a large one (more display rows
than ``EXPORT_INLINE_MAX_ROWS``) by a Celery task when turns run on Celery. The
archive waits in ``EXPORT_STORAGE``; its download is a conditional update of the
row (ready → downloaded) before the file is read and deleted, so of two requests
for one link exactly one gets the archive, another user gets a 404 (the export is
not theirs to know of), and a replay gets 410 Gone. An archive never downloaded
is deleted after ``KEEP_DAYS`` by the retention pass.
"""

from __future__ import annotations

import json
import tempfile
import zipfile
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import IO, Any

from django.contrib.auth import get_user_model
from django.core.files import File
from django.core.files.storage import storages
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.http import Http404
from django.utils import timezone

from sagents_django import services
from sagents_django.approvals import audit
from sagents_django.approvals.models import ApprovalRequest, ApprovalVote
from sagents_django.budgets import lifecycle as ledger
from sagents_django.conf import sagents_settings
from sagents_django.core.filesystem import registry
from sagents_django.core.filesystem.errors import FileSystemError
from sagents_django.exceptions import InvalidInput
from sagents_django.models import (
    AgentRun,
    DataExport,
    DisplayMessage,
    ReplyFeedback,
    StoredMcpServer,
)
from sagents_django.scope import Scope, scope_class

from . import owners, stores

PREFIX = "sagents-exports"
"""Where archives wait in the export storage."""
KEEP_DAYS = 7
"""Days an archive waits for its download; then the retention pass deletes it."""


class Gone(Exception):
    """The export was downloaded already (or failed): the link is spent."""


def request_export(user: Any) -> DataExport:
    """Start an export of ``user``'s data: built now, or by a Celery task for a
    large account on the celery executor (the row says which is done)."""
    if not isinstance(user, get_user_model()) or user.pk is None:
        raise InvalidInput(f"user must be a saved user, not {type(user).__name__}")
    export = DataExport.objects.create(user=user)
    rows = DisplayMessage.objects.filter(conversation__in=_conversations(user)).count()
    if (
        rows > sagents_settings.EXPORT_INLINE_MAX_ROWS
        and sagents_settings.EXECUTOR == "celery"
    ):
        from sagents_django.tasks import build_export as task

        task.delay_on_commit(str(export.pk))
    else:
        build_export(export.pk)
        export.refresh_from_db()
    return export


def build_export(export_id: Any) -> str:
    """Build the archive of a pending export; its status afterwards."""
    export = DataExport.objects.filter(pk=export_id).select_related("user").first()
    if export is None or export.status != DataExport.PENDING:
        return export.status if export is not None else "missing"
    name = f"{PREFIX}/{export.pk}.zip"
    try:
        with tempfile.TemporaryFile() as handle:
            count = write_archive(export.user, handle)
            size = handle.tell()
            handle.seek(0)
            name = storages[sagents_settings.EXPORT_STORAGE].save(name, File(handle))
    except Exception as exc:
        DataExport.objects.filter(pk=export.pk).update(
            status=DataExport.FAILED,
            error=f"{type(exc).__name__}: {exc}"[:2000],
            finished_at=timezone.now(),
        )
        raise
    DataExport.objects.filter(pk=export.pk, status=DataExport.PENDING).update(
        status=DataExport.READY,
        file_name=name,
        size=size,
        conversations=count,
        finished_at=timezone.now(),
    )
    return DataExport.READY


def take_download(user: Any, export_id: Any) -> IO[bytes]:
    """The archive of ``export_id``, for its owner, once: ``Http404`` for anyone
    else (or an export that does not exist), ``Gone`` when it was taken already.
    The caller closes the returned temporary file."""
    owned = DataExport.objects.filter(pk=export_id, user_id=user.pk)
    with transaction.atomic():
        export = owned.select_for_update().first()
        if export is None:
            raise Http404("No such export.")
        if export.status != DataExport.READY:
            if export.status == DataExport.PENDING:
                raise Http404("The export is not ready yet.")
            raise Gone(f"Export {export.pk} was {export.status}")
        name = export.file_name
        owned.filter(status=DataExport.READY).update(
            status=DataExport.DOWNLOADED, file_name="", downloaded_at=timezone.now()
        )
    storage = storages[sagents_settings.EXPORT_STORAGE]
    # Returned open (the response closes it): not a with block.
    copy = tempfile.TemporaryFile()  # noqa: SIM115
    with storage.open(name, "rb") as source:
        for chunk in iter(lambda: source.read(1 << 20), b""):
            copy.write(chunk)
    storage.delete(name)
    copy.seek(0)
    return copy


def expire_exports(now: datetime) -> int:
    """Delete the archives of exports older than ``KEEP_DAYS`` that were never
    downloaded (their rows say "expired"); how many."""
    old = DataExport.objects.filter(
        status__in=(DataExport.PENDING, DataExport.READY),
        created_at__lt=now - timedelta(days=KEEP_DAYS),
    )
    storage = storages[sagents_settings.EXPORT_STORAGE]
    expired = 0
    for export in old.iterator():
        updated = DataExport.objects.filter(pk=export.pk, status=export.status).update(
            status=DataExport.EXPIRED, file_name=""
        )
        if updated and export.file_name:
            storage.delete(export.file_name)
        expired += updated
    return expired


# The archive --------------------------------------------------------------------
def _conversations(user: Any) -> Any:
    return owners.conversations_of_user(user.pk).order_by("created_at")


def write_archive(user: Any, handle: IO[bytes]) -> int:
    """Write the zip of ``user``'s data to ``handle``; how many conversations."""
    scope = scope_class()(user=user, owner=user)
    conversations = list(_conversations(user))
    with zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("account.json", _json(_account(user, scope)))
        archive.writestr("usage_ledger.json", _json(ledger.export_rows(user)))
        for conversation in conversations:
            archive.writestr(
                f"conversations/{conversation.pk}.json",
                _json(_conversation(conversation)),
            )
        keys = stores.file_scopes(scope, conversations) if conversations else set()
        for key in sorted(keys, key=repr):
            label = stores.scope_label(key)
            for path, content in _files(scope, key):
                archive.writestr(f"files/{label}{path}", content)
    return len(conversations)


def _account(user: Any, scope: Scope) -> dict[str, Any]:
    totals = services.usage_totals(scope)
    return {
        "user": {"id": user.pk, "username": user.get_username()},
        "exported_at": timezone.now(),
        "usage": {
            "runs": totals.runs,
            "input_tokens": totals.input_tokens,
            "output_tokens": totals.output_tokens,
            "cost": totals.cost,
            "unpriced_runs": totals.unpriced_runs,
        },
        "feedback_given": list(
            ReplyFeedback.objects.filter(user=user).values(
                "conversation_id", "message_id", "rating", "comment", "created_at"
            )
        ),
        "approval_votes": [
            {
                "request": str(v.request_id),
                "tool_name": v.request.tool_name,
                "arguments_hash": v.request.arguments_hash,
                "decision": v.decision,
                "reason": v.reason,
                "via": v.via,
                "at": v.created_at,
            }
            for v in ApprovalVote.objects.filter(user=user).select_related("request")
        ],
        "mcp_servers": list(
            StoredMcpServer.objects.filter(user=user).values(
                "name", "url", "tools", "enabled", "created_at"
            )
        ),
    }


def _conversation(conversation: Any) -> dict[str, Any]:
    rows = DisplayMessage.objects.filter(conversation=conversation).order_by(
        "inserted_at", "sequence", "id"
    )
    messages = list(
        rows.values(
            "id",
            "message_type",
            "content_type",
            "content",
            "status",
            "tool_call_id",
            "metadata",
            "inserted_at",
        )
    )
    return {
        "conversation": {
            "id": conversation.pk,
            "title": conversation.title,
            "metadata": conversation.metadata,
            "created_at": conversation.created_at,
            "updated_at": conversation.updated_at,
        },
        "messages": messages,
        "approvals": [
            {
                "message_id": m["id"],
                "tool_call_id": m["tool_call_id"],
                "decision": m["metadata"]["hitl_decision"],
            }
            for m in messages
            if isinstance(m["metadata"], dict) and "hitl_decision" in m["metadata"]
        ],
        "approval_requests": [
            audit.chain(row)
            for row in ApprovalRequest.objects.filter(
                conversation_ref=str(conversation.pk)
            )
            .order_by("created_at", "index")
            .prefetch_related("votes")
        ],
        "feedback": list(
            ReplyFeedback.objects.filter(conversation=conversation).values(
                "message_id", "user_id", "rating", "comment", "created_at"
            )
        ),
        "runs": list(
            AgentRun.objects.filter(conversation=conversation)
            .order_by("created_at")
            .values(
                "id",
                "status",
                "trigger",
                "model",
                "input_tokens",
                "output_tokens",
                "cost",
                "created_at",
                "finished_at",
            )
        ),
    }


def _files(scope: Scope, key: Any) -> Iterator[tuple[str, str]]:
    probes: dict[str, Any] = {}
    try:
        for config in stores.backends(scope, key):
            if stores.shared_root(config, key, scope, probes) is not None:
                continue  # everyone's files: not this user's to take
            opts = config.build_storage_opts(key)
            for entry in config.persistence.list_persisted_entries(opts):
                if entry.entry_type != "file":
                    continue
                try:
                    loaded = config.persistence.load(entry, opts)
                except FileSystemError:
                    continue
                yield entry.path, loaded.content or ""
    finally:
        registry.stop_filesystem(key)


def _json(value: Any) -> str:
    return json.dumps(value, cls=DjangoJSONEncoder, ensure_ascii=False, indent=1)
