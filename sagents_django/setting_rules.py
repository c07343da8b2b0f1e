"""What a valid value of each ``SAGENTS`` key is: ``VALIDATORS`` maps every key to a
check answering what is wrong with a value, as the end of a sentence, or None.
``conf.problem`` words it; ``checks.py`` reports it with the key's id and hint.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final, Literal

from sagents_django.approvals import config as approval_config
from sagents_django.budgets.config import problem as budgets_problem

Executor = Literal["inline", "celery"]
EXECUTORS: Final[tuple[Executor, ...]] = ("inline", "celery")

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
