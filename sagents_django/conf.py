"""The one door to ``settings.SAGENTS``.

Read late (never at import, so ``override_settings`` and test settings apply), merged
over embedded defaults, cached until Django's ``setting_changed`` signal says SAGENTS
changed. What a valid value is, is said once here (``problem``): the system checks
in ``checks.py`` report it with a stable id and a hint, and the typed accessors raise
``ImproperlyConfigured`` with the same words for code that runs despite the failed
check, so a bad value fails loudly where it is read instead of as a TypeError deep
inside a save.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import cache
from types import MappingProxyType
from typing import Any, Final, Literal, cast

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from sagents_django.approvals import config as approval_config
from sagents_django.budgets.config import BudgetSettings
from sagents_django.budgets.config import parse as parse_budgets
from sagents_django.budgets.config import problem as budgets_problem

Executor = Literal["inline", "celery"]
EXECUTORS: Final[tuple[Executor, ...]] = ("inline", "celery")

DEFAULTS: Final[Mapping[str, Any]] = MappingProxyType(
    {
        # A litellm model string; the default is the offline demo model.
        "MODEL": "sagents/demo",
        # Extra keyword arguments for every litellm completion call.
        "MODEL_PARAMS": {},
        # Models litellm falls back to, in order, when MODEL fails.
        "FALLBACK_MODELS": [],
        # Where turns run: "inline" (an asyncio task in the web process) or "celery".
        "EXECUTOR": "inline",
        # The Scope class (dotted path) that get_scope() builds from a request.
        "SCOPE": "sagents_django.scope.Scope",
        # Largest JSON document (UTF-8 bytes) stored as agent state or display content.
        "MAX_STATE_BYTES": 20 * 1024 * 1024,
        # The site's agent factory (dotted path): build_agent(agent_id=, scope=,
        # filesystem_scope=) -> Agent. sagents_setup writes one and prints this line.
        "FACTORY": None,
        # The classes (dotted paths) every turn saves state and display rows with;
        # sagents_setup writes subclasses of these for the site to change.
        "AGENT_PERSISTENCE": "sagents_django.persistence.DjangoAgentPersistence",
        "DISPLAY_PERSISTENCE": (
            "sagents_django.persistence.DjangoDisplayMessagePersistence"
        ),
        # The MessagePreprocessor (dotted path to an object or a class) every
        # person's message goes through: one text shown, another sent to the model.
        # None: the factory's `message_preprocessor` attribute, if it has one.
        "MESSAGE_PREPROCESSOR": None,
        # Which virtual filesystem a conversation's agent uses when the call names
        # none (a dotted path to a function (scope, conversation) -> a scope such
        # as ("user", 42), or None); conversations given one scope share their
        # files, and their chat pages' file panels follow each other's changes.
        # None: each conversation its own, ("agent", <agent_id>).
        "FILESYSTEM_SCOPE": None,
        # A message sent while a turn runs: "enqueue" (run right after it), "reject"
        # (RunConflict) or "interrupt" (cancel the turn, then run with the message).
        "DOUBLE_TEXT": "enqueue",
        # A message sent while an approval is pending: "hold" (answered once the
        # approval is decided or dismissed) or "dismiss" (the approval is dismissed,
        # the transcript says so, and the message is answered at once).
        "WHILE_APPROVAL_PENDING": "hold",
        # Approval routing, quorum and expiry (approvals/config.py says each key).
        "APPROVALS": {},
        # Follow-up turns of queued messages in a row before the chain is stopped.
        "MAX_QUEUED_ROUNDS": 10,
        # Seconds without a run, a viewer or a touch before a conversation counts as
        # shut down (Sagents' inactivity_timeout); None: never.
        "INACTIVITY_TIMEOUT": 300,
        # Streamed deltas are batched over this many milliseconds per event.
        "DELTA_WINDOW_MS": 20,
        # Threads (each with its own database connection) that run the database
        # work of a process's turns; None: 1 on SQLite (one writer at a time), 8 on
        # other databases.
        "DATABASE_THREADS": None,
        # A running turn renews its lease every this many seconds; a run whose lease
        # is LEASE_SECONDS old (its worker died) is taken over from its last step.
        "HEARTBEAT_SECONDS": 5,
        "LEASE_SECONDS": 30,
        # How often each worker (and an embedded process) looks for stale runs and
        # for queued runs whose task was lost (the broker was down).
        "SWEEP_SECONDS": 10,
        # Attempts at one run (the first and its takeovers) before it ends as an error.
        "MAX_ATTEMPTS": 3,
        # After SIGTERM, a web process wrapped in DrainOnSigterm answers "not
        # ready" and goes on serving this many seconds (for the load balancer to
        # notice), then closes its sockets (4503) and stops.
        "DRAIN_SECONDS": 5,
        # MCP servers whose tools a factory offers with sagents_django.mcp.mcp_tools:
        # {"name": {"command": [...]} or {"url": ..., "headers": {...}}, ...}.
        "MCP_SERVERS": {},
        # The hosts an HTTP MCP server may be on (every request is checked).
        "MCP_ALLOWED_HOSTS": [],
        # Whether mcp_tools(scope) also offers the MCP servers kept in the
        # database (StoredMcpServer rows, per user or per tenant, managed in the
        # admin): HTTP only, on MCP_ALLOWED_HOSTS, their headers naming secrets.
        "MCP_DATABASE_SERVERS": False,
        # The secrets those rows' headers name: {"tickets_token": "Bearer ..."}
        # (read them from the environment in the settings file).
        "MCP_SECRETS": {},
        # Days a conversation may stay idle (no message, no run) before
        # sagents_retention removes it; None: kept for ever.
        "RETENTION_DAYS": None,
        # A function retention_for(owner_pk, *, default) -> days or None (kept for
        # ever), asked once per conversation owner: plans, tenants' contracts.
        "RETENTION_FOR": None,
        # What retention removes: "conversations" (everything) or "contents" (the
        # state, display rows, runs and files; the conversation and title stay).
        "RETENTION_DELETES": "conversations",
        # Conversations removed per transaction by retention and erasure.
        "LIFECYCLE_BATCH": 100,
        # An export of more display rows than this is built by a Celery task (on the
        # celery executor); smaller ones are built in the request.
        "EXPORT_INLINE_MAX_ROWS": 5000,
        # The STORAGES alias export archives are kept in until downloaded.
        "EXPORT_STORAGE": "default",
        # Who a conversation may be shared with: a function (scope, conversation,
        # target) -> bool, target a user or a Group (a site with tenants refuses
        # another tenant's); None: sharing.policy.same_tenant.
        "SHARE_WITH": None,
        # Spend budgets checked before every model call (sagents_django.budgets
        # .config says the shape); None: off (the usage ledger is still written).
        "BUDGETS": None,
    }
)

DOTTED_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+\Z")
"""``module.Name`` (at least one dot); what ``import_string`` can resolve."""


def _model(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return None
    return f"must be a non-empty string, not {value!r}"


def _model_params(value: Any) -> str | None:
    if not isinstance(value, Mapping):
        return f"must be a dict, not {value!r}"
    bad = [k for k in value if not isinstance(k, str)]
    if bad:
        return f"must have string keys, not {bad[0]!r}"
    return None


def _fallback_models(value: Any) -> str | None:
    if isinstance(value, str):
        # list("gpt-4o") would be six one-letter models.
        return f"must be a list of model strings, not the string {value!r}"
    if not isinstance(value, list | tuple):
        return f"must be a list of model strings, not {value!r}"
    for index, model in enumerate(value):
        if not isinstance(model, str) or not model.strip():
            return f"must hold non-empty model strings; item {index} is {model!r}"
    return None


def _executor(value: Any) -> str | None:
    if isinstance(value, str) and value in EXECUTORS:
        return None
    return f"must be one of {EXECUTORS!r}, not {value!r}"


def _scope(value: Any) -> str | None:
    if isinstance(value, str) and DOTTED_PATH.match(value):
        return None
    return f"must be a dotted path such as 'myapp.scope.TeamScope', not {value!r}"


def _max_state_bytes(value: Any) -> str | None:
    if type(value) is int and value > 0:
        return None
    return f"must be a positive integer (bytes), not {value!r}"


def _class_path(value: Any) -> str | None:
    if isinstance(value, str) and DOTTED_PATH.match(value):
        return None
    return (
        f"must be a class's dotted path, e.g. 'myapp.agents.Persistence', not {value!r}"
    )


DOUBLE_TEXT_POLICIES: Final = ("enqueue", "reject", "interrupt")
APPROVAL_PENDING_POLICIES: Final = ("hold", "dismiss")


def _function_path(what: str, example: str) -> Callable[[Any], str | None]:
    """None or the dotted path of a function (``what``, like ``example``)."""

    def check(value: Any) -> str | None:
        if value is None or (isinstance(value, str) and DOTTED_PATH.match(value)):
            return None
        return f"must be the dotted path of {what}, e.g. {example!r}, not {value!r}"

    return check


_factory = _function_path("the agent factory", "myproject.agents.factory.build_agent")
_filesystem_scope = _function_path(
    "a function (scope, conversation) -> filesystem scope, or None",
    "myapp.agents.files.user_files",
)


def _optional_path(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and DOTTED_PATH.match(value)):
        return None
    return f"must be None or a dotted path, e.g. 'myapp.chat.Mentions', not {value!r}"


def _double_text(value: Any) -> str | None:
    if isinstance(value, str) and value in DOUBLE_TEXT_POLICIES:
        return None
    return f"must be one of {DOUBLE_TEXT_POLICIES!r}, not {value!r}"


def _approval_pending(value: Any) -> str | None:
    if isinstance(value, str) and value in APPROVAL_PENDING_POLICIES:
        return None
    return f"must be one of {APPROVAL_PENDING_POLICIES!r}, not {value!r}"


def _positive_int(
    what: str, *, allow_none: bool = False
) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if (value is None and allow_none) or (type(value) is int and value > 0):
            return None
        none = " or None" if allow_none else ""
        return f"must be a positive integer ({what}){none}, not {value!r}"

    return check


def _non_negative_number(what: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if type(value) in (int, float) and value >= 0:
            return None
        return f"must be a number of {what}, 0 or more, not {value!r}"

    return check


def _positive_number(what: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if type(value) in (int, float) and value > 0:
            return None
        return f"must be a positive number ({what}), not {value!r}"

    return check


def _mcp_servers(value: Any) -> str | None:
    from sagents_django.mcp.config import servers_problem

    return servers_problem(value)


def _mcp_allowed_hosts(value: Any) -> str | None:
    from sagents_django.mcp.config import hosts_problem

    return hosts_problem(value)


def _bool(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    return f"must be True or False, not {value!r}"


def _mcp_secrets(value: Any) -> str | None:
    from sagents_django.mcp.stored import SECRET_NAME

    # The values are secrets: a message names a key, never a value.
    if not isinstance(value, Mapping):
        return "must be a dict of secret name to the header value it stands for"
    for name, secret in value.items():
        if not isinstance(name, str) or not SECRET_NAME.match(name):
            return (
                "must have names of letters, digits and _ (at most 64), not "
                f"{str(name)[:70]!r}"
            )
        if not isinstance(secret, str) or not secret:
            return f"must have non-empty string values (see {name!r})"
        if any(ord(c) < 32 or ord(c) == 127 for c in secret):
            return (
                f"must have values without line breaks or control characters "
                f"(see {name!r}): they are sent as HTTP header values"
            )
    return None


RETENTION_DELETES: Final = ("conversations", "contents")


def _retention_deletes(value: Any) -> str | None:
    if isinstance(value, str) and value in RETENTION_DELETES:
        return None
    return f"must be one of {RETENTION_DELETES!r}, not {value!r}"


def _storage_alias(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return None
    return f"must be a STORAGES alias such as 'default', not {value!r}"


_retention_for = _function_path(
    "a function (owner_pk, *, default) -> days or None", "myapp.plans.retention_for"
)
_share_with = _function_path(
    "a function (scope, conversation, target) -> bool", "myapp.tenants.share_with"
)

VALIDATORS: Final[Mapping[str, Callable[[Any], str | None]]] = MappingProxyType(
    {
        "MODEL": _model,
        "MODEL_PARAMS": _model_params,
        "FALLBACK_MODELS": _fallback_models,
        "EXECUTOR": _executor,
        "SCOPE": _scope,
        "MAX_STATE_BYTES": _max_state_bytes,
        "FACTORY": _factory,
        "AGENT_PERSISTENCE": _class_path,
        "DISPLAY_PERSISTENCE": _class_path,
        "MESSAGE_PREPROCESSOR": _optional_path,
        "FILESYSTEM_SCOPE": _filesystem_scope,
        "DOUBLE_TEXT": _double_text,
        "WHILE_APPROVAL_PENDING": _approval_pending,
        "APPROVALS": approval_config.problem,
        "MAX_QUEUED_ROUNDS": _positive_int("rounds"),
        "INACTIVITY_TIMEOUT": _positive_int("seconds", allow_none=True),
        "DELTA_WINDOW_MS": _positive_int("milliseconds"),
        "DATABASE_THREADS": _positive_int("threads", allow_none=True),
        "HEARTBEAT_SECONDS": _positive_number("seconds"),
        "LEASE_SECONDS": _positive_number("seconds"),
        "SWEEP_SECONDS": _positive_number("seconds"),
        "MAX_ATTEMPTS": _positive_int("attempts"),
        "DRAIN_SECONDS": _non_negative_number("seconds"),
        "MCP_SERVERS": _mcp_servers,
        "MCP_ALLOWED_HOSTS": _mcp_allowed_hosts,
        "MCP_DATABASE_SERVERS": _bool,
        "MCP_SECRETS": _mcp_secrets,
        "RETENTION_DAYS": _positive_int("days", allow_none=True),
        "RETENTION_FOR": _retention_for,
        "SHARE_WITH": _share_with,
        "RETENTION_DELETES": _retention_deletes,
        "LIFECYCLE_BATCH": _positive_int("conversations"),
        "EXPORT_INLINE_MAX_ROWS": _positive_int("display rows"),
        "EXPORT_STORAGE": _storage_alias,
        "BUDGETS": budgets_problem,
    }
)
"""Every key's type check; whether SCOPE imports is checked by ``checks.py``."""


