"""System checks for ``settings.SAGENTS``; ids are stable and tested by id.

Every key is checked (``conf.VALIDATORS`` says what a valid value is), so a typo
fails ``manage.py check`` instead of every turn:

- E001 SAGENTS is not a dict
- E002 MODEL, E003 MODEL_PARAMS, E004 EXECUTOR, E005 FALLBACK_MODELS,
  E009 MAX_STATE_BYTES: a value of the wrong type or outside its closed set
- E006 SCOPE is not a dotted path, E007 it cannot be imported, E008 it does not
  name a scope class (a subclass of ``sagents_django.scope.Scope``: the runtime
  refuses any other scope)
- E010 FACTORY, E011 DOUBLE_TEXT, E025 WHILE_APPROVAL_PENDING, E012 MAX_QUEUED_ROUNDS, E013 INACTIVITY_TIMEOUT,
  E014 DELTA_WINDOW_MS, E016 DATABASE_THREADS: a value of the wrong type or outside its closed set
- E020 HEARTBEAT_SECONDS, E021 LEASE_SECONDS, E022 SWEEP_SECONDS, E023 MAX_ATTEMPTS:
  not a positive number; E024 LEASE_SECONDS is not above twice HEARTBEAT_SECONDS
  (a living turn would look dead between two beats)
- E030 DRAIN_SECONDS: not a number of seconds, 0 or more
- E026 MESSAGE_PREPROCESSOR is not a dotted path; E027 it cannot be imported or
  has no ``preprocess``
- E028 FILESYSTEM_SCOPE is not a dotted path; E029 it cannot be imported or is not
  callable
- E040 MCP_SERVERS: a server's options are not valid (a command given as a string,
  an unknown option, a bad name or prefix...); E041 MCP_ALLOWED_HOSTS is not a
  list of host names; E042 an HTTP server's host is not in MCP_ALLOWED_HOSTS;
  E043 MCP_DATABASE_SERVERS is not a bool; E044 MCP_SECRETS is not a dict of
  secret names to header values (no value is ever quoted)
- E050 RETENTION_DAYS, E051 RETENTION_FOR, E052 RETENTION_DELETES, E053
  LIFECYCLE_BATCH, E054 EXPORT_INLINE_MAX_ROWS, E055 EXPORT_STORAGE: a value of
  the wrong type or outside its closed set
- E060 SHARE_WITH is not a dotted path to a function
- E065 BUDGETS: not None or a dict of the shape ``budgets.config`` documents (a
  negative or absurd limit, an unknown scope or period, a bad UNPRICED rate...)
- E070 APPROVALS: an unknown key, or a value of the wrong type (a permission not
  named "app_label.codename", a QUORUM under 2...)
- E015 FACTORY cannot be imported or is not callable
- E017 AGENT_PERSISTENCE, E018 DISPLAY_PERSISTENCE: not a dotted path; E019 one of
  them cannot be imported or is not a class
- W001 a key this version does not know (a typo, usually)
- W002 Channels is installed but no channel layer is configured: the WebSocket
  endpoints would have nothing to send through
- E100 the scope class cannot resolve the conversation model's owner
- E101 the chat pages are mounted but ``django_htmx`` is not in INSTALLED_APPS
  (every page would fail with "'django_htmx' is not a registered tag library")
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django.core import checks
from django.utils.module_loading import import_string

from sagents_django import conf

IDS = {
    "MODEL": "sagents_django.E002",
    "MODEL_PARAMS": "sagents_django.E003",
    "EXECUTOR": "sagents_django.E004",
    "FALLBACK_MODELS": "sagents_django.E005",
    "SCOPE": "sagents_django.E006",
    "MAX_STATE_BYTES": "sagents_django.E009",
    "FACTORY": "sagents_django.E010",
    "AGENT_PERSISTENCE": "sagents_django.E017",
    "DISPLAY_PERSISTENCE": "sagents_django.E018",
    "DOUBLE_TEXT": "sagents_django.E011",
    "MESSAGE_PREPROCESSOR": "sagents_django.E026",
    "FILESYSTEM_SCOPE": "sagents_django.E028",
    "WHILE_APPROVAL_PENDING": "sagents_django.E025",
    "MAX_QUEUED_ROUNDS": "sagents_django.E012",
    "INACTIVITY_TIMEOUT": "sagents_django.E013",
    "DELTA_WINDOW_MS": "sagents_django.E014",
    "DATABASE_THREADS": "sagents_django.E016",
    "HEARTBEAT_SECONDS": "sagents_django.E020",
    "LEASE_SECONDS": "sagents_django.E021",
    "SWEEP_SECONDS": "sagents_django.E022",
    "MAX_ATTEMPTS": "sagents_django.E023",
    "DRAIN_SECONDS": "sagents_django.E030",
    "MCP_SERVERS": "sagents_django.E040",
    "MCP_ALLOWED_HOSTS": "sagents_django.E041",
    "MCP_DATABASE_SERVERS": "sagents_django.E043",
    "MCP_SECRETS": "sagents_django.E044",
    "RETENTION_DAYS": "sagents_django.E050",
    "RETENTION_FOR": "sagents_django.E051",
    "RETENTION_DELETES": "sagents_django.E052",
    "LIFECYCLE_BATCH": "sagents_django.E053",
    "EXPORT_INLINE_MAX_ROWS": "sagents_django.E054",
    "EXPORT_STORAGE": "sagents_django.E055",
    "SHARE_WITH": "sagents_django.E060",
    "BUDGETS": "sagents_django.E065",
    "APPROVALS": "sagents_django.E070",
}
"""The check id of each key's type check."""

