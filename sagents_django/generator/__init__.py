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
import keyword
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Final, Literal

from .imports import import_sections

OwnerType = Literal["user", "account", "team", "org", "none"]
OWNER_TYPES: Final[tuple[OwnerType, ...]] = ("user", "account", "team", "org", "none")
DEFAULT_SCOPE: Final = "sagents_django.scope.Scope"
DEFAULT_TABLE_PREFIX: Final = "sagents_"
AUTH_USER_MODEL: Final = "settings.AUTH_USER_MODEL"
"""The owner model's reference in rendered code when it is the user model."""

"""A module and the names imported from it."""

_MAX_INDEX_NAME = 30  # Django's limit (models.E034), for every database
_PREFIX = re.compile(r"[a-z][a-z0-9_]{0,39}")
# Names a conversation model already has: an owner field named so would shadow them.
_RESERVED_FIELDS: Final = frozenset(
    {
        "id",
        "pk",
        "title",
        "version",
        "metadata",
        "created_at",
        "updated_at",
        "agent_id",
        "agent_state",
        "display_messages",
        "runs",
        "objects",
        "OWNER_FIELD",
    }
)


class InvalidOption(ValueError):
    """An option of ``sagents_setup`` is malformed; the message is one line."""


@dataclass(frozen=True, kw_only=True)
class SetupOptions:
    """Everything ``render`` needs, already resolved (no defaults left to infer)."""

    target: str
    """Dotted path of the package to write, e.g. ``"project.agents"``."""
    scope: str = DEFAULT_SCOPE
    """Dotted path of the host's Scope class."""
    owner_type: OwnerType = "user"
    owner_field: str | None = "user"
    """The owner foreign key's field name (None when ``owner_type`` is ``none``)."""
    owner_model: str | None = AUTH_USER_MODEL
    """``"app_label.ModelName"``, or ``AUTH_USER_MODEL`` for the swappable user
    model (rendered as ``settings.AUTH_USER_MODEL``); None when there is no owner."""
    owner_dependency: tuple[str, str] | None = None
    """The owner app's migration the generated migration depends on (its latest);
    None with the user model (a swappable dependency) or without an owner."""
    table_prefix: str = DEFAULT_TABLE_PREFIX
    factory: str = ""
    """Dotted path of the agent factory module (default ``<target>.factory``)."""
    coordinator: str = ""
    """Dotted path of the coordinator module (default ``<target>.coordinator``)."""

    def __post_init__(self) -> None:
        # Frozen: the derived defaults are set once, through object.__setattr__.
        if not self.factory:
            object.__setattr__(self, "factory", f"{self.target}.factory")
        if not self.coordinator:
            object.__setattr__(self, "coordinator", f"{self.target}.coordinator")

    @property
    def app_label(self) -> str:
        """Django's default label of the target app: its last component."""
        return self.target.rpartition(".")[2]

    @property
    def has_owner(self) -> bool:
        return self.owner_type != "none"

    @property
    def needs_models(self) -> bool:
        """Whether the default ``sagents_django.Conversation`` (a user foreign key
        named ``user`` in ``sagents_conversations``) does not fit, so the target
        app gets its own conversation model and migration."""
        return not (
            self.owner_type == "user"
            and self.owner_field == "user"
            and self.owner_model == AUTH_USER_MODEL
            and self.table_prefix == DEFAULT_TABLE_PREFIX
        )

    @property
    def conversation_model(self) -> str:
        """The label ``SAGENTS_DJANGO_CONVERSATION_MODEL`` must name."""
        if self.needs_models:
            return f"{self.app_label}.Conversation"
        return "sagents_django.Conversation"


