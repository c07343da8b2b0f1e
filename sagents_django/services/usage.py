"""Token usage and cost summed over runs: per conversation, per owner, per user turn.

A user turn is what answers a person's message: the run their message started, and
the runs that carried that answer on (a resume after an approval, a retry after a
failure, a dismissal). Runs of a message or of messages queued meanwhile
(``TURN_STARTS``) begin a new one.

A regenerated reply (``runtime.branches``) is a model call that cost what it
reported, but no message of the person: it is a group of runs of its own (its
``trigger`` says so) and is not counted in ``UsageTotals.turns``. An edited
message is a message the person sent again: a turn (trigger ``edit``).

Every run counts, whatever its status: a cancelled or failed turn consumed the
tokens it reported. A run whose model has no known price stores a NULL cost
(``runtime.usage``); totals add up the priced runs and count the others in
``unpriced_runs``, so a sum never passes an unknown for zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db.models import Count, Max, Q, QuerySet, Sum

from sagents_django.models import (
    ACTIVE_RUN_STATUSES,
    COST_QUANTUM,
    AgentRun,
    DisplayMessage,
)
from sagents_django.scope import Scope

from .conversations import owned_ids, require_conversation

PERSON_TURNS = ("message", "queued", "edit")
"""Triggers of the runs that answer what a person sent: each is a user turn."""
TURN_STARTS = (*PERSON_TURNS, "regenerate")
"""Triggers of the runs that begin a group of ``usage_by_turn``: a person's turn,
or a regenerated reply (the message answered again, in a branch of its own)."""
NO_MODEL_TRIGGERS = ("dismiss", "notify", "restore", "update", "reset")
"""Short runs of verbs that held the conversation without calling the model."""


@dataclass(frozen=True, kw_only=True)
class UsageTotals:
    """What a set of runs consumed."""

    runs: int = 0
    """How many runs were counted."""
    input_tokens: int = 0
    output_tokens: int = 0
    cost: Decimal = Decimal(0)
    """USD, summed over the priced runs."""
    unpriced_runs: int = 0
    """Runs whose model has no known price: their tokens are counted, their cost
    is not in ``cost``."""
    turns: int = 0
    """Of the runs, those that answered what the person sent (``PERSON_TURNS``):
    their messages, edited ones included."""
    regenerations: int = 0
    """Of the runs, those that made a reply again: each cost a model call, none
    is a turn of the person's."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost": str(self.cost),
            "unpriced_runs": self.unpriced_runs,
            "turns": self.turns,
            "regenerations": self.regenerations,
        }


# Prefixed: an aggregate named like a field ("cost") would shadow it in the
# filter of another aggregate.
_AGGREGATES = {
    "total_runs": Count("pk"),
    "total_input_tokens": Sum("input_tokens"),
    "total_output_tokens": Sum("output_tokens"),
    "total_cost": Sum("cost"),
    "total_unpriced_runs": Count("pk", filter=Q(cost__isnull=True)),
    "total_turns": Count("pk", filter=Q(trigger__in=PERSON_TURNS)),
    "total_regenerations": Count("pk", filter=Q(trigger="regenerate")),
}


def usage_totals(scope: Scope, *, conversation_id: Any = None) -> UsageTotals:
    """The usage of one conversation's runs, or (``conversation_id`` None) of all
    the runs of every conversation ``scope`` owns: a user's total. NotFound for a
    conversation outside ``scope``; a scope that owns nothing gets zeros."""
    runs = _runs(scope, conversation_id)
    return _totals(runs.aggregate(**_AGGREGATES))


def usage_by_conversation(scope: Scope) -> dict[Any, UsageTotals]:
    """The usage of each conversation ``scope`` owns that has runs, by its id (one
    query)."""
    rows = (
        _runs(scope, None).order_by().values("conversation_id").annotate(**_AGGREGATES)
    )
    return {row.pop("conversation_id"): _totals(row) for row in rows}