def problem(key: str, value: Any) -> str | None:
    """What is wrong with ``value`` for ``SAGENTS[key]``, as a sentence, else None."""
    why = VALIDATORS[key](value)
    return None if why is None else f"SAGENTS[{key!r}] {why}."


def user_settings() -> Any:
    """Return ``settings.SAGENTS`` as the project wrote it (``{}`` when unset)."""
    return getattr(settings, "SAGENTS", {})


@cache
def _merged() -> Mapping[str, Any]:
    user = user_settings()
    if not isinstance(user, Mapping):
        raise ImproperlyConfigured(
            f"settings.SAGENTS must be a dict, not {type(user).__name__}: {user!r}"
        )
    return MappingProxyType({**DEFAULTS, **user})


def reset_on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    """Drop the cache when SAGENTS changes (connected in ``AppConfig.ready``)."""
    if setting == "SAGENTS":
        _merged.cache_clear()


def get(key: str) -> Any:
    """Return one SAGENTS value, the embedded default when the project set none."""
    try:
        return _merged()[key]
    except KeyError:
        raise ImproperlyConfigured(f"Unknown SAGENTS setting {key!r}") from None


def valid(key: str) -> Any:
    """``get(key)``, refused with ``ImproperlyConfigured`` when it is not valid."""
    value = get(key)
    why = problem(key, value)
    if why is not None:
        raise ImproperlyConfigured(f"{why} (`manage.py check` says how to fix it.)")
    return value