# Validation (pure: the command checks what needs the app registry) ----------------
def check_module_path(value: Any, *, what: str) -> str:
    """``value`` if it is a dotted path of Python identifiers, else InvalidOption."""
    if not isinstance(value, str) or not value:
        raise InvalidOption(f"{what} must be a dotted module path, not {value!r}")
    for part in value.split("."):
        if not part.isidentifier() or keyword.iskeyword(part) or not part.isascii():
            raise InvalidOption(
                f"{what} {value!r} is not a dotted Python module path "
                f"(bad component {part!r})"
            )
    return value


def check_options(options: SetupOptions) -> None:
    """Raise InvalidOption for the first malformed option."""
    check_module_path(options.target, what="The target package")
    if options.target.split(".")[0] == "sagents_django":
        raise InvalidOption(
            f"The target package {options.target!r} is inside sagents_django; "
            "generate into your own project (e.g. myproject.agents)"
        )
    check_module_path(options.scope, what="--scope")
    if "." not in options.scope:
        raise InvalidOption(
            f"--scope {options.scope!r} must name a class in a module, "
            "e.g. myapp.scope.Scope"
        )
    check_module_path(options.factory, what="--factory")
    check_module_path(options.coordinator, what="--coordinator")
    if options.owner_type not in OWNER_TYPES:
        raise InvalidOption(
            f"--owner-type must be one of {', '.join(OWNER_TYPES)}, "
            f"not {options.owner_type!r}"
        )
    if options.has_owner:
        name = options.owner_field
        if not isinstance(name, str) or not name.isidentifier() or not name.isascii():
            raise InvalidOption(f"--owner-field {name!r} is not a Python identifier")
        if keyword.iskeyword(name) or name in _RESERVED_FIELDS or name[0] == "_":
            raise InvalidOption(
                f"--owner-field {name!r} is reserved; pick another field name"
            )
        if "__" in name:
            raise InvalidOption(f"--owner-field {name!r} must not contain '__'")
        model = options.owner_model
        if model != AUTH_USER_MODEL and not _is_model_label(model):
            raise InvalidOption(
                f"--owner-model must be 'app_label.ModelName', not {model!r}"
            )
    if not _PREFIX.fullmatch(options.table_prefix):
        raise InvalidOption(
            f"--table-prefix must be lowercase letters, digits and underscores, "
            f"starting with a letter (at most 40), not {options.table_prefix!r}"
        )
    taken = set(_package_files(options))
    for path in (module_file(options.factory), module_file(options.coordinator)):
        if path in taken:
            raise InvalidOption(
                f"--factory and --coordinator must name modules of their own; "
                f"{path} is already generated"
            )
        taken.add(path)


def _is_model_label(value: Any) -> bool:
    if not isinstance(value, str) or value.count(".") != 1:
        return False
    app_label, name = value.split(".")
    return app_label.isidentifier() and name.isidentifier() and value.isascii()


# Rendering ---------------------------------------------------------------------
def module_file(dotted: str) -> str:
    """The file of a module, relative to the project root: ``a/b/c.py``."""
    return dotted.replace(".", "/") + ".py"


def _package_files(options: SetupOptions) -> list[str]:
    base = options.target.replace(".", "/")
    files = [
        "__init__.py",
        "conversations.py",
        "agent_persistence.py",
        "display_message_persistence.py",
    ]
    if options.needs_models:
        files += ["models.py", "migrations/__init__.py", "migrations/0001_initial.py"]
    return [f"{base}/{name}" for name in files]


def render(options: SetupOptions) -> dict[str, str]:
    """The files to write, by path relative to the project root (``/``-separated),
    in a stable order. Raises InvalidOption for malformed options."""
    check_options(options)
    context = _context(options)
    base = options.target.replace(".", "/")
    files = {
        f"{base}/__init__.py": _render("package_init", context),
        f"{base}/conversations.py": _render("conversations", context),
        module_file(options.factory): _render("factory", context),
        module_file(options.coordinator): _render("coordinator", context),
        f"{base}/agent_persistence.py": _render("agent_persistence", context),
        f"{base}/display_message_persistence.py": _render(
            "display_message_persistence", context
        ),
    }
    if options.needs_models:
        files[f"{base}/models.py"] = _render("models", context)
        files[f"{base}/migrations/__init__.py"] = ""
        files[f"{base}/migrations/0001_initial.py"] = _render("migration_0001", context)
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
    if options.scope != DEFAULT_SCOPE:
        lines.append(f'SAGENTS = {{..., "SCOPE": {_quote(options.scope)}}}')
    return lines


