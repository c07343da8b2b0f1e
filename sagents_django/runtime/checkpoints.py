"""Step checkpoints: what each step of a running turn added, written as it ends.

A whole-state save grows with the conversation (1,000 messages is about 1 MB); a step
writes only the messages added since the checkpoint before it, plus the small rest of
the state (todos, metadata, interrupt). The turn's end folds them into the state row
(one whole save) and deletes them. A worker that takes the run over loads the state
row, then the steps built on its revision, and goes on from the last one.

Every write is fenced by the writer's lease (``runs.held``): a worker that lost the
run cannot add to it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from sagents_django.core import Message, State
from sagents_django.core.serialization import serialize_state
from sagents_django.core.todo import Todo
from sagents_django.models import AgentRun, AgentStep
from sagents_django.services.sql import insert_where

from . import runs


@dataclass(eq=False)
class Checkpoints:
    """The checkpoints of one attempt at a run, from the state it last wrote."""

    lease: runs.Lease
    base_revision: int
    state: State
    """The state as of the last checkpoint (or as loaded)."""
    number: int = 0
    declared: bool = False
    """Whether the run's row names ``base_revision`` as its checkpoint base."""

    def changed(self, state: State) -> bool:
        """Whether ``state`` differs from the last checkpoint (no database)."""
        return self._delta(state) is not None

    def _delta(self, state: State) -> tuple[int, list[Message]] | None:
        """(messages kept, messages added) since the last checkpoint; None when
        nothing changed."""
        before = self.state
        keep = _kept(before.messages, state.messages)
        added = state.messages[keep:]
        if (
            not added
            and keep == len(before.messages)
            and state.todos is before.todos
            and state.metadata is before.metadata
            and state.interrupt_data is before.interrupt_data
        ):
            return None
        return keep, list(added)

    def write(self, state: State) -> bool:
        """Checkpoint ``state`` if it changed (on a database thread); whether a step
        was written. Raises ``runs.LeaseLost`` when the run was taken over."""
        delta = self._delta(state)
        if delta is None:
            return False
        keep, added = delta
        data = serialize_state(replace(state, messages=added))
        step = AgentStep(
            run_id=self.lease.run_id,
            number=self.number + 1,
            base_revision=self.base_revision,
            keep=keep,
            messages=data["messages"],
            todos=data["todos"],
            metadata=data["metadata"],
            interrupt_data=data["interrupt_data"],
        )
        with transaction.atomic(savepoint=False):
            if not self.declared:
                # The run names the revision its steps build on, once.
                if not runs.held(self.lease).update(
                    checkpoint_revision=self.base_revision, heartbeat_at=timezone.now()
                ):
                    raise runs.LeaseLost(f"Run {self.lease.run_id} was taken over")
                step.save(force_insert=True)
            elif not insert_where(step, AgentRun, **runs.holding(self.lease)):
                # One statement: the step goes in only while the lease holds.
                raise runs.LeaseLost(f"Run {self.lease.run_id} was taken over")

            def advance() -> None:
                # Only once it is in the database: a unit that fails and is tried
                # again writes this step again.
                self.declared = True
                self.number += 1
                self.state = state

            transaction.on_commit(advance)
        return True


def resume_from(lease: runs.Lease, base_revision: int, state: State) -> Checkpoints:
    """The checkpoints of a run taken over: ``state`` (the state row, at
    ``base_revision``) with the steps built on it applied."""
    steps = list(
        AgentStep.objects.filter(
            run_id=lease.run_id, base_revision=base_revision
        ).order_by("number")
    )
    for step in steps:
        state = apply_step(state, step)
    number = (
        AgentStep.objects.filter(run_id=lease.run_id).aggregate(n=Max("number"))["n"]
        or 0
    )
    return Checkpoints(
        lease=lease,
        base_revision=base_revision,
        state=state,
        number=number,
        declared=True,
    )


def apply_step(state: State, step: AgentStep) -> State:
    messages = [Message.from_dict(m) for m in step.messages]
    return replace(
        state,
        messages=[*state.messages[: step.keep], *messages],
        todos=[Todo.from_dict(t) for t in step.todos],
        metadata=step.metadata if isinstance(step.metadata, dict) else {},
        interrupt_data=step.interrupt_data,
    )


def fold(run_id: Any) -> None:
    """The turn's whole state was saved: its steps are history."""
    AgentStep.objects.filter(run_id=run_id).delete()


def _kept(before: list[Message], now: list[Message]) -> int:
    """How many of ``before`` start ``now`` unchanged (all of them, unless a
    middleware rewrote the history, e.g. a summary): 0 then, a whole write."""
    if len(now) < len(before):
        return 0
    for old, new in zip(before, now, strict=False):
        if old is not new and old != new:
            return 0
    return len(before)