HINTS = {
    "FACTORY:import": "Name the build_agent function sagents_setup wrote, e.g. "
    '"myproject.agents.factory.build_agent".',
    "MODEL": 'Use a litellm model string such as "openai/gpt-4o-mini", or '
    '"sagents/demo" for the offline demo model.',
    "MODEL_PARAMS": 'Pass litellm keyword arguments, e.g. {"temperature": 0}.',
    "EXECUTOR": 'Use "inline" to run turns in the web process, "celery" to run '
    "them on Celery workers.",
    "FALLBACK_MODELS": 'Use a list, even for one model: ["openai/gpt-4o-mini"].',
    "SCOPE": 'Name the scope class by its dotted path, e.g. "myapp.scope.TeamScope".',
    "MAX_STATE_BYTES": "Give a number of bytes, e.g. 20 * 1024 * 1024 (not a string "
    'such as "20MB").',
    "FACTORY": "manage.py sagents_setup writes a factory and prints this setting.",
    "AGENT_PERSISTENCE": "manage.py sagents_setup writes a subclass and prints this "
    "setting; the default is sagents_django.persistence.DjangoAgentPersistence.",
    "DISPLAY_PERSISTENCE": "manage.py sagents_setup writes a subclass and prints this "
    "setting; the default is "
    "sagents_django.persistence.DjangoDisplayMessagePersistence.",
    "DOUBLE_TEXT": '"enqueue" runs a message sent during a turn right after it.',
    "MESSAGE_PREPROCESSOR": "Name an object or class with preprocess(message, "
    'context), e.g. "myapp.chat.Mentions", or leave it unset.',
    "FILESYSTEM_SCOPE": "Name a function (scope, conversation) -> a scope such as "
    '("user", 42), e.g. "myapp.agents.files.user_files", or leave it unset.',
    "WHILE_APPROVAL_PENDING": '"hold" answers a message sent while an approval is '
    'pending once it is decided; "dismiss" dismisses the approval.',
    "MAX_QUEUED_ROUNDS": "Give a number of turns, e.g. 10.",
    "INACTIVITY_TIMEOUT": "Give seconds, e.g. 300, or None to never time out.",
    "DELTA_WINDOW_MS": "Give milliseconds, e.g. 20.",
    "DATABASE_THREADS": "Give a number of threads, e.g. 8, or None to choose by "
    "database.",
    "HEARTBEAT_SECONDS": "Give seconds, e.g. 5.",
    "LEASE_SECONDS": "Give seconds, e.g. 30 (more than twice HEARTBEAT_SECONDS).",
    "SWEEP_SECONDS": "Give seconds, e.g. 10.",
    "MAX_ATTEMPTS": "Give a number of attempts, e.g. 3.",
    "DRAIN_SECONDS": "Give seconds, e.g. 5 (0: close the sockets and stop at once).",
    "MCP_SERVERS": 'Name each server with its options: {"docs": {"command": '
    '["python", "-m", "docs_server"]}} or {"tickets": {"url": '
    '"https://mcp.example.com/mcp", "headers": {...}}}.',
    "MCP_ALLOWED_HOSTS": 'List host names: ["mcp.example.com"].',
    "MCP_DATABASE_SERVERS": "True offers the MCP servers of the database's "
    "StoredMcpServer rows; False (the default) does not.",
    "MCP_SECRETS": 'Name each secret: {"tickets_token": os.environ['
    '"TICKETS_TOKEN"]}; a row\'s header names it.',
    "RETENTION_DAYS": "Give days, e.g. 365, or None to keep conversations for ever.",
    "RETENTION_FOR": "Name a function (owner_pk, *, default) -> days or None, e.g. "
    '"myapp.plans.retention_for", or leave it unset.',
    "RETENTION_DELETES": '"conversations" removes idle conversations whole; '
    '"contents" keeps the conversation and its title.',
    "LIFECYCLE_BATCH": "Give a number of conversations, e.g. 100.",
    "EXPORT_INLINE_MAX_ROWS": "Give a number of display rows, e.g. 5000.",
    "EXPORT_STORAGE": 'Name a STORAGES alias, e.g. "default".',
    "SHARE_WITH": "Name a function (scope, conversation, target) -> bool, e.g. "
    '"myapp.tenants.share_with", or leave it unset.',
    "BUDGETS": 'Leave it None (off), or e.g. {"DEFAULTS": [{"scope": "user", '
    '"period": "month", "limit": "20"}]}; docs/budgets.md lists every key.',
    "APPROVALS": 'A dict such as {"PERMISSIONS": {"write_file": '
    '"myapp.approve_writes"}, "HIGH_RISK": ["delete_file"]}; docs/approvals.md '
    "lists its keys.",
}


