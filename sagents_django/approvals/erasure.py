"""Erasure keeps the approval audit and removes the person from it.

An approval record is evidence that a person oversaw an agent's action (EU AI Act
Art. 14; the deployer keeps such logs, Art. 26(6)), which a site may have to keep
after the person who asked or decided is erased (GDPR Art. 17(3)(b) and (e)). What
it needs for that is the fact (this tool, call and argument hash; asked, decided
this way, at these times, through this door; what ran), not who or what the
arguments said. So erasure anonymises instead of deleting:

- requests of the subject's conversations, and requests the subject asked
  anywhere: the requester, the arguments, the description, the result and the
  words of the decision (edited arguments, a reason) are cleared, and the ids of
  the deleted conversation and runs are replaced by fresh random ones (the
  requests of one interrupt still share theirs, but nothing leads back); the
  hashes, tool, statuses, times and decisions' types stay; a pending one is
  closed (dismissed, not run) and its link spent;
- the subject's own votes anywhere: who is cleared (``user_label`` becomes
  ``ERASED``), the reason and edited arguments too; the decision and time stay;
- other people's votes on the subject's requests lose their reason and edited
  arguments (they may quote the subject), and keep who decided.
"""

from __future__ import annotations

import secrets
import uuid
from typing import Any

from django.db.models import Q
from django.utils import timezone

from .models import DISMISSED, PENDING, ApprovalRequest, ApprovalVote

ERASED = "(erased)"


def anonymise(
    conversation_ids: list[Any], *, user: Any = None, dry_run: bool = False
) -> dict[str, int]:
    """Anonymise the approval records of the conversations (and of ``user``);
    counts per kind (what would be touched, for a dry run)."""
    refs = [str(pk) for pk in conversation_ids]
    which = Q(conversation_ref__in=refs)
    if user is not None:
        which |= Q(requested_by=user)
    # By primary key: the ids the filter matched are replaced on the way.
    pks = list(ApprovalRequest.objects.filter(which).values_list("pk", flat=True))
    requests = ApprovalRequest.objects.filter(pk__in=pks)
    mine = ApprovalVote.objects.filter(user=user) if user is not None else None
    theirs = ApprovalVote.objects.filter(request__in=requests)
    counts = {
        "approval_requests_anonymised": requests.count(),
        "approval_votes_anonymised": theirs.count()
        + (mine.exclude(request__in=requests).count() if mine is not None else 0),
    }
    if dry_run:
        return counts
    now = timezone.now()
    requests.filter(status=PENDING).update(
        status=DISMISSED, decided_at=now, execution_status="not_run", executed_at=now
    )
    for row in requests.only("pk", "decision"):
        kind = (row.decision or {}).get("type")
        ApprovalRequest.objects.filter(pk=row.pk).update(
            decision={"type": kind} if kind else None,
            link_nonce=secrets.token_hex(16),
        )
    _unlink(requests)
    requests.update(
        requested_by=None,
        requested_by_label=ERASED,
        arguments={},
        description="",
        result=None,
    )
    theirs.update(reason="", arguments=None)
    if mine is not None:
        mine.update(user=None, user_label=ERASED, reason="", arguments=None)
    return counts


def _unlink(requests: Any) -> None:
    """Replace the ids that name the subject's conversations and runs by fresh
    ones, the same old id by the same new one."""
    fresh: dict[str, str] = {}

    def new(ref: str) -> str:
        if not ref or ref.startswith("erased-"):
            return ref
        return fresh.setdefault(ref, f"erased-{uuid.uuid4()}")

    for row in requests.only("pk", "conversation_ref", "run_ref", "resumed_run_ref"):
        ApprovalRequest.objects.filter(pk=row.pk).update(
            conversation_ref=new(row.conversation_ref),
            run_ref=new(row.run_ref),
            resumed_run_ref=new(row.resumed_run_ref),
            conversation=None,
            run=None,
            resumed_run=None,
        )
