"""A turn's usage ledger and budget: what the runtime attaches to each turn.

``TurnLedger`` writes one ``UsageEntry`` per model call inside the transaction
that records the reply (``runtime.recorder``): the step's display rows, its
checkpoint and its ledger row commit together, so the ledger costs one INSERT per
call and no commit (``bench/durable_step.py``), and a takeover never counts a reply
twice. With budgets on, the same transaction settles the call's reservation.

``TurnBudget`` is the ``BudgetStore`` the core's ``SpendBudget`` middleware calls
before each model call: it runs ``BudgetBook`` on a database thread and, when a soft
threshold is crossed, writes the chat's line and sends ``budget_threshold_reached``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from django.db import transaction
from django.utils import timezone

from sagents_django.core import Agent, SpendBudget, TokenUsage
from sagents_django.core.middleware.spend_budget import BudgetDecision, CallEstimate
from sagents_django.scope import Scope

from .config import BudgetSettings, budget_settings
from .limits import Subject
from .models import UsageEntry
from .store import BudgetBook, price

logger = logging.getLogger(__name__)


class TurnLedger:
    """The ledger rows of one turn (``write`` runs inside the recorder's unit)."""

    def __init__(
        self,
        *,
        scope: Scope,
        conversation_id: Any,
        run_id: Any,
        model: str,
        book: BudgetBook | None = None,
        budget: SpendBudget | None = None,
    ) -> None:
        self.subject = Subject.of(scope, conversation_id)
        self.conversation_id = conversation_id
        self.run_id = run_id
        self.model = model
        self.book = book
        self.budget = budget
        """The turn's own ``SpendBudget`` (its sub-agents' settle themselves)."""
        self.usage: TokenUsage | None = None
        self.replied = False

    def noted(self, usage: TokenUsage) -> None:
        """A call reported its usage (before its reply is recorded)."""
        self.usage = usage

    def reply(self) -> None:
        """A call's reply is about to be recorded: its ledger row goes with it."""
        self.replied = True

    def write(self) -> None:
        """On a database thread, inside the reply's transaction."""
        if not self.replied:
            return
        token = self.budget.hold if self.budget is not None else None
        self.record(self.model, self.usage, token[0] if token else None)
        written = self.usage

        def done() -> None:
            # Only once committed: a unit tried again writes this row again.
            if self.usage is written:
                self.usage, self.replied = None, False

        transaction.on_commit(done)

    def record(self, model: str, usage: TokenUsage | None, hold: Any) -> None:
        """One call's ledger row, and its hold settled (in the caller's
        transaction)."""
        from sagents_django.runtime.usage import cost_of

        known = usage or TokenUsage()
        config = self.book.config if self.book is not None else None
        cost = cost_of(model, known) if usage is not None else None
        charged = price(model, known, config) if usage is not None else None
        UsageEntry.objects.create(
            created_at=timezone.now(),
            conversation_id=self.conversation_id,
            run_id=self.run_id,
            user_id=self.subject.user_pk,
            owner_key=str(self.subject.owner_pk or "")[:64],
            model=model[:255],
            input_tokens=known.input,
            output_tokens=known.output,
            cost=cost,
            charged=charged,
        )
        if self.book is not None:
            self.book.settle(hold, charged)

    def record_alone(self, model: str, usage: TokenUsage | None, hold: Any) -> None:
        """A call the recorder did not see (a sub-agent's): its row and its
        settlement in a transaction of their own."""
        with transaction.atomic():
            self.record(model, usage, hold)


class TurnBudget:
    """The ``BudgetStore`` of one turn (async, over ``BudgetBook``)."""

    def __init__(
        self,
        book: BudgetBook,
        *,
        run_sync: Callable[[Callable[..., Any]], Callable[..., Awaitable[Any]]],
        warn: Callable[[BudgetDecision], Awaitable[None]],
    ) -> None:
        self.book = book
        self.run_sync = run_sync
        self.warn = warn
        self.ledger: TurnLedger | None = None

    async def reserve(self, estimate: CallEstimate) -> BudgetDecision:
        decision: BudgetDecision = await self.run_sync(self.book.reserve)(estimate)
        if decision.hold is not None:
            decision.hold = (decision.hold, estimate.model)
        if decision.outcome == "warn":
            try:
                await self.warn(decision)
            except Exception:
                logger.exception("Could not announce a budget warning")
        return decision

    async def settle(self, hold: Any, usage: TokenUsage | None) -> None:
        held, model = hold
        if held.id not in self.book.open or self.ledger is None:
            return  # the recorder settled it with the reply
        await self.run_sync(self.ledger.record_alone)(model, usage, held)

    async def release(self, hold: Any) -> None:
        held, _model = hold
        if held.id in self.book.open:
            await self.run_sync(self.book.release)(held)

    async def decide(self, data: dict[str, Any], approved: bool) -> None:
        await self.run_sync(self.book.decide)(data, approved)


def attach(
    agent: Agent,
    *,
    scope: Scope,
    conversation_id: Any,
    run_id: Any,
    run_sync: Any,
    warn: Callable[[BudgetDecision], Awaitable[None]],
) -> TurnLedger:
    """The turn's ledger; with budgets on, ``SpendBudget`` added to ``agent``."""
    config: BudgetSettings | None = budget_settings()
    book = store = budget = None
    if config is not None:
        book = BudgetBook(
            scope=scope, conversation_id=conversation_id, run_id=run_id, config=config
        )
        store = TurnBudget(book, run_sync=run_sync, warn=warn)
        budget = SpendBudget(store=store, max_output_tokens=config.max_output_tokens)
        agent.add_middleware(budget)
    ledger = TurnLedger(
        scope=scope,
        conversation_id=conversation_id,
        run_id=run_id,
        model=agent.model.name,
        book=book,
        budget=budget,
    )
    if store is not None:
        store.ledger = ledger
    return ledger


async def announce_warning(recorder: Any, decision: BudgetDecision) -> None:
    """A soft threshold was crossed: a line in the chat, published through the
    turn's publisher, and the ``budget_threshold_reached`` signal after commit."""
    from sagents_django.runtime.database import db
    from sagents_django.runtime.events_out import asignal
    from sagents_django.runtime.publisher import display_message_json

    note: Any = {
        "message_type": "system",
        "content_type": "notification",
        "content": {"text": decision.message, "budget": decision.data},
    }
    row = await db(recorder.display.save_synthetic_message)(
        recorder.scope, note, recorder.context()
    )
    if row is not None:
        await recorder.publisher.publish(
            "display_message_saved", {"display_message": display_message_json(row)}
        )
    await asignal(
        "budget_threshold_reached",
        conversation_id=recorder.conversation_id,
        run_id=recorder.run_id,
        user_id=getattr(recorder.scope.user, "pk", None),
        budget=decision.data,
        message=decision.message,
    )