def url_lines(options: SetupOptions) -> list[str]:
    """What to add to the host's root URLconf."""
    return ['path("", include("sagents_django.urls")),']


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
    scope_module, _, scope_class = options.scope.rpartition(".")
    target = options.target
    # The host's class is imported as ``Scope`` whatever its name: the generated code
    # reads the same, and line lengths (so ruff's formatting) do not depend on it.
    scope_name = scope_class if scope_class == "Scope" else f"{scope_class} as Scope"
    scope = [(scope_module, [scope_name])]
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
        "scope": options.scope,
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
        "conversation_model": options.conversation_model,
        "table": f"{options.table_prefix}conversations",
        "index_name": _index_name(options.table_prefix, options.owner_field or ""),
        "conversations_imports": import_sections(
            f"{target}.conversations",
            stdlib=[("typing", ["TYPE_CHECKING", "Any", "cast"])],
            first_party=[("sagents_django", ["services"]), *scope],
        ),
        "conversations_type_imports": import_sections(
            f"{target}.conversations",
            first_party=[
                ("sagents_django.core", ["Todo"]),
                ("sagents_django.models", ["DisplayMessage"]),
                ("sagents_django.services", ["SearchResult"]),
            ],
            host=[conversation],
            indent="    ",
        ),
        "factory_imports": import_sections(
            options.factory,
            stdlib=[("typing", ["Any"])],
            first_party=[
                ("sagents_django.conf", ["sagents_settings"]),
                (
                    "sagents_django.core",
                    ["Agent", "ChatModel", "Tool", "build_default_middleware"],
                ),
                *scope,
            ],
        ),
        "coordinator_imports": import_sections(
            options.coordinator,
            stdlib=[
                ("asyncio", ["CancelledError"]),
                ("logging", ["getLogger"]),
                ("collections.abc", ["Callable", "Coroutine"]),
                ("dataclasses", ["dataclass", "field", "replace"]),
                ("typing", ["TYPE_CHECKING", "Any"]),
            ],
            third_party=[
                ("asgiref.sync", ["async_to_sync", "sync_to_async"]),
                ("django.db", ["transaction"]),
            ],
            first_party=[
                ("sagents_django", ["services"]),
                (
                    "sagents_django.core",
                    [
                        "Agent",
                        "AgentResult",
                        "InvalidResume",
                        "Message",
                        "State",
                        "TokenUsage",
                    ],
                ),
                (
                    "sagents_django.core.persistence",
                    ["Lifecycle", "PersistenceContext", "SyntheticMessage"],
                ),
                (
                    "sagents_django.core.serialization",
                    ["deserialize_server_state", "serialize_server_state"],
                ),
                ("sagents_django.exceptions", ["NotFound", "StateConflict"]),
                (
                    "sagents_django.persistence",
                    ["display_callbacks", "record_failure"],
                ),
                ("sagents_django.services.validation", ["message_text"]),
                *scope,
            ],
            host=[
                (f"{target}.agent_persistence", ["AgentPersistence"]),
                (f"{target}.conversations", ["get_conversation"]),
                (
                    f"{target}.display_message_persistence",
                    ["DisplayMessagePersistence"],
                ),
                (options.factory, ["build_agent"]),
            ],
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


def default_owner_field(owner_type: str) -> str | None:
    """The owner foreign key's default name: the owner type (None for ``none``)."""
    return None if owner_type == "none" else owner_type


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
