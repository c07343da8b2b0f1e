"""Retention: conversations idle longer than their owner's limit are removed.

The limit is ``SAGENTS["RETENTION_DAYS"]`` (None: kept for ever), or what the
site's ``SAGENTS["RETENTION_FOR"]`` answers for each owner: a function, not a
table of ours, because a site's rule already lives somewhere (a plan, a tenant's
contract, a row of its own admin) and a function can read it wherever it is.
"Idle" is the conversation's ``updated_at`` (every message moves it) and no active
run. ``RETENTION_DELETES`` says what goes: the conversation whole, or its contents
(state, display rows, runs, files of its own filesystem) with the conversation and
its title kept. Files of a filesystem shared by several conversations (an owner's,
``owner_files``) are not one conversation's to remove: they stay.

It runs in batches of ``LIFECYCLE_BATCH`` conversations, one transaction each, and
walks the owners and their conversations in primary-key order, so an interrupted
run loses at most its current batch and a re-run carries on (what was removed is no
longer found). Each batch locks its conversations and removes only those still idle
with no active run under the lock: a message that arrived since the batch was
chosen moved ``updated_at`` and started a run in a transaction holding the same row
lock, so its conversation is kept; a message arriving after the removal finds no
conversation (``NotFound``), never a conversation that is then removed under it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import models, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone
from django.utils.module_loading import import_string

from sagents_django.conf import sagents_settings
from sagents_django.models import (
    AgentRun,
    AgentState,
    ConversationBranch,
    DisplayMessage,
    PersistenceFailure,
)
from sagents_django.scope import conversation_model, scope_class

from . import owners, stores
from .export import expire_exports


@dataclass(kw_only=True)
class RetentionReport:
    """What a retention pass removed (a dry run: would remove)."""

    dry_run: bool = False
    owners: int = 0
    """Owners whose limit was looked at (kept-for-ever ones included)."""
    conversations: int = 0
    """Conversations removed, or emptied (``RETENTION_DELETES="contents"``)."""
    kept: int = 0
    """Chosen, then kept: a message or a run came while the batch was chosen."""
    batches: int = 0
    removed: dict[str, int] = field(default_factory=dict)
    expired_exports: int = 0
    """Export archives never downloaded, deleted after ``export.KEEP_DAYS``."""
    """Rows per model label (a dry run: display rows and runs found)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def days_for(owner_pk: Any) -> int | None:
    """The retention of ``owner_pk``'s conversations, in days (None: for ever)."""
    default = sagents_settings.RETENTION_DAYS
    path = sagents_settings.RETENTION_FOR
    if path is None:
        return default
    days = import_string(path)(owner_pk, default=default)
    if days is not None and (type(days) is not int or days <= 0):
        raise ValueError(
            f"RETENTION_FOR answered {days!r} for owner {owner_pk!r}: a positive "
            "number of days or None"
        )
    return days


def apply_retention(
    *, dry_run: bool = False, now: datetime | None = None
) -> RetentionReport:
    """One pass over every owner: remove (or count, ``dry_run``) the conversations
    idle past their limit."""
    now = now or timezone.now()
    report = RetentionReport(dry_run=dry_run)
    if not dry_run:
        report.expired_exports = expire_exports(now)
    for owner_pk, days in _owners():
        report.owners += 1
        if days is None:
            continue
        cutoff = now - timedelta(days=days)
        for batch in _batches(owner_pk, cutoff):
            if dry_run:
                _count(batch, report)
                continue
            _remove_batch(batch, cutoff, report)
    return report


def _owners() -> Iterator[tuple[Any, int | None]]:
    model = conversation_model()
    attname = owners.owner_attname()
    if attname is None:
        yield None, days_for(None)
        return
    found = (
        model._default_manager.order_by(attname)
        .values_list(attname, flat=True)
        .distinct()
    )
    for owner_pk in found.iterator():
        yield owner_pk, days_for(owner_pk)