def check_sagents_settings(**kwargs: Any) -> list[checks.CheckMessage]:
    user = conf.user_settings()
    if not isinstance(user, Mapping):
        return [
            checks.Error(
                f"settings.SAGENTS must be a dict, not {type(user).__name__}.",
                hint='Set SAGENTS = {"MODEL": "sagents/demo"} or remove the setting.',
                id="sagents_django.E001",
            )
        ]

    messages: list[checks.CheckMessage] = []
    for key in conf.DEFAULTS:
        why = conf.problem(key, user.get(key, conf.DEFAULTS[key]))
        if why is not None:
            messages.append(checks.Error(why, hint=HINTS[key], id=IDS[key]))
    scope = user.get("SCOPE", conf.DEFAULTS["SCOPE"])
    if conf.problem("SCOPE", scope) is None:
        messages.extend(_check_scope_class(scope))
    factory = user.get("FACTORY")
    if factory is not None and conf.problem("FACTORY", factory) is None:
        messages.extend(_check_function("FACTORY", factory, "sagents_django.E015"))
    preprocessor = user.get("MESSAGE_PREPROCESSOR")
    if (
        preprocessor is not None
        and conf.problem("MESSAGE_PREPROCESSOR", preprocessor) is None
    ):
        messages.extend(_check_preprocessor(preprocessor))
    filesystem_scope = user.get("FILESYSTEM_SCOPE")
    if (
        filesystem_scope is not None
        and conf.problem("FILESYSTEM_SCOPE", filesystem_scope) is None
    ):
        messages.extend(
            _check_function("FILESYSTEM_SCOPE", filesystem_scope, "sagents_django.E029")
        )
    messages.extend(_check_lease(user))
    messages.extend(_check_mcp_hosts(user))
    for key in ("AGENT_PERSISTENCE", "DISPLAY_PERSISTENCE"):
        path = user.get(key, conf.DEFAULTS[key])
        if conf.problem(key, path) is None:
            messages.extend(_check_class(key, path))
    unknown = sorted(set(user) - set(conf.DEFAULTS), key=repr)
    if unknown:
        messages.append(
            checks.Warning(
                f"Unknown SAGENTS keys: {', '.join(map(repr, unknown))}.",
                hint=f"Known keys: {', '.join(conf.DEFAULTS)}.",
                id="sagents_django.W001",
            )
        )
    return messages


