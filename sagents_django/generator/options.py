"""The options of ``manage.py sagents_setup``, resolved, and their checks.

Pure: what needs the app registry, the disk or the database is checked by the
command (``targets`` holds the disk and database checks). Every message is one line.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass
from typing import Any, Final, Literal

OwnerType = Literal["user", "account", "team", "org", "none"]
OWNER_TYPES: Final[tuple[OwnerType, ...]] = ("user", "account", "team", "org", "none")
DEFAULT_SCOPE: Final = "sagents_django.scope.Scope"
DEFAULT_TABLE_PREFIX: Final = "sagents_"
AUTH_USER_MODEL: Final = "settings.AUTH_USER_MODEL"
"""The owner model's reference in rendered code when it is the user model."""
MIGRATION: Final = "0001_initial"
"""The name of the migration written with a generated conversation model."""

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
    """Dotted path of the site's Scope class (``--scope``): a subclass of
    ``sagents_django.scope.Scope``, which every path of the app is given."""
    scope_resolves_owner: bool = False
    """Whether that class decides owners itself (it overrides ``resolve_owner`` or
    ``for_user``); the command finds out by importing it. ``Scope`` does not: it
    knows only users."""
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
    def owner_class(self) -> str | None:
        """The owner model's class name when it is not the user model (``Team``)."""
        model = self.owner_model
        if not self.has_owner or model == AUTH_USER_MODEL or not _is_model_label(model):
            return None
        return str(model).rpartition(".")[2]

    @property
    def generated_scope(self) -> str | None:
        """The Scope subclass the generator writes (``<target>.scope.TeamScope``),
        else None: for an owner that is not the user when the ``--scope`` class
        cannot resolve it (Sagents' generated ``scope_query``, the one place that
        says which owner a scope stands for). It subclasses the ``--scope`` class."""
        if self.owner_class is None or self.scope_resolves_owner:
            return None
        return f"{self.target}.scope.{self.owner_class}Scope"

    @property
    def writes_scope(self) -> bool:
        """Whether the generator writes ``<target>/scope.py``."""
        return self.generated_scope is not None

    @property
    def site_scope(self) -> str:
        """The scope class of the site, as ``SAGENTS["SCOPE"]`` names it: the
        generated subclass when there is one, else the ``--scope`` class."""
        return self.generated_scope or self.scope

    @property
    def migration_file(self) -> str | None:
        """The generated migration's path, when there is one."""
        if not self.needs_models:
            return None
        return f"{self.target.replace('.', '/')}/migrations/{MIGRATION}.py"

    @property
    def conversation_table(self) -> str:
        """The generated conversation model's table: the one table the generated app
        creates (sagents_django's own tables keep their names)."""
        return f"{self.table_prefix}conversations"

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
    if options.writes_scope and options.scope.rpartition(".")[0] == (
        f"{options.target}.scope"
    ):
        raise InvalidOption(
            f"--scope {options.scope!r} is in {options.target.replace('.', '/')}"
            f"/scope.py, where the generator writes a subclass of it that resolves "
            f"the {options.owner_class}; name a class of another module, or one "
            "that overrides resolve_owner"
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
        if options.owner_type == "user" and model != AUTH_USER_MODEL:
            raise InvalidOption(
                f"--owner-type user needs the user model, not {model!r}; "
                "name another owner with --owner-type account, team or org"
            )
    if not _PREFIX.fullmatch(options.table_prefix):
        raise InvalidOption(
            f"--table-prefix must be lowercase letters, digits and underscores, "
            f"starting with a letter (at most 40), not {options.table_prefix!r}"
        )
    taken = set(package_files(options))
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


def module_file(dotted: str) -> str:
    """The file of a module, relative to the project root: ``a/b/c.py``."""
    return dotted.replace(".", "/") + ".py"


def package_files(options: SetupOptions) -> list[str]:
    """The files generated inside the target package (factory and coordinator may
    be elsewhere)."""
    base = options.target.replace(".", "/")
    files = [
        "__init__.py",
        "agent_persistence.py",
        "display_message_persistence.py",
    ]
    if options.writes_scope:
        files.append("scope.py")
    if options.needs_models:
        files += [
            "models.py",
            "admin.py",
            "migrations/__init__.py",
            f"migrations/{MIGRATION}.py",
        ]
    return [f"{base}/{name}" for name in files]


def default_owner_field(owner_type: str) -> str | None:
    """The owner foreign key's default name: the owner type (None for ``none``)."""
    return None if owner_type == "none" else owner_type
