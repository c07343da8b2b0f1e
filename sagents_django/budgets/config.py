"""``SAGENTS["BUDGETS"]``: read and checked here, so ``conf.py`` only names the key.

None (the default) leaves budgets off: every model call is still written to the
usage ledger, nothing is checked before it. A dict turns them on::

    "BUDGETS": {
        # Limits that apply when no Budget row does (rows win, then BUDGET_FOR).
        "DEFAULTS": [{"scope": "user", "period": "month", "limit": "20"}],
        # A function budget_for(scope) -> list of such dicts: plans, contracts.
        "BUDGET_FOR": "myapp.plans.budget_for",
        # Past a limit's soft share: "notify" (a signal and a line in the chat) or
        # "approve" (the call waits for someone with sagents_django.raise_budget).
        "SOFT_ACTION": "notify",
        # A model litellm does not price: "block" (no call while a budget applies)
        # or a rate in USD per million tokens: {"input": "5", "output": "15"}.
        "UNPRICED": "block",
        # The reply's size assumed when the model's params set no max_tokens.
        "MAX_OUTPUT_TOKENS": 4096,
        # A reservation a crashed worker never settled is given back after this.
        "RESERVATION_SECONDS": 900,
    }
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

SCOPES = [
    ("site", "the whole site"),
    ("owner", "an owner (tenant)"),
    ("user", "a user"),
    ("conversation", "a conversation"),
]
PERIODS = [("day", "per day"), ("month", "per month"), ("total", "in all")]
MAX_LIMIT = Decimal("1000000")
"""The largest limit anyone may set (USD): more is a typo, not a budget."""
SoftAction = Literal["notify", "approve"]
KEYS = frozenset(
    (
        "DEFAULTS",
        "BUDGET_FOR",
        "SOFT_ACTION",
        "UNPRICED",
        "MAX_OUTPUT_TOKENS",
        "RESERVATION_SECONDS",
    )
)
SCOPE_NAMES = frozenset(name for name, _ in SCOPES)
PERIOD_NAMES = frozenset(name for name, _ in PERIODS)


@dataclass(frozen=True, kw_only=True, slots=True)
class LimitSpec:
    """A limit from settings or a plan: applies to the acting scope's own key."""

    scope: str
    period: str
    limit: Decimal
    soft_percent: int = 80


@dataclass(frozen=True, kw_only=True, slots=True)
class BudgetSettings:
    defaults: tuple[LimitSpec, ...] = ()
    budget_for: str | None = None
    soft_action: SoftAction = "notify"
    unpriced_rate: tuple[Decimal, Decimal] | None = None
    """USD per million (input, output) tokens; None: an unpriced model is blocked."""
    max_output_tokens: int = 4096
    reservation_seconds: int = 900
    extra: dict[str, Any] = field(default_factory=dict)


def limit_spec(value: Any) -> LimitSpec:
    """A limit dict checked (ValueError names what is wrong)."""
    if not isinstance(value, Mapping):
        raise ValueError(f"a limit is a dict, not {value!r}")
    unknown = set(value) - {"scope", "period", "limit", "soft_percent"}
    if unknown:
        raise ValueError(f"a limit has no key {sorted(unknown)[0]!r}")
    scope, period = value.get("scope"), value.get("period", "month")
    if scope not in SCOPE_NAMES:
        raise ValueError(f"a limit's scope is one of {sorted(SCOPE_NAMES)}: {scope!r}")
    if period not in PERIOD_NAMES:
        raise ValueError(
            f"a limit's period is one of {sorted(PERIOD_NAMES)}: {period!r}"
        )
    amount = money(value.get("limit"), what="limit")
    if amount > MAX_LIMIT:
        raise ValueError(f"a limit above {MAX_LIMIT} USD is refused: {amount}")
    soft = value.get("soft_percent", 80)
    if isinstance(soft, bool) or not isinstance(soft, int) or not 1 <= soft <= 100:
        raise ValueError(f"soft_percent is an int from 1 to 100, not {soft!r}")
    return LimitSpec(scope=scope, period=period, limit=amount, soft_percent=soft)


def money(value: Any, *, what: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | str | Decimal):
        raise ValueError(f"{what} is a decimal string or an int, not {value!r}")
    try:
        amount = Decimal(value)
    except (InvalidOperation, ValueError):
        raise ValueError(f"{what} is not a number: {value!r}") from None
    if not amount.is_finite() or amount < 0:
        raise ValueError(f"{what} must be a finite number >= 0, not {value!r}")
    return amount


def parse(value: Any) -> BudgetSettings | None:
    """The settings, or None when budgets are off; ValueError when malformed."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValueError(f"must be None or a dict, not {value!r}")
    unknown = set(value) - KEYS
    if unknown:
        raise ValueError(f"has no key {sorted(unknown)[0]!r}")
    defaults = value.get("DEFAULTS", [])
    if not isinstance(defaults, list | tuple):
        raise ValueError(f"['DEFAULTS'] is a list of limits, not {defaults!r}")
    budget_for = value.get("BUDGET_FOR")
    if budget_for is not None and (
        not isinstance(budget_for, str) or "." not in budget_for
    ):
        raise ValueError(f"['BUDGET_FOR'] is a dotted path, not {budget_for!r}")
    action = value.get("SOFT_ACTION", "notify")
    if action not in ("notify", "approve"):
        raise ValueError(f"['SOFT_ACTION'] is 'notify' or 'approve', not {action!r}")
    rate = _unpriced(value.get("UNPRICED", "block"))
    max_output = value.get("MAX_OUTPUT_TOKENS", 4096)
    seconds = value.get("RESERVATION_SECONDS", 900)
    for name, number in (
        ("MAX_OUTPUT_TOKENS", max_output),
        ("RESERVATION_SECONDS", seconds),
    ):
        if isinstance(number, bool) or not isinstance(number, int) or number < 1:
            raise ValueError(f"[{name!r}] is a positive int, not {number!r}")
    return BudgetSettings(
        defaults=tuple(limit_spec(item) for item in defaults),
        budget_for=budget_for,
        soft_action=action,
        unpriced_rate=rate,
        max_output_tokens=max_output,
        reservation_seconds=seconds,
    )


def _unpriced(value: Any) -> tuple[Decimal, Decimal] | None:
    if value == "block":
        return None
    if isinstance(value, Mapping) and set(value) == {"input", "output"}:
        return (
            money(value["input"], what="UNPRICED['input']"),
            money(value["output"], what="UNPRICED['output']"),
        )
    raise ValueError(
        f"['UNPRICED'] is 'block' or {{'input': ..., 'output': ...}} (USD per "
        f"million tokens), not {value!r}"
    )


def problem(value: Any) -> str | None:
    """``conf.VALIDATORS``' check for the key."""
    try:
        parse(value)
    except ValueError as exc:
        return f"{exc}, in {value!r}" if isinstance(value, Mapping) else str(exc)
    return None


def budget_settings() -> BudgetSettings | None:
    """The site's budget settings (checked: ImproperlyConfigured when malformed)."""
    from sagents_django.conf import sagents_settings

    return sagents_settings.BUDGETS