def _check_import(
    key: str, path: str, unusable: Callable[[Any], str | None], id: str
) -> list[checks.CheckMessage]:
    """``SAGENTS[key]`` imports, and ``unusable(found)`` finds nothing wrong."""
    try:
        found = import_string(path)
    except Exception as exc:
        why: str | None = f"{type(exc).__name__}: {exc}"
    else:
        why = unusable(found)
        if why is None:
            return []
    return [
        checks.Error(
            f"SAGENTS[{key!r}] names {path!r}, which cannot be used: {why}",
            hint=HINTS.get(f"{key}:import", HINTS[key]),
            id=id,
        )
    ]


def _check_function(key: str, path: str, id: str) -> list[checks.CheckMessage]:
    return _check_import(
        key,
        path,
        lambda found: None if callable(found) else f"it is {found!r}, not a function",
        id,
    )


def _check_preprocessor(path: str) -> list[checks.CheckMessage]:
    return _check_import(
        "MESSAGE_PREPROCESSOR",
        path,
        lambda found: (
            None
            if callable(getattr(found, "preprocess", None))
            else f"{found!r} has no preprocess(message, context)"
        ),
        "sagents_django.E027",
    )


def _check_class(key: str, path: str) -> list[checks.CheckMessage]:
    return _check_import(
        key,
        path,
        lambda found: (
            None if isinstance(found, type) else f"it is {found!r}, not a class"
        ),
        "sagents_django.E019",
    )


def _check_scope_class(path: str) -> list[checks.CheckMessage]:
    try:
        scope_class = import_string(path)
    except ImportError as exc:
        return [
            checks.Error(
                f"SAGENTS['SCOPE'] names {path!r}, which cannot be imported: {exc}",
                hint="Check the module path and the class name; the default is "
                '"sagents_django.scope.Scope".',
                id="sagents_django.E007",
            )
        ]
    except Exception as exc:  # the module itself raised while importing
        return [
            checks.Error(
                f"SAGENTS['SCOPE'] names {path!r}, whose module failed to import: "
                f"{type(exc).__name__}: {exc}",
                hint="Fix the error in that module.",
                id="sagents_django.E007",
            )
        ]
    from sagents_django.scope import Scope

    if not isinstance(scope_class, type) or not issubclass(scope_class, Scope):
        return [
            checks.Error(
                f"SAGENTS['SCOPE'] names {path!r}, which is not a scope class "
                f"(a subclass of sagents_django.scope.Scope), but {scope_class!r}.",
                hint="Subclass sagents_django.scope.Scope and name that class.",
                id="sagents_django.E008",
            )
        ]
    return []


def check_scope_resolves_owner(**kwargs: Any) -> list[checks.CheckMessage]:
    """The configured scope class can name an owner of the configured conversation
    model: the default ``Scope`` only knows users, so a model owned by anything else
    needs a scope that overrides ``resolve_owner``. A SCOPE that cannot be imported
    is another check's business."""
    from django.utils.module_loading import import_string

    from sagents_django.scope import (
        Scope,
        conversation_model,
        decides_owners,
        owned_by_users,
    )

    try:
        cls = import_string(conf.get("SCOPE"))
        model = conversation_model()
    except Exception:
        return []
    if not (isinstance(cls, type) and issubclass(cls, Scope)):
        return []  # a scope of the host's own design: it answers for itself
    if owned_by_users(model) or decides_owners(cls):
        return []
    field = getattr(model, "OWNER_FIELD", None)
    return [
        checks.Error(
            f"The scope class {cls.__module__}.{cls.__qualname__} cannot resolve "
            f"the owner of {model._meta.label} ({field!r} is not a user), so every "
            "user owns nothing.",
            hint="Subclass sagents_django.scope.Scope, override the classmethod "
            "resolve_owner(cls, user) to return the user's owner instance (or None), "
            'and name it in SAGENTS["SCOPE"].',
            obj=model,
            id="sagents_django.E100",
        )
    ]