def candidates(owner_pk: Any, cutoff: datetime) -> models.QuerySet:
    """The owner's conversations idle since before ``cutoff``, no run active (with
    ``"contents"``: only those that still have contents)."""
    if owners.owner_attname() is None:
        queryset = conversation_model()._default_manager.all()
    else:
        queryset = owners.conversations_of(owner_pk)
    queryset = queryset.filter(updated_at__lt=cutoff)
    queryset = queryset.exclude(
        Exists(AgentRun.objects.active().filter(conversation=OuterRef("pk")))
    )
    if sagents_settings.RETENTION_DELETES == "contents":
        queryset = queryset.filter(
            Exists(DisplayMessage.objects.filter(conversation=OuterRef("pk")))
            | Exists(AgentState.objects.filter(conversation=OuterRef("pk")))
            | Exists(AgentRun.objects.filter(conversation=OuterRef("pk")))
        )
    return queryset.order_by("pk")


def _batches(owner_pk: Any, cutoff: datetime) -> Iterator[list[Any]]:
    size = sagents_settings.LIFECYCLE_BATCH
    last = None
    while True:
        queryset = candidates(owner_pk, cutoff)
        if last is not None:
            queryset = queryset.filter(pk__gt=last)
        batch = list(queryset.values_list("pk", flat=True)[:size])
        if not batch:
            return
        yield batch
        last = batch[-1]


def _count(batch: list[Any], report: RetentionReport) -> None:
    report.batches += 1
    report.conversations += len(batch)
    for model in (DisplayMessage, AgentRun):
        count = model.objects.filter(conversation__in=batch).count()
        label = model._meta.label
        report.removed[label] = report.removed.get(label, 0) + count


def _remove_batch(batch: list[Any], cutoff: datetime, report: RetentionReport) -> None:
    """Remove the conversations of ``batch`` still idle under their row locks."""
    model = conversation_model()
    with transaction.atomic():
        still_idle = list(
            model._default_manager.select_for_update()
            .filter(pk__in=batch, updated_at__lt=cutoff)
            .exclude(
                Exists(AgentRun.objects.active().filter(conversation=OuterRef("pk")))
            )
        )
        ids = [c.pk for c in still_idle]
        # Their own filesystems: chosen now, emptied once the rows are gone.
        own = _own_file_scopes(still_idle)
        if sagents_settings.RETENTION_DELETES == "contents":
            per_model: dict[str, int] = {}
            for queryset in (
                AgentRun.objects.filter(conversation__in=ids),
                DisplayMessage.objects.filter(conversation__in=ids),
                AgentState.objects.filter(conversation__in=ids),
                # Branches keep agent states of their own (runtime.branches).
                ConversationBranch.objects.filter(conversation__in=ids),
                PersistenceFailure.objects.filter(conversation__in=ids),
            ):
                _, counts = queryset.delete()
                for label, count in counts.items():
                    per_model[label] = per_model.get(label, 0) + count
        else:
            per_model = owners.delete_conversations(ids)
    report.batches += 1
    report.conversations += len(ids)
    report.kept += len(batch) - len(ids)
    for label, count in per_model.items():
        report.removed[label] = report.removed.get(label, 0) + count
    if own:
        files = stores.remove_files(scope_class()(), own)
        label = "files"
        report.removed[label] = report.removed.get(label, 0) + files.files
        report.removed["stored_files"] = (
            report.removed.get("stored_files", 0) + files.stored_rows
        )
    stores.forget_live_state(str(pk) for pk in ids)


def _own_file_scopes(conversations: list[Any]) -> set[Any]:
    """The filesystems that belong to one conversation alone (the default
    ``("agent", <agent_id>)``); a site's shared choice is left alone."""
    from sagents_django.runtime.file_scopes import site_filesystem_scope

    owned = set()
    scope = scope_class()()
    for conversation in conversations:
        if site_filesystem_scope(scope, conversation) is None:
            owned.add(("agent", str(conversation.agent_id)))
    return owned
