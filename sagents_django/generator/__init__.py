"""What ``manage.py sagents_setup`` writes, as a pure function of its options.

Why a pure function: every option combination can be tested by comparing strings,
with no project, file or database, and the command stays a thin shell around it (it
checks the options against the app registry, refuses to overwrite, writes). The
files come from the ``.py-tpl`` templates in ``setup_templates/`` (the suffix Django's
``startapp`` templates use, so no tool takes them for Python), rendered with Django's
template language with autoescaping off. Rendering reads only those templates and
touches nothing.

The output is formatted as ``ruff format`` leaves it and passes ``ruff check`` with
this repository's settings: every call whose length depends on an option is written
exploded with a trailing comma (so the formatter keeps it that way whatever the
names' lengths), and imports are sorted here, as ruff's isort sorts them, with
``sagents_django`` and the host's own packages as first-party.
"""

from __future__ import annotations

import hashlib
from functools import cache
from importlib import resources
from typing import Any

from .imports import import_sections
from .options import (
    AUTH_USER_MODEL,
    DEFAULT_SCOPE,
    DEFAULT_TABLE_PREFIX,
    MIGRATION,
    OWNER_TYPES,
    InvalidOption,
    OwnerType,
    SetupOptions,
    check_module_path,
    check_options,
    default_owner_field,
    module_file,
    package_files,
)

__all__ = [
    "AUTH_USER_MODEL",
    "DEFAULT_SCOPE",
    "DEFAULT_TABLE_PREFIX",
    "MIGRATION",
    "OWNER_TYPES",
    "InvalidOption",
    "OwnerType",
    "SetupOptions",
    "check_module_path",
    "check_options",
    "command_line",
    "default_owner_field",
    "module_file",
    "package_files",
    "render",
    "settings_lines",
    "url_lines",
]

_MAX_INDEX_NAME = 30  # Django's limit (models.E034), for every database


# Rendering ---------------------------------------------------------------------
def render(options: SetupOptions) -> dict[str, str]:
    """The files to write, by path relative to the project root (``/``-separated),
    in a stable order. Raises InvalidOption for malformed options."""
    check_options(options)
    context = _context(options)
    base = options.target.replace(".", "/")
    files = {
        f"{base}/__init__.py": _render("package_init", context),
        module_file(options.factory): _render("factory", context),
        module_file(options.coordinator): _render("coordinator", context),
        f"{base}/agent_persistence.py": _render("agent_persistence", context),
        f"{base}/display_message_persistence.py": _render(
            "display_message_persistence", context
        ),
    }
    if options.writes_scope:
        files[f"{base}/scope.py"] = _render("scope", context)
    if options.needs_models:
        files[f"{base}/models.py"] = _render("models", context)
        files[f"{base}/admin.py"] = _render("admin", context)
        files[f"{base}/migrations/__init__.py"] = ""
        files[f"{base}/migrations/{MIGRATION}.py"] = _render("migration_0001", context)
    return files


def settings_lines(options: SetupOptions) -> list[str]:
    """What to add to the host's settings for the generated code to be used."""
    lines = []
    if options.needs_models:
        lines += [
            f"INSTALLED_APPS += [{_quote(options.target)}]",
            "# Before the first migrate: sagents_django's tables refer to this model.",
            f"SAGENTS_DJANGO_CONVERSATION_MODEL = {_quote(options.conversation_model)}",
        ]
    # The runtime builds the agent through FACTORY on every turn, in any process (a
    # Celery worker has no other way to find it), and saves through the generated
    # persistence classes (the site's to change). Assignments, valid Python to
    # append after the SAGENTS dict.
    keys = {
        "FACTORY": f"{options.factory}.build_agent",
        "AGENT_PERSISTENCE": f"{options.target}.agent_persistence.AgentPersistence",
        "DISPLAY_PERSISTENCE": (
            f"{options.target}.display_message_persistence.DisplayMessagePersistence"
        ),
    }
    if options.site_scope != DEFAULT_SCOPE:
        keys["SCOPE"] = options.site_scope
    lines += [f"SAGENTS[{_quote(k)}] = {_quote(v)}" for k, v in keys.items()]
    return lines


def url_lines(options: SetupOptions) -> list[str]:
    """What to add to the host's root URLconf: the chat pages where the README
    mounts them, and Django's sign-in and sign-out views (whose pages the app
    ships) for a site that has none."""
    return [
        'path("agents/", include("sagents_django.urls")),',
        'path("accounts/", include("django.contrib.auth.urls")),  # sign in and out',
    ]


def _render(name: str, context: dict[str, Any]) -> str:
    from django.template import Context

    return _template(name).render(Context(context, autoescape=False))


@cache
def _template(name: str) -> Any:
    from django.template import Engine

    source = (
        resources.files("sagents_django")
        .joinpath("setup_templates", f"{name}.py-tpl")
        .read_text(encoding="utf-8")
    )
    # A bare engine: the host's template settings (loaders, builtins) must not change
    # generated code, and a misspelt variable must show (it then fails to parse)
    # instead of vanishing.
    return Engine(string_if_invalid="<<undefined %s>>").from_string(source)


