"""``manage.py sagents_setup`` through ``call_command``: writes, refusals, errors."""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder

from sagents_django.management.commands import sagents_setup
from sagents_django.scope import Scope

from .helpers import REPO, ruff_problems

# The command asks the databases whether a migration is applied and whether the
# conversation table is free, as it does on a site.
pytestmark = pytest.mark.django_db

GENERATED = (
    "__init__.py",
    "factory.py",
    "coordinator.py",
    "agent_persistence.py",
    "display_message_persistence.py",
)


def setup(*args: str, **options: Any) -> str:
    """Run the command; its standard output."""
    out = StringIO()
    call_command("sagents_setup", *args, stdout=out, **options)
    return out.getvalue()


def written(root: Path) -> list[str]:
    """The files under ``root``, but the bytecode Python caches when it imports."""
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )


def test_the_project_agents_package_is_the_generators_output(tmp_path: Path) -> None:
    setup("project.agents", base_dir=str(tmp_path))
    ours = REPO / "project" / "agents"
    fresh = tmp_path / "project" / "agents"

    assert sorted(p.name for p in ours.glob("*.py")) == sorted(GENERATED)
    for name in GENERATED:
        assert (ours / name).read_bytes() == (fresh / name).read_bytes(), (
            f"project/agents/{name} differs from the generator's output; "
            "regenerate it with `manage.py sagents_setup project.agents --force`"
        )


def test_the_default_run_writes_the_modules_and_says_what_to_do_next(
    tmp_path: Path,
) -> None:
    out = setup("project.agents", base_dir=str(tmp_path))

    assert written(tmp_path) == sorted(f"project/agents/{n}" for n in GENERATED)
    assert f"Wrote 5 files in {tmp_path}:" in out
    assert "  project/agents/coordinator.py\n" in out
    assert 'SAGENTS["FACTORY"] = "project.agents.factory.build_agent"' in out
    assert 'path("agents/", include("sagents_django.urls")),' in out
    assert 'path("accounts/", include("django.contrib.auth.urls")),' in out
    assert "from project.agents.coordinator import start_conversation_session" in out


def test_the_written_modules_pass_ruff(tmp_path: Path) -> None:
    setup("project.agents", base_dir=str(tmp_path))

    assert ruff_problems(tmp_path, written(tmp_path)) == ""


def test_the_base_dir_defaults_to_settings_base_dir(
    tmp_path: Path, settings: Any
) -> None:
    settings.BASE_DIR = tmp_path

    setup("somewhere.agents", dry_run=True)
    out = setup("somewhere.agents")

    assert f"in {tmp_path}:" in out
    assert (tmp_path / "somewhere" / "agents" / "factory.py").is_file()


def test_a_dry_run_prints_what_it_would_write_and_writes_nothing(
    tmp_path: Path,
) -> None:
    out = setup("project.agents", base_dir=str(tmp_path), dry_run=True)

    assert written(tmp_path) == []
    assert f"Dry run: would write 5 files in {tmp_path}:" in out
    assert "  project/agents/factory.py\n" in out
    assert "def build_agent(" not in out


def test_a_verbose_dry_run_prints_the_files_contents_too(tmp_path: Path) -> None:
    out = setup("project.agents", base_dir=str(tmp_path), dry_run=True, verbosity=2)

    assert "    | def build_agent(" in out
    assert written(tmp_path) == []


def test_verbosity_zero_writes_silently(tmp_path: Path) -> None:
    out = setup("project.agents", base_dir=str(tmp_path), verbosity=0)

    assert out == ""
    assert len(written(tmp_path)) == 5


def test_an_existing_file_stops_the_run_before_anything_is_written(
    tmp_path: Path,
) -> None:
    package = tmp_path / "project" / "agents"
    package.mkdir(parents=True)
    (package / "factory.py").write_text("# mine\n")

    with pytest.raises(CommandError) as caught:
        setup("project.agents", base_dir=str(tmp_path))

    assert str(caught.value) == (
        "project/agents/factory.py already exist; nothing was written "
        "(pass --force to overwrite)"
    )
    assert written(tmp_path) == ["project/agents/factory.py"]
    assert (package / "factory.py").read_text() == "# mine\n"