def check_chat_pages_apps(**kwargs: Any) -> list[checks.CheckMessage]:
    """The chat pages load htmx with django-htmx's template tags: a site that
    mounts them (``include("sagents_django.urls")``) without ``django_htmx`` in
    INSTALLED_APPS passes every other check and fails on every page. A site that
    does not mount them (the core, the runtime, the JSON socket) needs nothing."""
    from django.apps import apps
    from django.urls import NoReverseMatch, reverse

    if apps.is_installed("django_htmx"):
        return []
    try:
        reverse("sagents_django:home")
    except NoReverseMatch:
        return []  # the pages are not mounted
    except Exception:
        return []  # a URLconf that fails to load is Django's own check's business
    return [
        checks.Error(
            "The chat pages of sagents_django are mounted (sagents_django.urls), "
            "but 'django_htmx' is not in INSTALLED_APPS: every page would fail "
            "with \"'django_htmx' is not a registered tag library\".",
            hint='Add "django_htmx" to INSTALLED_APPS (it comes with '
            'pip install "sagents-django[web]", or [full]).',
            id="sagents_django.E101",
        )
    ]


def check_channel_layer(**kwargs: Any) -> list[checks.CheckMessage]:
    """The sockets need a channel layer; without ``CHANNEL_LAYERS`` Channels has
    none, and every live event would be lost."""
    try:
        import channels  # noqa: F401
    except ImportError:
        return []  # no sockets without Channels (the channels extra)
    from django.conf import settings

    if "default" in getattr(settings, "CHANNEL_LAYERS", {}):
        return []
    return [
        checks.Warning(
            "No channel layer is configured: the WebSocket endpoints and live events "
            "of sagents_django need one.",
            hint='One process: CHANNEL_LAYERS = {"default": {"BACKEND": '
            '"channels.layers.InMemoryChannelLayer"}}; several (daphne and Celery '
            'workers): "channels_redis.pubsub.RedisPubSubChannelLayer" with '
            '"CONFIG": {"hosts": [REDIS_URL]}.',
            id="sagents_django.W002",
        )
    ]


def _check_lease(user: Mapping[str, Any]) -> list[checks.CheckMessage]:
    beat = user.get("HEARTBEAT_SECONDS", conf.DEFAULTS["HEARTBEAT_SECONDS"])
    lease = user.get("LEASE_SECONDS", conf.DEFAULTS["LEASE_SECONDS"])
    if conf.problem("HEARTBEAT_SECONDS", beat) or conf.problem("LEASE_SECONDS", lease):
        return []
    if lease > 2 * beat:
        return []
    return [
        checks.Error(
            f"SAGENTS['LEASE_SECONDS'] ({lease}) must be more than twice "
            f"SAGENTS['HEARTBEAT_SECONDS'] ({beat}): a turn that is alive would "
            "look dead between two heartbeats and be taken over.",
            hint="Raise LEASE_SECONDS or lower HEARTBEAT_SECONDS.",
            id="sagents_django.E024",
        )
    ]


def _check_mcp_hosts(user: Mapping[str, Any]) -> list[checks.CheckMessage]:
    from sagents_django.core.exceptions import ConfigurationError
    from sagents_django.mcp.config import check_host, parse_hosts, parse_servers

    servers = user.get("MCP_SERVERS", conf.DEFAULTS["MCP_SERVERS"])
    hosts = user.get("MCP_ALLOWED_HOSTS", conf.DEFAULTS["MCP_ALLOWED_HOSTS"])
    if conf.problem("MCP_SERVERS", servers) or conf.problem("MCP_ALLOWED_HOSTS", hosts):
        return []
    allowed = parse_hosts(hosts) or frozenset()
    messages: list[checks.CheckMessage] = []
    for server in parse_servers(servers).values():
        if server.url is None:
            continue
        try:
            check_host(server.url, allowed, server=server.name)
        except ConfigurationError as exc:
            messages.append(
                checks.Error(
                    f"{exc}: its tools would never be offered.",
                    hint="Add the host to SAGENTS['MCP_ALLOWED_HOSTS'] if this "
                    "server is meant to be reached, or remove the server.",
                    id="sagents_django.E042",
                )
            )
    return messages