def _context(options: SetupOptions) -> dict[str, Any]:
    scope_module, _, scope_class = options.site_scope.rpartition(".")
    target = options.target
    # The site's class is imported as ``Scope`` whatever its name: the generated code
    # reads the same, and line lengths (so ruff's formatting) do not depend on it.
    scope_name = scope_class if scope_class == "Scope" else f"{scope_class} as Scope"
    # The generated scope module is the package's own (imported as its other modules
    # are); any other scope class is first-party code.
    scope: list[tuple[str, list[str]]] = []
    host_scope: list[tuple[str, list[str]]] = []
    (host_scope if options.writes_scope else scope).append((scope_module, [scope_name]))
    # A generated scope subclasses the --scope class (imported under another name
    # when the two share one).
    base_module, _, base_name = options.scope.rpartition(".")
    base_import = base_name
    if base_name == scope_class and options.writes_scope:
        base_name = f"Base{base_name}"
        base_import = f"{base_import} as {base_name}"
    base = [(base_module, [base_import])]
    conversation = (
        (f"{target}.models", ["Conversation"])
        if options.needs_models
        else ("sagents_django.models", ["Conversation"])
    )
    is_auth = options.owner_model == AUTH_USER_MODEL
    article = "an" if options.owner_type in ("account", "org") else "a"
    return {
        "command": command_line(options),
        "target": target,
        "factory": options.factory,
        "coordinator": options.coordinator,
        "app_label": options.app_label,
        "scope": options.site_scope,
        "scope_class": scope_class,
        "scope_base": base_name,
        "base_scope": "" if options.scope == DEFAULT_SCOPE else options.scope,
        "scope_imports": import_sections(f"{target}.scope", first_party=base),
        "owner_class": options.owner_class,
        "owner_label": options.owner_model,
        "has_owner": options.has_owner,
        "owner_type": options.owner_type,
        "owner_phrase": (
            f"{article} {options.owner_type}"
            if options.has_owner
            else "nobody in particular"
        ),
        "owner_field": options.owner_field,
        "owner_model": options.owner_model,
        "owner_is_auth_user": is_auth,
        "owner_reference": AUTH_USER_MODEL if is_auth else _quote(options.owner_model),
        "owner_migration_reference": (
            AUTH_USER_MODEL if is_auth else _quote(_lower_model(options.owner_model))
        ),
        "owner_dependency": _dependency(options),
        "needs_models": options.needs_models,
        "writes_scope": options.writes_scope,
        "conversation_model": options.conversation_model,
        "table": options.conversation_table,
        "index_name": _index_name(options.table_prefix, options.owner_field or ""),
        "factory_imports": import_sections(
            options.factory,
            stdlib=[("typing", ["Any"])],
            first_party=[
                ("sagents_django.conf", ["sagents_settings"]),
                (
                    "sagents_django.core",
                    [
                        "Agent",
                        "ChatModel",
                        "ConversationTitle",
                        "FileSystemConfig",
                        "Tool",
                        "build_default_middleware",
                    ],
                ),
                ("sagents_django.filesystems", ["DatabasePersistence"]),
                ("sagents_django.tool_access", ["ScopeToolAccess"]),
                *scope,
            ],
            host=host_scope,
        ),
        "coordinator_imports": import_sections(
            options.coordinator,
            stdlib=[
                ("asyncio", ["CancelledError"]),
                ("dataclasses", ["dataclass", "field"]),
                ("typing", ["TYPE_CHECKING", "Any", "cast"]),
            ],
            third_party=[
                ("asgiref.sync", ["sync_to_async"]),
                ("django.core.exceptions", ["ImproperlyConfigured"]),
            ],
            first_party=[
                ("sagents_django", ["services"]),
                ("sagents_django.conf", ["sagents_settings"]),
                ("sagents_django.core", ["InvalidResume", "Message", "State"]),
                ("sagents_django.core.approvals", ["interrupt_from_dict"]),
                ("sagents_django.exceptions", ["NotFound"]),
                ("sagents_django.runtime", ["RunOutcome", "agent_server"]),
                ("sagents_django.sharing", ["filesystems"]),
                *scope,
            ],
            host=host_scope,
        ),
        "coordinator_type_imports": import_sections(
            options.coordinator, host=[conversation], indent="    "
        ),
    }


def command_line(options: SetupOptions) -> str:
    """The command that generates these files (options left at default omitted)."""
    parts = ["manage.py sagents_setup", options.target]
    defaults = SetupOptions(target=options.target)
    if options.scope != defaults.scope:
        parts.append(f"--scope {options.scope}")
    if options.owner_type != "user":
        parts.append(f"--owner-type {options.owner_type}")
    field = default_owner_field(options.owner_type)
    if options.has_owner and options.owner_field != field:
        parts.append(f"--owner-field {options.owner_field}")
    if options.has_owner and options.owner_model != defaults.owner_model:
        parts.append(f"--owner-model {options.owner_model}")
    if options.table_prefix != defaults.table_prefix:
        parts.append(f"--table-prefix {options.table_prefix}")
    if options.factory != defaults.factory:
        parts.append(f"--factory {options.factory}")
    if options.coordinator != defaults.coordinator:
        parts.append(f"--coordinator {options.coordinator}")
    return " ".join(parts)


def _quote(value: str | None) -> str:
    # Double quotes, as ruff format writes strings.
    return '"' + (value or "") + '"'


def _lower_model(label: str | None) -> str:
    # Migrations name models in lowercase ("teams.team"), as makemigrations writes.
    app_label, _, name = (label or "").partition(".")
    return f"{app_label}.{name.lower()}"


def _dependency(options: SetupOptions) -> str:
    if not options.has_owner:
        return ""
    if options.owner_model == AUTH_USER_MODEL:
        return "migrations.swappable_dependency(settings.AUTH_USER_MODEL)"
    app_label, name = options.owner_dependency or (
        (options.owner_model or "").partition(".")[0],
        "__first__",
    )
    return f"({_quote(app_label)}, {_quote(name)})"


def _index_name(prefix: str, owner_field: str) -> str:
    name = f"{prefix}conv_{owner_field}_recent"
    if len(name) <= _MAX_INDEX_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{prefix[: _MAX_INDEX_NAME - 14]}conv_{digest}"