def test_a_dry_run_over_existing_files_says_what_it_would_overwrite(
    tmp_path: Path,
) -> None:
    setup("project.agents", base_dir=str(tmp_path))
    factory = tmp_path / "project" / "agents" / "factory.py"
    factory.write_text("# mine\n")

    out = setup("project.agents", base_dir=str(tmp_path), dry_run=True)
    forced = setup("project.agents", base_dir=str(tmp_path), dry_run=True, force=True)

    assert (
        "  project/agents/factory.py (exists: only --force would overwrite it)" in out
    )
    assert (
        "Without --force the run would stop and write nothing: 5 of these files exist."
        in out
    )
    assert "  project/agents/factory.py (would overwrite)" in forced
    assert "Without --force" not in forced
    assert factory.read_text() == "# mine\n"


def test_force_overwrites_existing_files(tmp_path: Path) -> None:
    setup("project.agents", base_dir=str(tmp_path))
    factory = tmp_path / "project" / "agents" / "factory.py"
    generated = factory.read_text()
    factory.write_text("# changed\n")

    out = setup("project.agents", base_dir=str(tmp_path), force=True)

    assert factory.read_text() == generated
    assert "  project/agents/factory.py (overwritten)" in out


def test_force_never_rewrites_a_migration_a_database_has_applied(
    tmp_path: Path,
) -> None:
    setup("hostsite.chat", base_dir=str(tmp_path), table_prefix="ai_")
    package = tmp_path / "hostsite" / "chat"
    migration = package / "migrations" / "0001_initial.py"
    migration.write_text("# as applied\n")
    (package / "models.py").write_text("# changed\n")
    MigrationRecorder(connection).record_applied("chat", "0001_initial")

    dry = setup(
        "hostsite.chat", base_dir=str(tmp_path), table_prefix="ai_", dry_run=True
    )
    out = setup("hostsite.chat", base_dir=str(tmp_path), table_prefix="ai_", force=True)

    assert migration.read_text() == "# as applied\n"
    assert (
        "class Conversation(AbstractConversation):"
        in (package / "models.py").read_text()
    )
    note = "applied in the 'default' database"
    assert f"  hostsite/chat/migrations/0001_initial.py (would keep: {note})" in dry
    assert f"  hostsite/chat/migrations/0001_initial.py (kept: {note})" in out
    assert f"Wrote 8 files in {tmp_path}:" in out  # 9 generated, 1 kept
    assert "run `manage.py makemigrations chat`" in out


def test_force_rewrites_a_migration_no_database_has_applied(tmp_path: Path) -> None:
    setup("hostsite.chat", base_dir=str(tmp_path), table_prefix="ai_")
    migration = tmp_path / "hostsite" / "chat" / "migrations" / "0001_initial.py"
    generated = migration.read_text()
    migration.write_text("# draft\n")

    out = setup("hostsite.chat", base_dir=str(tmp_path), table_prefix="ai_", force=True)

    assert migration.read_text() == generated
    assert "  hostsite/chat/migrations/0001_initial.py (overwritten)" in out


def test_a_file_where_the_package_directory_should_be_is_refused(
    tmp_path: Path,
) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "agents").write_text("")

    with pytest.raises(CommandError, match="is a file, not a package directory"):
        setup("project.agents", base_dir=str(tmp_path), force=True)
    assert written(tmp_path) == ["project/agents"]


def test_a_user_owner_with_another_table_prefix_gets_a_model_and_settings(
    tmp_path: Path,
) -> None:
    out = setup("hostsite.chat", base_dir=str(tmp_path), table_prefix="ai_")

    assert "hostsite/chat/migrations/0001_initial.py" in written(tmp_path)
    assert '    INSTALLED_APPS += ["hostsite.chat"]' in out
    assert '    SAGENTS_DJANGO_CONVERSATION_MODEL = "chat.Conversation"' in out
    models = (tmp_path / "hostsite" / "chat" / "models.py").read_text()
    assert "settings.AUTH_USER_MODEL," in models


def test_the_owner_field_may_be_spelled_as_sagents_spells_the_column(
    tmp_path: Path,
) -> None:
    setup("hostsite.chat", base_dir=str(tmp_path), owner_field="author_id")
    models = (tmp_path / "hostsite" / "chat" / "models.py").read_text()

    assert 'OWNER_FIELD = "author"' in models


