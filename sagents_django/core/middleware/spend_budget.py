"""SpendBudget: a model call is paid for before it is made.

Why a middleware: ``before_model`` runs right before every model call of the loop
(after the other middleware changed the history, e.g. a summary), so the estimate
prices the request that is about to be sent. The estimate is the prompt's tokens
(``core.tokens.count_tokens``: litellm's ``token_counter`` for OpenAI and Claude
names, offline) plus the call's largest possible reply (``max_tokens`` in the
model's parameters, else ``max_output_tokens``). The core knows no database: where
the money is kept is a ``BudgetStore`` the caller injects (the Django runtime's
reserves against budget rows in one transaction, and settles the reservation with
the call's real usage when the reply is recorded).

What the store answers:

- ``allow``: the call goes on (a reservation is held until the reply is recorded;
  ``on_turn_end`` releases one the turn never settled: a failed or cancelled call);
- ``warn``: it goes on, and ``budget_warning`` is announced (the store, which knows
  the site, also writes its line in the chat);
- ``approve``: the call waits for a person allowed to raise the budget (a
  ``CustomInterrupt`` of type ``budget_approval``, resumed through the usual
  approvals path; the store checks who decided);
- ``exhausted``: the turn ends before any provider request (``Stop`` with the
  reason ``budget_exhausted``), and ``budget_exhausted`` is announced.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..approvals import CustomInterrupt
from ..events import emit
from ..exceptions import ConfigurationError, InvalidResume
from ..messages import Message, TokenUsage
from ..tokens import TokenCache, approximate_text_tokens, count_tokens
from .base import Interrupt, Middleware, Stop, call_hook

if TYPE_CHECKING:
    from ..agent import Agent
    from ..state import State

Outcome = Literal["allow", "warn", "approve", "exhausted"]
APPROVAL_TYPE = "budget_approval"
"""The ``type`` of the interrupt a soft threshold raises when the site asks for it."""
DEFAULT_MAX_OUTPUT = 4096


@dataclass(kw_only=True, slots=True)
class CallEstimate:
    """What a model call may cost, in tokens: the store prices it."""

    model: str
    """The litellm model string the call goes to."""
    prompt_tokens: int
    """The system prompt, tools and history, as counted before the call."""
    max_output_tokens: int
    """The most the reply may use."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(kw_only=True, slots=True)
class BudgetDecision:
    """The store's answer to one estimate."""

    outcome: Outcome
    message: str = ""
    """What a person reads (the store translates it)."""
    data: dict[str, Any] = field(default_factory=dict)
    """JSON details: the budget's scope, period, limit, spent and what is left."""
    hold: Any = None
    """For ``allow`` and ``warn``: the store's token for what it reserved, given
    back to ``settle`` or ``release``; None when nothing was reserved."""


class BudgetStore(Protocol):
    """Where spend is kept. Each method may be sync or ``async``."""

    def reserve(self, estimate: CallEstimate) -> BudgetDecision | Awaitable[Any]:
        """Hold the estimate's price against every budget that applies, atomically
        (concurrent turns must not both fit the last dollar), or say why not."""
        ...

    def settle(self, hold: Any, usage: TokenUsage | None) -> Any:
        """The call behind ``hold`` used ``usage`` (None: it did not say): count
        it, drop the hold. A hold already settled (the caller's runtime records
        replies itself) is left alone."""
        ...

    def release(self, hold: Any) -> Any:
        """Give back a hold whose call never replied (it failed or was cancelled)."""
        ...

    def decide(self, data: dict[str, Any], approved: bool) -> Any:
        """A person answered a ``budget_approval`` interrupt; raise ``InvalidResume``
        when they may not (only someone allowed to raise the budget may)."""
        ...


