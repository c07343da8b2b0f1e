"""Erasure of a user, or of a conversation owner (a tenant), in every store at once.

One call removes the conversations the subject owns and everything hanging from
them (agent state, step checkpoints, display rows, runs and their tool-call
journals, feedback, recorded failures, trigger events), their files in every
backend the site's factory names (``stores``), the runtime's keys in Redis (event
counters, in-flight buffers, viewer entries), and the rows that name the user
outside their conversations: feedback they gave, their MCP servers, trigger events
started as them, their data exports, the filesystems they own (with those
filesystems' shares) and the shares that name them (of others' conversations and
files).

Order is what makes "nothing is recreated" true: running turns are cancelled first
and waited for (a queued run, whose Celery task is still on the broker, is ended at
once; the task later finds no run and does nothing); then files, so a debounced
write of a turn lands before, never after; then the rows, a batch of conversations
per transaction, each batch locking its conversations and their active runs, so a
turn that a message started meanwhile is cancelled and waited for too; then the
keys. Usage on the runs goes with them (the report keeps the totals); the usage
ledger stays, anonymised (``budgets.lifecycle``): the site's books keep every
call's tokens and cost, and lose whom it names. Approval records are anonymised,
not removed: the audit of who oversaw an agent's action stays without the person
(``approvals.erasure`` says why).

Conversations of a team or organisation are the owner's, not a member's:
``erase_user`` removes the conversations owned by the user (a site whose
conversations belong to users), and ``erase_owner`` those of a tenant.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.files.storage import storages
from django.db import models, transaction
from django.db.models import Sum

from sagents_django.approvals.erasure import anonymise
from sagents_django.budgets.lifecycle import anonymise as anonymise_ledger
from sagents_django.budgets.lifecycle import entries_of as ledger_entries
from sagents_django.conf import sagents_settings
from sagents_django.exceptions import Conflict, InvalidInput, NotFound
from sagents_django.models import (
    AgentRun,
    AgentState,
    AgentStep,
    DataExport,
    DisplayMessage,
    PersistenceFailure,
    ReplyFeedback,
    StoredMcpServer,
    ToolCallRecord,
    TriggerEvent,
)
from sagents_django.runtime import admission
from sagents_django.scope import (
    Scope,
    conversation_model,
    owned_by_users,
    owner_field,
    owner_model,
    scope_class,
)
from sagents_django.sharing.models import ConversationShare, Filesystem, FilesystemShare

from . import owners, stores

WAIT_SECONDS = 30.0
"""How long erasure waits for cancelled turns to end before it gives up."""

NAMES = {
    "Conversation": "conversations",
    "AgentState": "agent_states",
    "ConversationBranch": "branches",
    "AgentStep": "agent_steps",
    "DisplayMessage": "display_messages",
    "AgentRun": "runs",
    "ToolCallRecord": "tool_calls",
    "PersistenceFailure": "persistence_failures",
    "ReplyFeedback": "feedback",
    "TriggerEvent": "trigger_events",
    "StoredMcpServer": "mcp_servers",
    "DataExport": "exports",
    "ConversationShare": "conversation_shares",
    "ShareLink": "share_links",
    "Filesystem": "filesystems",
    "FilesystemShare": "filesystem_shares",
}


@dataclass(kw_only=True)
class ErasureReport:
    """What an erasure removed (or, in a dry run, would remove)."""

    subject: str
    """Whom: "user 42", "owner 7"."""
    dry_run: bool = False
    removed: dict[str, int] = field(default_factory=dict)
    """Rows per store (``NAMES``' values), plus ``files`` (entries deleted through
    the site's file backends), ``stored_files`` (``StoredFile`` rows) and
    ``live_keys`` (Redis keys, or this process's entries). A dry run counts rows
    only."""
    runs_cancelled: int = 0
    """Turns that were running or queued, cancelled first."""
    batches: int = 0
    """Transactions the conversations were removed in."""
    usage: dict[str, Any] = field(default_factory=dict)
    """The removed runs' totals: input and output tokens, cost in USD (a string)."""
    skipped: list[str] = field(default_factory=list)
    """What was left alone, and why (a disk root shared by every scope)."""

    def add(self, name: str, count: int) -> None:
        self.removed[name] = self.removed.get(name, 0) + count

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def erase_user(
    user: Any, *, dry_run: bool = False, wait: float = WAIT_SECONDS
) -> ErasureReport:
    """Remove everything of ``user`` (an instance of the user model, or its
    primary key) from every store; a dry run only counts. ``InvalidInput`` for
    anything else, ``NotFound`` for a user that does not exist, ``Conflict`` when
    a cancelled turn did not end within ``wait`` seconds (nothing was removed)."""
    user = _instance(get_user_model(), user, what="user")
    conversations = owners.conversations_of_user(user.pk)
    scope = _scope(user=user, owner=user)
    outside = [
        ReplyFeedback.objects.filter(user=user),
        StoredMcpServer.objects.filter(user=user),
        TriggerEvent.objects.filter(scope__user_id=_json_pk(user.pk)),
        DataExport.objects.filter(user=user),
        ConversationShare.objects.filter(user=user),
        FilesystemShare.objects.filter(user=user),
    ]
    if owned_by_users(conversation_model()):  # else a team owns its filesystems
        outside.append(Filesystem.objects.filter(owner_key=str(user.pk)))
    ledger = Ledger(user_pk=user.pk, owner_pk=user.pk)
    return _erase(
        f"user {user.pk}",
        scope,
        conversations,
        outside,
        dry_run,
        wait,
        ledger,
        user=user,
    )


def erase_owner(
    owner: Any, *, dry_run: bool = False, wait: float = WAIT_SECONDS
) -> ErasureReport:
    """Remove every conversation of the owner (a tenant: an instance of the
    conversation model's owner model, or its primary key) and the tenant's MCP
    servers, as ``erase_user`` does."""
    model = conversation_model()
    field_name = owner_field(model)
    target = owner_model(model)
    if field_name is None or target is None:
        raise InvalidInput("Conversations have no owner on this site: nothing to erase")
    owner = _instance(target, owner, what=str(target._meta.verbose_name))
    conversations = owners.conversations_of(owner.pk)
    scope = _scope(user=None, owner=owner)
    outside = [
        StoredMcpServer.objects.filter(tenant=str(owner.pk)),
        Filesystem.objects.filter(owner_key=str(owner.pk)),
    ]
    ledger = Ledger(owner_pk=owner.pk)
    return _erase(
        f"owner {owner.pk}", scope, conversations, outside, dry_run, wait, ledger
    )


def _instance(model: type[models.Model], value: Any, *, what: str) -> Any:
    if isinstance(value, models.Model):
        if not isinstance(value, model):
            raise InvalidInput(
                f"{what} must be a {model._meta.label} or its primary key, not a "
                f"{type(value).__name__}"
            )
        value = value.pk
        if value is None:
            raise NotFound(what, None)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InvalidInput(
            f"{what} must be a {model._meta.label} or its primary key, not "
            f"{type(value).__name__}"
        )
    pk_field = model._meta.pk
    assert pk_field is not None
    try:
        pk = pk_field.to_python(value)
    except ValidationError:
        raise InvalidInput(f"{value!r} is not a {what} primary key") from None
    found = model._default_manager.filter(pk=pk).first()
    if found is None:
        raise NotFound(what, value)
    return found


def _json_pk(pk: Any) -> Any:
    # Scope.to_dict: an integer key as itself, any other as text.
    return pk if isinstance(pk, int) else str(pk)


def _scope(*, user: Any, owner: Any) -> Scope:
    """The site's scope class owning the subject's conversations (what cancelling
    a turn and building the agent of its files need)."""
    return scope_class()(user=user, owner=owner)


def _erase(
    subject: str,
    scope: Scope,
    conversations: models.QuerySet,
    outside: list[models.QuerySet],
    dry_run: bool,
    wait: float,
    ledger: Ledger,
    *,
    user: Any = None,
) -> ErasureReport:
    report = ErasureReport(subject=subject, dry_run=dry_run)
    ids = list(conversations.values_list("pk", flat=True))
    entries = ledger.entries(ids)
    runs = AgentRun.objects.filter(conversation__in=ids)
    totals = runs.aggregate(
        input=Sum("input_tokens"), output=Sum("output_tokens"), cost=Sum("cost")
    )
    report.usage = {
        "input_tokens": totals["input"] or 0,
        "output_tokens": totals["output"] or 0,
        "cost": str(totals["cost"] or Decimal(0)),
    }
    if dry_run:
        _count(report, ids, outside)
        report.add("usage_entries_anonymised", entries.count())
        _anonymise_approvals(report, ids, user, dry_run=True)
        return report
    report.runs_cancelled = _cancel_and_wait(scope, ids, wait)
    files = stores.remove_files(scope, stores.file_scopes(scope, conversations))
    report.add("files", files.files)
    report.add("stored_files", files.stored_rows)
    report.skipped.extend(files.skipped)
    model = conversation_model()
    for batch in _chunks(ids, sagents_settings.LIFECYCLE_BATCH):
        _delete_batch(model, batch, scope, report, wait)
        report.batches += 1
    for queryset in outside:
        if queryset.model is DataExport:
            _delete_archives(queryset)
        _, per_model = queryset.delete()
        _merge(report, per_model)
    report.add("usage_entries_anonymised", ledger.anonymise(entries))
    _anonymise_approvals(report, ids, user, dry_run=False)
    report.add("live_keys", stores.forget_live_state(str(pk) for pk in ids))
    return report


@dataclass(frozen=True, kw_only=True)
class Ledger:
    """Whose usage ledger rows an erasure anonymises (``budgets.lifecycle``)."""

    user_pk: Any = None
    owner_pk: Any = None

    def entries(self, conversation_ids: list[Any]) -> models.QuerySet:
        return ledger_entries(
            user_pk=self.user_pk, owner_pk=self.owner_pk, conversations=conversation_ids
        )

    def anonymise(self, entries: models.QuerySet) -> int:
        return anonymise_ledger(entries, user_pk=self.user_pk, owner_pk=self.owner_pk)


def _anonymise_approvals(
    report: ErasureReport, ids: list[Any], user: Any, *, dry_run: bool
) -> None:
    """The approval audit stays, without the subject (``approvals.erasure`` says
    why): counted apart from what was removed."""
    for name, count in anonymise(ids, user=user, dry_run=dry_run).items():
        report.add(name, count)


def _count(report: ErasureReport, ids: list[Any], outside: list[Any]) -> None:
    runs = AgentRun.objects.filter(conversation__in=ids)
    counts = {
        "conversations": len(ids),
        "agent_states": AgentState.objects.filter(conversation__in=ids).count(),
        "agent_steps": AgentStep.objects.filter(run__in=runs).count(),
        "display_messages": DisplayMessage.objects.filter(conversation__in=ids).count(),
        "runs": runs.count(),
        "tool_calls": ToolCallRecord.objects.filter(run__in=runs).count(),
        "persistence_failures": PersistenceFailure.objects.filter(
            conversation__in=ids
        ).count(),
        "feedback": ReplyFeedback.objects.filter(conversation__in=ids).count(),
        "trigger_events": TriggerEvent.objects.filter(
            conversation_id__in=[str(pk) for pk in ids]
        ).count(),
    }
    for name, count in counts.items():
        report.add(name, count)
    for queryset in outside:
        if queryset.model is ReplyFeedback:
            queryset = queryset.exclude(conversation__in=ids)
        if queryset.model is TriggerEvent:
            queryset = queryset.exclude(conversation_id__in=[str(pk) for pk in ids])
        report.add(NAMES[queryset.model.__name__], queryset.count())


def _cancel_and_wait(scope: Scope, ids: list[Any], wait: float) -> int:
    active = list(
        AgentRun.objects.active()
        .filter(conversation__in=ids)
        .values_list("conversation_id", flat=True)
    )
    for pk in active:
        admission.cancel(scope, pk)
    _wait_until_ended(ids, wait)
    return len(active)


def _wait_until_ended(ids: list[Any], wait: float) -> None:
    deadline = time.monotonic() + wait
    while AgentRun.objects.active().filter(conversation__in=ids).exists():
        if time.monotonic() > deadline:
            raise Conflict(
                f"A turn of a conversation being erased was still running after "
                f"{wait} s; its cancel is requested, try again once it ends"
            )
        time.sleep(0.05)


def _delete_batch(
    model: type[models.Model],
    batch: list[Any],
    scope: Scope,
    report: ErasureReport,
    wait: float,
) -> None:
    """Delete a batch of conversations, unless a turn started in one meanwhile (a
    message arrived): that turn is cancelled and waited for, then the batch again."""
    while True:
        with transaction.atomic():
            list(
                model._default_manager.select_for_update()
                .filter(pk__in=batch)
                .values_list("pk", flat=True)
            )
            running = list(
                AgentRun.objects.select_for_update()
                .filter(conversation__in=batch, status="running")
                .values_list("conversation_id", flat=True)
            )
            if not running:
                _merge(report, owners.delete_conversations(batch))
                return
        for pk in running:
            admission.cancel(scope, pk)
            report.runs_cancelled += 1
        _wait_until_ended(running, wait)


def _delete_archives(exports: models.QuerySet) -> None:
    storage = storages[sagents_settings.EXPORT_STORAGE]
    for name in exports.exclude(file_name="").values_list("file_name", flat=True):
        storage.delete(name)


def _merge(report: ErasureReport, per_model: dict[str, int]) -> None:
    for label, count in per_model.items():
        if label == conversation_model()._meta.label:
            name = "conversations"  # the default one, or a swapped-in model
        else:
            name = NAMES.get(label.rsplit(".", 1)[-1], label)
        report.add(name, count)


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


__all__ = ["ErasureReport", "erase_owner", "erase_user"]
