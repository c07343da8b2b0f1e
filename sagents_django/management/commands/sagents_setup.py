"""``manage.py sagents_setup``: generate a site's conversation and agent modules.

The Django port of ``mix sagents.setup``. The command resolves and checks the options
against this project (the owner model and the scope class must exist), renders the
files with the pure ``sagents_django.generator.render``, and writes them all or none:
every target is checked before the first write (``generator.targets``: no module
turned into a package, no installed module shadowed), an existing file is never
overwritten without ``--force``, and a migration a database has applied is never
rewritten. ``--dry-run`` says all of that and writes nothing. A bad option is one
line of error and no file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.migrations.loader import MigrationLoader
from django.utils.module_loading import import_string

from sagents_django import generator
from sagents_django.generator import (
    AUTH_USER_MODEL,
    DEFAULT_SCOPE,
    DEFAULT_TABLE_PREFIX,
    MIGRATION,
    OWNER_TYPES,
    InvalidOption,
    SetupOptions,
    targets,
)
from sagents_django.scope import Scope, decides_owners


class Command(BaseCommand):
    help = (
        "Generate this site's agent factory, coordinator and persistence modules "
        "into a package (and, for conversations not owned by the user model through "
        "a 'user' field in sagents_conversations, the conversation model and its "
        "migration; for an owner that is not the user, a Scope to fill in), then "
        "print the settings to add."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "target",
            help="Dotted path of the package to write, e.g. myproject.agents "
            "(its directory is found from --base-dir).",
        )
        parser.add_argument(
            "--scope",
            default=DEFAULT_SCOPE,
            help=f"Dotted path of your Scope class, a subclass of {DEFAULT_SCOPE} "
            "(the default). For an owner that is not the user model, unless the class "
            "overrides resolve_owner, a subclass of it to fill in is generated as "
            "<target>.scope.<Owner>Scope.",
        )
        parser.add_argument(
            "--owner-type",
            default="user",
            help=f"What conversations belong to: {', '.join(OWNER_TYPES)} "
            "(default: user).",
        )
        parser.add_argument(
            "--owner-field",
            help="Name of the owner foreign key (default: the owner type; a "
            "trailing _id, as Sagents spells it, is dropped).",
        )
        parser.add_argument(
            "--owner-model",
            help="The owner model as app_label.ModelName (default: AUTH_USER_MODEL "
            "for user, else <target app>.<OwnerType>); it must be installed.",
        )
        parser.add_argument(
            "--table-prefix",
            default=DEFAULT_TABLE_PREFIX,
            help="Prefix of the tables the generated app creates: its conversation "
            "table, <prefix>conversations (default: sagents_). sagents_django's own "
            "tables keep their sagents_ names.",
        )
        parser.add_argument(
            "--factory",
            help="Dotted path of the agent factory module (default: <target>.factory).",
        )
        parser.add_argument(
            "--coordinator",
            help="Dotted path of the coordinator module "
            "(default: <target>.coordinator).",
        )
        parser.add_argument(
            "--base-dir",
            help="The directory module paths start from (default: settings.BASE_DIR, "
            "else the current directory).",
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Print what would be written and overwritten, and write nothing "
            "(-v 2 prints the files' contents too).",
        )
        parser.add_argument(
            "--force",
            action="store_true",
            help="Overwrite files that exist (never a migration a database has "
            "applied).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        setup = self.resolve(options)
        base = self.base_dir(options["base_dir"])
        dry_run, force = options["dry_run"], options["force"]
        try:
            files = generator.render(setup)
            targets.check_module_paths(
                base,
                [
                    (setup.target, True),
                    (setup.factory, False),
                    (setup.coordinator, False),
                ],
            )
            if setup.needs_models and setup.table_prefix != DEFAULT_TABLE_PREFIX:
                # With the default prefix the table has the name of sagents_django's
                # own (swappable) conversation table, which exists wherever it was
                # migrated before the swap: the printed settings say to swap first.
                targets.check_table_free(
                    setup.conversation_table,
                    (setup.app_label, MIGRATION),
                    option=f"--table-prefix {setup.table_prefix}",
                )
            plan = targets.plan(
                base,
                files,
                force=force,
                migration=(setup.app_label, MIGRATION) if setup.needs_models else None,
                migration_file=setup.migration_file,
            )
        except InvalidOption as exc:
            raise CommandError(str(exc)) from None
        blocked = plan.blocked
        if blocked and not dry_run:
            others = f" and {len(blocked) - 1} more" if len(blocked) > 1 else ""
            raise CommandError(
                f"{blocked[0]}{others} already exist; nothing was written "
                "(pass --force to overwrite)"
            )
        if not dry_run:
            for relative, text in files.items():
                if plan.actions[relative] == "keep":
                    continue
                path = base / relative
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8", newline="\n")
        if options["verbosity"] >= 1:
            self.report(setup, base, files, plan, dry_run, options["verbosity"])

    def report(
        self,
        setup: SetupOptions,
        base: Path,
        files: dict[str, str],
        plan: targets.Plan,
        dry_run: bool,
        verbosity: int,
    ) -> None:
        count = sum(action != "keep" for action in plan.actions.values())
        verb = "Dry run: would write" if dry_run else "Wrote"
        self.stdout.write(f"{verb} {count} files in {base}:")
        for relative, text in files.items():
            note = _NOTES[plan.actions[relative], dry_run]
            if relative in plan.notes:
                note = f"{note}: {plan.notes[relative]}"
            self.stdout.write(f"  {relative}{f' ({note})' if note else ''}")
            if dry_run and verbosity >= 2 and plan.actions[relative] != "keep":
                self.stdout.write(_indent(text))
        if dry_run and plan.blocked:
            self.stdout.write(
                f"Without --force the run would stop and write nothing: "
                f"{len(plan.blocked)} of these files exist."
            )
        if any(action == "keep" for action in plan.actions.values()):
            self.stdout.write(
                "An applied migration is never rewritten: if the model changed, run "
                f"`manage.py makemigrations {setup.app_label}`."
            )
        self.stdout.write(self.next_steps(setup))

    # Options --------------------------------------------------------------------
    def resolve(self, options: dict[str, Any]) -> SetupOptions:
        """The options with their defaults inferred, checked against this project."""
        try:
            target = generator.check_module_path(
                options["target"], what="The target package"
            )
            owner_type = options["owner_type"]
            if owner_type not in OWNER_TYPES:
                raise InvalidOption(
                    f"--owner-type must be one of {', '.join(OWNER_TYPES)}, "
                    f"not {owner_type!r}"
                )
            app_label = target.rpartition(".")[2]
            owner_field, owner_model = self.owner(options, owner_type, app_label)
            scope = generator.check_module_path(options["scope"], what="--scope")
            setup = SetupOptions(
                target=target,
                scope=scope,
                scope_resolves_owner="." in scope and self.check_scope(scope),
                owner_type=owner_type,
                owner_field=owner_field,
                owner_model=owner_model,
                owner_dependency=self.owner_dependency(owner_model),
                table_prefix=options["table_prefix"],
                factory=options["factory"] or "",
                coordinator=options["coordinator"] or "",
            )
            generator.check_options(setup)
        except InvalidOption as exc:
            raise CommandError(str(exc)) from None
        if setup.needs_models:
            self.check_app_label(setup)
        return setup

    def owner(
        self, options: dict[str, Any], owner_type: str, app_label: str
    ) -> tuple[str | None, str | None]:
        field, model = options["owner_field"], options["owner_model"]
        if owner_type == "none":
            if field or model:
                raise InvalidOption(
                    "--owner-field and --owner-model need an owner; "
                    "--owner-type none has none"
                )
            return None, None
        if field is None:
            field = generator.default_owner_field(owner_type)
        elif field.endswith("_id") and len(field) > 3:
            # Sagents names the column (user_id); Django names the field (user).
            field = field[: -len("_id")]
        if model is None:
            model = (
                settings.AUTH_USER_MODEL
                if owner_type == "user"
                else f"{app_label}.{owner_type.capitalize()}"
            )
        try:
            found = apps.get_model(model)
        except (LookupError, ValueError):
            raise InvalidOption(
                f"--owner-model {model!r} is not an installed model "
                "(expected app_label.ModelName of an app in INSTALLED_APPS)"
            ) from None
        if found._meta.label_lower == settings.AUTH_USER_MODEL.lower():
            return field, AUTH_USER_MODEL
        if owner_type == "user":
            raise InvalidOption(
                f"--owner-type user needs the user model "
                f"({settings.AUTH_USER_MODEL!r}), not {found._meta.label!r}; name "
                "another owner with --owner-type account, team or org"
            )
        if found._meta.app_label == app_label:
            # Its migrations would have to come both before and after the generated
            # ones, and the generated models.py would replace its own.
            raise InvalidOption(
                f"--owner-model {found._meta.label!r} is in the app the generator "
                f"writes ({app_label!r}); name an owner model of another app"
            )
        if found._meta.swapped:
            raise InvalidOption(
                f"--owner-model {model!r} is swapped out for {found._meta.swapped!r}"
            )
        return field, found._meta.label

    def owner_dependency(self, owner_model: str | None) -> tuple[str, str] | None:
        """The owner app's latest migration: the generated migration needs the owner
        table, and the latest is what makemigrations would depend on."""
        if owner_model is None or owner_model == AUTH_USER_MODEL:
            return None
        app_label = owner_model.partition(".")[0]
        loader = MigrationLoader(None, ignore_no_migrations=True)
        leaves = sorted(loader.graph.leaf_nodes(app_label))
        if not leaves:
            raise InvalidOption(
                f"--owner-model {owner_model!r}: the app {app_label!r} has no "
                f"migrations; run `manage.py makemigrations {app_label}` first"
            )
        return leaves[-1]

    def check_scope(self, path: str) -> bool:
        """Whether the --scope class decides owners itself (else a non-user owner
        gets a generated subclass that does); CommandError unless it is a Scope
        subclass: the pages, the socket and the runtime take nothing else."""
        try:
            scope = import_string(path)
        except ImportError as exc:
            raise CommandError(f"--scope {path!r} cannot be imported: {exc}") from None
        except Exception as exc:  # the module itself raised while importing
            raise CommandError(
                f"--scope {path!r}: its module failed to import: "
                f"{type(exc).__name__}: {exc}"
            ) from None
        if not isinstance(scope, type):
            raise CommandError(f"--scope {path!r} is not a class")
        if not issubclass(scope, Scope):
            raise CommandError(
                f"--scope {path!r} is not a subclass of {DEFAULT_SCOPE}, which "
                "every path of the app (pages, socket, runtime) takes"
            )
        return decides_owners(scope)

    def check_app_label(self, setup: SetupOptions) -> None:
        # The generated models make the target an app labelled by its last
        # component; another installed app with that label would clash with it.
        for config in apps.get_app_configs():
            if config.label == setup.app_label and config.name != setup.target:
                raise CommandError(
                    f"The target {setup.target!r} would be an app labelled "
                    f"{setup.app_label!r}, the label of the installed {config.name!r}; "
                    "choose another package name"
                )

    # Files ----------------------------------------------------------------------
    def base_dir(self, given: str | None) -> Path:
        base = given or getattr(settings, "BASE_DIR", None) or Path.cwd()
        path = Path(base).resolve()
        if not path.is_dir():
            raise CommandError(f"--base-dir {str(base)!r} is not a directory")
        return path

    def next_steps(self, setup: SetupOptions) -> str:
        lines = ["", "Add to your settings:"]
        lines += [f"    {line}" for line in generator.settings_lines(setup)]
        lines += [
            "",
            "Add to your root URLconf (with `from django.urls import include, path`):",
            *(f"    {line}" for line in generator.url_lines(setup)),
            "",
            "Then run `manage.py migrate`, and open a conversation with:",
            f"    from {setup.coordinator} import start_conversation_session",
        ]
        if setup.writes_scope:
            scope_file = f"{setup.target.replace('.', '/')}/scope.py"
            lines += [
                "",
                f"Then fill in {setup.site_scope.rpartition('.')[2]}.resolve_owner in "
                f"{scope_file}: until it returns the {setup.owner_class} a user acts "
                "for, every user owns nothing (sees no conversation, cannot create "
                "one).",
            ]
        return "\n".join(lines)


_NOTES: dict[tuple[str, bool], str] = {
    ("write", False): "",
    ("write", True): "",
    ("overwrite", False): "overwritten",
    ("overwrite", True): "would overwrite",
    ("blocked", True): "exists: only --force would overwrite it",
    ("keep", False): "kept",
    ("keep", True): "would keep",
}
"""How the report marks each file, by its action and whether the run is dry."""


def _indent(text: str) -> str:
    return "\n".join(f"    | {line}" if line else "    |" for line in text.splitlines())