def _runs(scope: Scope, conversation_id: Any) -> QuerySet[AgentRun]:
    if conversation_id is not None:
        pk = require_conversation(scope, conversation_id, touch=False)
        return AgentRun.objects.filter(conversation_id=pk)
    return AgentRun.objects.filter(conversation__in=owned_ids(scope))


def _totals(row: dict[str, Any]) -> UsageTotals:
    cost = row.get("total_cost")
    return UsageTotals(
        runs=row.get("total_runs") or 0,
        input_tokens=row.get("total_input_tokens") or 0,
        output_tokens=row.get("total_output_tokens") or 0,
        # Kept to the runs' own precision (a database's sum may carry more digits).
        cost=Decimal(cost).quantize(COST_QUANTUM) if cost is not None else Decimal(0),
        unpriced_runs=row.get("total_unpriced_runs") or 0,
        turns=row.get("total_turns") or 0,
        regenerations=row.get("total_regenerations") or 0,
    )


@dataclass(frozen=True, kw_only=True)
class TurnUsage:
    """What one user turn consumed, over all its runs."""

    run_ids: tuple[Any, ...] = field(default_factory=tuple)
    """Its runs' ids, oldest first (the first answered the person's message)."""
    usage: UsageTotals = field(default_factory=UsageTotals)
    active: bool = False
    """A run of it is queued or running: the figures are not final yet."""
    reply_id: int | None = None
    """The display row of the turn's last reply text (None: it wrote none)."""
    trigger: str = "message"
    """What started it (its first run's trigger): ``message``, ``queued`` or
    ``edit`` for a person's turn, ``regenerate`` for a reply made again, or a
    verb's (``execute``, ``resume``...) when runs came before any message."""

    @property
    def by_person(self) -> bool:
        """Whether it answered something the person sent (a regenerated reply
        did not: it answered a message again)."""
        return self.trigger != "regenerate"

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_ids": [str(pk) for pk in self.run_ids],
            "trigger": self.trigger,
            "active": self.active,
            "reply_id": self.reply_id,
            **self.usage.to_dict(),
        }


def usage_by_turn(scope: Scope, conversation_id: Any) -> list[TurnUsage]:
    """The usage of each user turn of one conversation, oldest first (NotFound
    outside ``scope``). Runs of verbs that call no model are left out."""
    pk = require_conversation(scope, conversation_id, touch=False)
    runs = (
        AgentRun.objects.filter(conversation_id=pk)
        .exclude(trigger__in=NO_MODEL_TRIGGERS)
        .order_by("created_at", "pk")
        .values_list("pk", "trigger", "status", "input_tokens", "output_tokens", "cost")
    )
    groups: list[list[tuple[Any, ...]]] = []
    for run in runs:
        if not groups or run[1] in TURN_STARTS:
            groups.append([])
        groups[-1].append(run)
    last_reply = dict(
        DisplayMessage.objects.filter(
            conversation_id=pk,
            message_type="assistant",
            content_type="text",
            run__isnull=False,
        )
        .order_by()
        .values("run_id")
        .annotate(last=Max("id"))
        .values_list("run_id", "last")
    )
    return [_turn(group, last_reply) for group in groups]


def _turn(runs: list[tuple[Any, ...]], last_reply: dict[Any, int]) -> TurnUsage:
    priced = [run[5] for run in runs if run[5] is not None]
    replies = [last_reply[run[0]] for run in runs if run[0] in last_reply]
    return TurnUsage(
        run_ids=tuple(run[0] for run in runs),
        trigger=str(runs[0][1]),
        reply_id=max(replies) if replies else None,
        active=any(run[2] in ACTIVE_RUN_STATUSES for run in runs),
        usage=_totals(
            {
                "total_runs": len(runs),
                "total_input_tokens": sum(run[3] for run in runs),
                "total_output_tokens": sum(run[4] for run in runs),
                "total_cost": sum(priced, Decimal(0)),
                "total_unpriced_runs": len(runs) - len(priced),
                "total_turns": sum(run[1] in PERSON_TURNS for run in runs),
                "total_regenerations": sum(run[1] == "regenerate" for run in runs),
            }
        ),
    )