def test_naming_the_user_model_explicitly_is_the_default(tmp_path: Path) -> None:
    out = setup("project.agents", base_dir=str(tmp_path), owner_model="auth.user")

    assert 'SAGENTS["FACTORY"] = "project.agents.factory.build_agent"' in out
    assert len(written(tmp_path)) == 5


def group_site(tmp_path: Path, **options: Any) -> str:
    """A site whose conversations belong to groups: auth.Group stands in for a team
    model (any installed model with migrations)."""
    return setup(
        "hostsite.agents",
        base_dir=str(tmp_path),
        owner_type="team",
        owner_model="auth.Group",
        **options,
    )


def test_a_team_owner_gets_a_scope_to_fill_in_and_an_admin(tmp_path: Path) -> None:
    out = group_site(tmp_path)

    package = tmp_path / "hostsite" / "agents"
    migration = (package / "migrations" / "0001_initial.py").read_text()
    assert '("auth", "0012_alter_user_first_name_max_length"),' in migration
    scope = (package / "scope.py").read_text()
    assert (
        "class GroupScope(Scope):\n"
        "    @classmethod\n"
        "    def resolve_owner(cls, user):\n"
        '        """Return the Group whose conversations `user` may use, or None."""\n'
        "        return None  # refuses (not found) until you fill this in\n"
    ) in scope
    admin = (package / "admin.py").read_text()
    assert "@admin.register(Conversation)" in admin
    assert 'SAGENTS["SCOPE"] = "hostsite.agents.scope.GroupScope"' in out
    assert "Then fill in GroupScope.resolve_owner in hostsite/agents/scope.py" in out
    assert (
        "from .scope import GroupScope as Scope"
        in (package / "coordinator.py").read_text()
    )
    assert "--scope" not in scope  # the command line it records needs none
    assert ruff_problems(tmp_path, written(tmp_path)) == ""


def test_a_team_owner_with_a_scope_of_its_own_gets_no_scope_module(
    tmp_path: Path,
) -> None:
    out = group_site(tmp_path, scope="tests.django.test_one_statement.ResolvingScope")

    assert not (tmp_path / "hostsite" / "agents" / "scope.py").exists()
    assert 'SAGENTS["SCOPE"] = "tests.django.test_one_statement.ResolvingScope"' in out
    assert "fill in" not in out


class SiteScope(Scope):
    """A site's own scope that leaves owners to Scope (it knows only users)."""


class NotAScope:
    """Scope's methods without Scope."""

    @classmethod
    def from_request(cls, request: Any) -> NotAScope:
        return cls()


def test_a_team_owner_with_a_scope_that_cannot_resolve_it_gets_a_subclass_to_fill_in(
    tmp_path: Path,
) -> None:
    # Sagents' --scope names the site's scope, and the generated code derives the
    # owner from it; here the generated subclass is that one place.
    out = group_site(tmp_path, scope="tests.generator.test_command.SiteScope")

    package = tmp_path / "hostsite" / "agents"
    scope = (package / "scope.py").read_text()
    assert "from tests.generator.test_command import SiteScope\n" in scope
    assert "class GroupScope(SiteScope):\n" in scope
    assert (
        "It extends\n``tests.generator.test_command.SiteScope`` (``--scope``)" in scope
    )
    assert 'SAGENTS["SCOPE"] = "hostsite.agents.scope.GroupScope"' in out
    assert "Then fill in GroupScope.resolve_owner in hostsite/agents/scope.py" in out
    # Regenerating records the --scope it was given.
    assert "--scope tests.generator.test_command.SiteScope" in scope
    assert ruff_problems(tmp_path, written(tmp_path)) == ""


def test_a_scope_module_that_raises_while_importing_is_one_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken_site_scope.py").write_text("raise RuntimeError('typo')\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    with pytest.raises(CommandError) as caught:
        setup(
            "project.agents",
            base_dir=str(tmp_path),
            scope="broken_site_scope.SiteScope",
        )

    assert str(caught.value) == (
        "--scope 'broken_site_scope.SiteScope': its module failed to import: "
        "RuntimeError: typo"
    )
    assert written(tmp_path) == ["broken_site_scope.py"]


def test_a_user_owned_site_takes_its_scope_as_it_is(tmp_path: Path) -> None:
    out = setup(
        "project.agents",
        base_dir=str(tmp_path),
        scope="tests.generator.test_command.SiteScope",
    )

    assert not (tmp_path / "project" / "agents" / "scope.py").exists()
    assert 'SAGENTS["SCOPE"] = "tests.generator.test_command.SiteScope"' in out
    coordinator = (tmp_path / "project" / "agents" / "coordinator.py").read_text()
    assert "from tests.generator.test_command import SiteScope as Scope\n" in (
        coordinator
    )