class SagentsSettings:
    """Typed, validated accessors over ``settings.SAGENTS``; use ``sagents_settings``."""

    @property
    def MODEL(self) -> str:
        return cast(str, valid("MODEL"))

    @property
    def MODEL_PARAMS(self) -> dict[str, Any]:
        return dict(valid("MODEL_PARAMS"))

    @property
    def FALLBACK_MODELS(self) -> list[str]:
        return list(valid("FALLBACK_MODELS"))

    @property
    def EXECUTOR(self) -> Executor:
        return cast(Executor, valid("EXECUTOR"))

    @property
    def SCOPE(self) -> str:
        return cast(str, valid("SCOPE"))

    @property
    def MAX_STATE_BYTES(self) -> int:
        return cast(int, valid("MAX_STATE_BYTES"))

    @property
    def FACTORY(self) -> str | None:
        return cast("str | None", valid("FACTORY"))

    @property
    def AGENT_PERSISTENCE(self) -> str:
        return cast(str, valid("AGENT_PERSISTENCE"))

    @property
    def DISPLAY_PERSISTENCE(self) -> str:
        return cast(str, valid("DISPLAY_PERSISTENCE"))

    @property
    def MESSAGE_PREPROCESSOR(self) -> str | None:
        return cast("str | None", valid("MESSAGE_PREPROCESSOR"))

    @property
    def FILESYSTEM_SCOPE(self) -> str | None:
        return cast("str | None", valid("FILESYSTEM_SCOPE"))

    @property
    def DOUBLE_TEXT(self) -> str:
        return cast(str, valid("DOUBLE_TEXT"))

    @property
    def WHILE_APPROVAL_PENDING(self) -> str:
        return cast(str, valid("WHILE_APPROVAL_PENDING"))

    @property
    def APPROVALS(self) -> approval_config.ApprovalSettings:
        return approval_config.read(valid("APPROVALS"))

    @property
    def MAX_QUEUED_ROUNDS(self) -> int:
        return cast(int, valid("MAX_QUEUED_ROUNDS"))

    @property
    def INACTIVITY_TIMEOUT(self) -> int | None:
        return cast("int | None", valid("INACTIVITY_TIMEOUT"))

    @property
    def DELTA_WINDOW_MS(self) -> int:
        return cast(int, valid("DELTA_WINDOW_MS"))

    @property
    def DATABASE_THREADS(self) -> int | None:
        return cast("int | None", valid("DATABASE_THREADS"))

    @property
    def HEARTBEAT_SECONDS(self) -> float:
        return cast("float", valid("HEARTBEAT_SECONDS"))

    @property
    def LEASE_SECONDS(self) -> float:
        return cast("float", valid("LEASE_SECONDS"))

    @property
    def SWEEP_SECONDS(self) -> float:
        return cast("float", valid("SWEEP_SECONDS"))

    @property
    def MAX_ATTEMPTS(self) -> int:
        return cast("int", valid("MAX_ATTEMPTS"))

    @property
    def DRAIN_SECONDS(self) -> float:
        return cast("float", valid("DRAIN_SECONDS"))

    @property
    def MCP_SERVERS(self) -> dict[str, Any]:
        return dict(valid("MCP_SERVERS"))

    @property
    def MCP_ALLOWED_HOSTS(self) -> list[str]:
        return list(valid("MCP_ALLOWED_HOSTS"))

    @property
    def MCP_DATABASE_SERVERS(self) -> bool:
        return cast(bool, valid("MCP_DATABASE_SERVERS"))

    @property
    def MCP_SECRETS(self) -> dict[str, str]:
        return dict(valid("MCP_SECRETS"))

    @property
    def RETENTION_DAYS(self) -> int | None:
        return cast("int | None", valid("RETENTION_DAYS"))

    @property
    def RETENTION_FOR(self) -> str | None:
        return cast("str | None", valid("RETENTION_FOR"))

    @property
    def SHARE_WITH(self) -> str | None:
        return cast("str | None", valid("SHARE_WITH"))

    @property
    def RETENTION_DELETES(self) -> str:
        return cast(str, valid("RETENTION_DELETES"))

    @property
    def LIFECYCLE_BATCH(self) -> int:
        return cast(int, valid("LIFECYCLE_BATCH"))

    @property
    def EXPORT_INLINE_MAX_ROWS(self) -> int:
        return cast(int, valid("EXPORT_INLINE_MAX_ROWS"))

    @property
    def EXPORT_STORAGE(self) -> str:
        return cast(str, valid("EXPORT_STORAGE"))

    @property
    def BUDGETS(self) -> BudgetSettings | None:
        return parse_budgets(valid("BUDGETS"))


sagents_settings = SagentsSettings()