class SpendBudget(Middleware):
    """Reserves each model call's estimated cost before it is made (see module)."""

    def __init__(
        self,
        *,
        store: BudgetStore,
        max_output_tokens: int = DEFAULT_MAX_OUTPUT,
        **options: Any,
    ) -> None:
        if not hasattr(store, "reserve"):
            raise ConfigurationError(f"SpendBudget needs a BudgetStore, not {store!r}")
        if (
            isinstance(max_output_tokens, bool)
            or not isinstance(max_output_tokens, int)
            or max_output_tokens < 1
        ):
            raise ConfigurationError(
                f"max_output_tokens must be a positive int, not {max_output_tokens!r}"
            )
        # The store is an option: a sub-agent that inherits the stack (its
        # entry's ``to_raw_spec``) reserves through the same store.
        super().__init__(store=store, max_output_tokens=max_output_tokens, **options)
        self.store = store
        self.max_output_tokens = max_output_tokens
        self.model = ""
        self.fixed_tokens = -1
        self._agent: Agent | None = None
        self.cache = TokenCache()
        self.hold: Any = None
        """What this middleware's last call holds until it is settled."""
        self.usage: TokenUsage | None = None
        """The usage its last call reported."""

    def attach(self, agent: Agent) -> None:
        self.model = agent.model.name
        params = getattr(agent.model, "params", None) or {}
        limit = params.get("max_tokens") or params.get("max_completion_tokens")
        if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
            self.max_output_tokens = limit
        self._agent = agent
        self.fixed_tokens = -1  # counted on first use: the agent is still being built

    def _fixed(self) -> int:
        """The system prompt's and the tools' tokens (the same every call)."""
        agent = self._agent
        if self.fixed_tokens < 0 and agent is not None:
            prompt = agent.assembled_system_prompt
            tokens = count_tokens([Message.system(prompt)], self.model) if prompt else 0
            if agent.openai_tools:
                tokens += approximate_text_tokens(json.dumps(agent.openai_tools))
            self.fixed_tokens = tokens
        return max(self.fixed_tokens, 0)

    def estimate(self, state: State) -> CallEstimate:
        history = count_tokens(state.messages, self.model, cache=self.cache)
        return CallEstimate(
            model=self.model,
            prompt_tokens=self._fixed() + history,
            max_output_tokens=self.max_output_tokens,
        )

    def callbacks(self) -> dict[str, Any]:
        def used(_execution: Any, usage: TokenUsage) -> None:
            self.usage = usage

        return {"on_llm_token_usage": used}

    async def _close(self, *, replied: bool) -> None:
        """Settle (or give back) the last call's hold: a runtime that records
        replies settles its own calls first, and then this does nothing."""
        hold, usage = self.hold, self.usage
        self.hold = self.usage = None
        if hold is None:
            return
        if replied or usage is not None:
            await call_hook(self.store.settle, hold, usage)
        else:
            await call_hook(self.store.release, hold)

    async def before_model(self, state: State) -> State | Interrupt | Stop:
        # The call before this one replied (the loop goes on after a reply).
        await self._close(replied=True)
        decision = await call_hook(self.store.reserve, self.estimate(state))
        if not isinstance(decision, BudgetDecision):
            raise ConfigurationError(
                f"BudgetStore.reserve returned {decision!r}, not a BudgetDecision"
            )
        if decision.outcome == "exhausted":
            emit("budget_exhausted", {"message": decision.message, **decision.data})
            return Stop(
                state=state,
                reason="budget_exhausted",
                message=decision.message,
                data=decision.data,
            )
        self.hold = decision.hold
        if decision.outcome == "warn":
            emit("budget_warning", {"message": decision.message, **decision.data})
        elif decision.outcome == "approve":
            data = {"type": APPROVAL_TYPE, "message": decision.message, **decision.data}
            return Interrupt(state=state, data=CustomInterrupt(data=data))
        return state

    async def handle_resume(
        self, agent: Agent, state: State, resume_data: Any, **options: Any
    ) -> State | None:
        data = state.interrupt_data or {}
        if data.get("type") != APPROVAL_TYPE:
            return None
        approved = _approved(resume_data)
        await call_hook(self.store.decide, dict(data), approved)
        # Approved: the call is reserved again and goes on; declined: the next
        # reserve answers "exhausted" and the turn ends.
        return replace(state, interrupt_data=None)

    async def on_turn_end(self, state: State) -> State:
        # A call that reported usage replied; one that did not failed or was
        # cancelled before its end: its hold is given back.
        await self._close(replied=False)
        return state

    def restorable_interrupt(self, interrupt_data: dict[str, Any]) -> bool:
        return interrupt_data.get("type") == APPROVAL_TYPE

    def debug_summary(self) -> dict[str, Any]:
        return {"max_output_tokens": self.max_output_tokens, "model": self.model}


def _approved(resume_data: Any) -> bool:
    """``[{"type": "approve"}]``, ``{"type": "approve"}`` or ``"approve"``: yes;
    ``reject`` (any of those forms): no; anything else is refused."""
    item = resume_data[0] if isinstance(resume_data, list) and resume_data else None
    item = resume_data if item is None else item
    kind = item.get("type") if isinstance(item, dict) else item
    if kind in ("approve", "reject"):
        return bool(kind == "approve")
    raise InvalidResume(
        f"A budget approval takes 'approve' or 'reject', not {resume_data!r}"
    )