def test_a_prefix_whose_table_exists_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE taken_conversations (id integer)")

    with pytest.raises(CommandError) as caught:
        setup("hostsite.chat", base_dir=str(tmp_path), table_prefix="taken_")

    assert str(caught.value) == (
        "--table-prefix taken_: the table 'taken_conversations' already exists in "
        "the 'default' database, where chat.0001_initial, which creates it, is not "
        "applied (migrate would fail there); choose another prefix"
    )
    assert written(tmp_path) == []


def test_a_prefix_whose_table_this_apps_migration_made_is_regenerated(
    tmp_path: Path,
) -> None:
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE ours_conversations (id integer)")
    MigrationRecorder(connection).record_applied("chat", "0001_initial")

    out = setup("hostsite.chat", base_dir=str(tmp_path), table_prefix="ours_")

    assert f"Wrote 9 files in {tmp_path}:" in out


@pytest.mark.parametrize(
    ("args", "options", "message"),
    [
        (
            ["project.agents"],
            {"owner_type": "tenant"},
            "--owner-type must be one of user, account, team, org, none, not 'tenant'",
        ),
        (
            ["project.agents"],
            {"owner_type": "team", "owner_model": "teams.Team"},
            "--owner-model 'teams.Team' is not an installed model "
            "(expected app_label.ModelName of an app in INSTALLED_APPS)",
        ),
        (
            ["project.agents"],
            {"owner_type": "team"},
            "--owner-model 'agents.Team' is not an installed model "
            "(expected app_label.ModelName of an app in INSTALLED_APPS)",
        ),
        (
            ["project.agents"],
            {"owner_type": "org", "owner_model": "nodot"},
            "--owner-model 'nodot' is not an installed model "
            "(expected app_label.ModelName of an app in INSTALLED_APPS)",
        ),
        (
            ["1bad.path"],
            {},
            "The target package '1bad.path' is not a dotted Python module path "
            "(bad component '1bad')",
        ),
        (
            ["../x"],
            {},
            "The target package '../x' is not a dotted Python module path "
            "(bad component '')",
        ),
        (
            ["project.agents"],
            {"factory": "project/agents/factory"},
            "--factory 'project/agents/factory' is not a dotted Python module path "
            "(bad component 'project/agents/factory')",
        ),
        (
            ["project.agents"],
            {"scope": "myapp.scope.Scope"},
            "--scope 'myapp.scope.Scope' cannot be imported: No module named 'myapp'",
        ),
        (
            ["project.agents"],
            {"scope": "sagents_django.scope.NoSuchScope"},
            "--scope 'sagents_django.scope.NoSuchScope' cannot be imported: "
            'Module "sagents_django.scope" does not define a "NoSuchScope" '
            "attribute/class",
        ),
        (
            ["project.agents"],
            {"scope": "sagents_django.scope.get_scope"},
            "--scope 'sagents_django.scope.get_scope' is not a class",
        ),
        (
            ["project.agents"],
            {"scope": "tests.generator.test_command.NotAScope"},
            "--scope 'tests.generator.test_command.NotAScope' is not a subclass of "
            "sagents_django.scope.Scope, which every path of the app (pages, "
            "socket, runtime) takes",
        ),
        (
            ["project.agents"],
            {"scope": "collections.OrderedDict"},
            "--scope 'collections.OrderedDict' is not a subclass of "
            "sagents_django.scope.Scope, which every path of the app (pages, "
            "socket, runtime) takes",
        ),
        (
            ["project.agents"],
            {"scope": "Scope"},
            "--scope 'Scope' must name a class in a module, e.g. myapp.scope.Scope",
        ),
        (
            ["project.agents"],
            {"owner_type": "none", "owner_field": "team"},
            "--owner-field and --owner-model need an owner; --owner-type none has none",
        ),
        (
            ["project.agents"],
            {"owner_field": "metadata"},
            "--owner-field 'metadata' is reserved; pick another field name",
        ),
        (
            ["project.agents"],
            {"table_prefix": "1"},
            "--table-prefix must be lowercase letters, digits and underscores, "
            "starting with a letter (at most 40), not '1'",
        ),
        (
            ["project.auth"],
            {"owner_type": "team", "owner_model": "auth.Group"},
            "--owner-model 'auth.Group' is in the app the generator writes "
            "('auth'); name an owner model of another app",
        ),
        (
            ["project.agents"],
            {"owner_type": "user", "owner_model": "auth.Group"},
            "--owner-type user needs the user model ('auth.User'), not "
            "'auth.Group'; name another owner with --owner-type account, team or org",
        ),
        (
            ["project.auth"],
            {"table_prefix": "ai_"},
            "The target 'project.auth' would be an app labelled 'auth', the label "
            "of the installed 'django.contrib.auth'; choose another package name",
        ),
    ],
)
def test_a_bad_option_is_one_error_line_and_writes_nothing(
    tmp_path: Path, args: list[str], options: dict[str, Any], message: str
) -> None:
    with pytest.raises(CommandError) as caught:
        setup(*args, base_dir=str(tmp_path), **options)

    assert str(caught.value) == message
    assert written(tmp_path) == []


@pytest.mark.parametrize(
    ("args", "options", "module"),
    [
        (["django"], {}, "django"),
        (["django.agents"], {}, "django"),
        (["json"], {}, "json"),
        (["sys.agents"], {}, "sys"),
        (["mysite.agents"], {"factory": "json.factory"}, "json"),
        (["mysite.agents"], {"coordinator": "re2.coordinator"}, "re2"),
    ],
)
def test_a_target_that_would_shadow_an_installed_module_is_refused(
    tmp_path: Path, args: list[str], options: dict[str, Any], module: str
) -> None:
    with pytest.raises(CommandError) as caught:
        setup(*args, base_dir=str(tmp_path), dry_run=True, **options)

    message = str(caught.value)
    assert f"would shadow the installed module {module!r} (" in message
    assert message.endswith("); choose another package name")
    assert written(tmp_path) == []


@pytest.mark.parametrize(
    ("args", "options", "module"),
    [
        (["mysite.settings"], {}, "mysite/settings.py"),
        (["mysite.settings.agents"], {}, "mysite/settings.py"),
        (
            ["mysite.agents"],
            {"factory": "mysite.settings.factory"},
            "mysite/settings.py",
        ),
        (["mysite.agents"], {}, "mysite.py"),
    ],
)
def test_a_target_that_would_turn_a_module_into_a_package_is_refused(
    tmp_path: Path, args: list[str], options: dict[str, Any], module: str
) -> None:
    (tmp_path / module).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / module).write_text("SECRET_KEY = 'x'\n")
    before = written(tmp_path)

    for dry_run in (True, False):
        with pytest.raises(CommandError) as caught:
            setup(*args, base_dir=str(tmp_path), dry_run=dry_run, force=True, **options)
        assert f"would turn the module {module} into a package" in str(caught.value)
    assert written(tmp_path) == before


def test_the_factory_may_replace_a_module_file_of_its_own_name_with_force(
    tmp_path: Path,
) -> None:
    # A module (not a package) path may be an existing file: --force's business.
    (tmp_path / "mysite").mkdir()
    (tmp_path / "mysite" / "builder.py").write_text("# old\n")

    setup("mysite.agents", base_dir=str(tmp_path), factory="mysite.builder", force=True)

    assert "def build_agent(" in (tmp_path / "mysite" / "builder.py").read_text()


def test_a_missing_base_dir_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="is not a directory"):
        setup("project.agents", base_dir=str(tmp_path / "nowhere"))


def test_an_owner_app_without_migrations_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every app of the test project has migrations; a loader that finds none stands
    # in for an app that was never migrated (a foreign key to it cannot be migrated).
    class NoMigrations:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.graph = self

        def leaf_nodes(self, app_label: str) -> list[tuple[str, str]]:
            return []

    monkeypatch.setattr(sagents_setup, "MigrationLoader", NoMigrations)

    with pytest.raises(CommandError) as caught:
        setup(
            "project.agents",
            base_dir=str(tmp_path),
            owner_type="team",
            owner_model="auth.Group",
        )

    assert str(caught.value) == (
        "--owner-model 'auth.Group': the app 'auth' has no migrations; "
        "run `manage.py makemigrations auth` first"
    )
    assert written(tmp_path) == []
