"""The pure renderer: option combinations in, file texts out."""

from __future__ import annotations

import ast
import re
from dataclasses import replace
from pathlib import Path

import pytest

from sagents_django.generator import (
    AUTH_USER_MODEL,
    InvalidOption,
    SetupOptions,
    command_line,
    render,
    settings_lines,
)

from .helpers import ruff_problems

DEFAULT = SetupOptions(target="project.agents")
TEAM = SetupOptions(
    target="hostsite.agents",
    owner_type="team",
    owner_field="team",
    owner_model="teams.Team",
    owner_dependency=("teams", "0002_team_slug"),
)
NO_OWNER = SetupOptions(
    target="chat", owner_type="none", owner_field=None, owner_model=None
)
PREFIXED_ELSEWHERE = SetupOptions(
    target="myproj.chat",
    table_prefix="ai_",
    scope="myproj.scope.OrganizationScope",
    factory="myproj.builders.factory",
    coordinator="myproj.runtime_coordinator",
)
PREFIXED_TEAM = replace(TEAM, table_prefix="chat_", scope="accounts.scope.SiteScope")
COMBINATIONS = {
    "default": DEFAULT,
    "team": TEAM,
    "prefixed team, scope extended": PREFIXED_TEAM,
    "no owner": NO_OWNER,
    "prefix, custom scope, modules elsewhere": PREFIXED_ELSEWHERE,
}


def test_the_default_options_write_the_four_modules_and_no_model() -> None:
    files = render(DEFAULT)

    assert list(files) == [
        "project/agents/__init__.py",
        "project/agents/factory.py",
        "project/agents/coordinator.py",
        "project/agents/agent_persistence.py",
        "project/agents/display_message_persistence.py",
    ]
    assert DEFAULT.conversation_model == "sagents_django.Conversation"
    # The runtime builds the agent through the factory setting, in any process.
    assert settings_lines(DEFAULT) == [
        'SAGENTS["FACTORY"] = "project.agents.factory.build_agent"',
        'SAGENTS["AGENT_PERSISTENCE"] = '
        '"project.agents.agent_persistence.AgentPersistence"',
        'SAGENTS["DISPLAY_PERSISTENCE"] = '
        '"project.agents.display_message_persistence.DisplayMessagePersistence"',
    ]


def test_modules_of_one_package_import_each_other_relatively() -> None:
    coordinator = render(TEAM)["hostsite/agents/coordinator.py"]

    assert 'FACTORY = "hostsite.agents.factory.build_agent"' in coordinator
    assert "from .scope import TeamScope as Scope" in coordinator
    assert "    from .models import Conversation" in coordinator


def test_no_module_of_pass_through_functions_is_written() -> None:
    # The app calls sagents_django.services, the scope, the factory and the
    # persistence classes; a module of functions it never calls would promise a
    # change that reaches nothing but the site's own callers.
    for options in COMBINATIONS.values():
        assert not [path for path in render(options) if "conversations" in path]
    coordinator = render(DEFAULT)["project/agents/coordinator.py"]
    assert "found = services.get_conversation(scope, conversation_id)" in coordinator
    assert "from sagents_django.models import Conversation" in coordinator
    package = render(DEFAULT)["project/agents/__init__.py"]
    assert (
        "The scope-first conversation functions (create, list, display messages, the\n"
        "tool-call lifecycle) are ``sagents_django.services``."
    ) in package


def test_a_team_owner_gets_a_conversation_model_with_a_team_foreign_key() -> None:
    files = render(TEAM)
    models = files["hostsite/agents/models.py"]

    assert "class Conversation(AbstractConversation):" in models
    assert 'OWNER_FIELD = "team"' in models
    assert '    team = models.ForeignKey(\n        "teams.Team",' in models
    assert 'db_table = "sagents_conversations"' in models
    assert "swappable" not in models
    assert "from django.conf import settings" not in models
    assert files["hostsite/agents/migrations/__init__.py"] == ""
    assert TEAM.conversation_model == "agents.Conversation"


def test_the_team_migration_depends_on_the_owner_apps_latest_migration() -> None:
    migration = render(TEAM)["hostsite/agents/migrations/0001_initial.py"]

    assert '("teams", "0002_team_slug"),' in migration
    assert 'to="teams.team",' in migration
    assert "sagents_django" not in migration.partition("operations")[0].replace(
        "sagents_django's", ""
    )


def test_conversations_without_an_owner_have_no_foreign_key() -> None:
    files = render(NO_OWNER)
    models = files["chat/models.py"]
    migration = files["chat/migrations/0001_initial.py"]

    assert "OWNER_FIELD = None" in models
    assert "ForeignKey" not in models
    assert "from django.db import models" not in models
    assert "dependencies = []" in migration
    assert "ForeignKey" not in migration


def test_a_user_owner_with_another_table_prefix_keeps_the_swappable_user() -> None:
    files = render(PREFIXED_ELSEWHERE)
    models = files["myproj/chat/models.py"]
    migration = files["myproj/chat/migrations/0001_initial.py"]

    assert PREFIXED_ELSEWHERE.needs_models
    assert 'db_table = "ai_conversations"' in models
    assert "settings.AUTH_USER_MODEL," in models
    assert "migrations.swappable_dependency(settings.AUTH_USER_MODEL)," in migration
    assert '"db_table": "ai_conversations",' in migration


def test_modules_placed_elsewhere_are_written_there_and_imported_absolutely() -> None:
    files = render(PREFIXED_ELSEWHERE)
    coordinator = files["myproj/runtime_coordinator.py"]

    assert "myproj/builders/factory.py" in files
    assert 'FACTORY = "myproj.builders.factory.build_agent"' in coordinator
    assert "from myproj.chat.models import Conversation" in coordinator


def test_a_custom_scope_class_is_imported_as_scope() -> None:
    files = render(PREFIXED_ELSEWHERE)

    for path in ("myproj/runtime_coordinator.py", "myproj/builders/factory.py"):
        assert "from myproj.scope import OrganizationScope as Scope" in files[path]
    assert settings_lines(PREFIXED_ELSEWHERE)[-4:] == [
        'SAGENTS["FACTORY"] = "myproj.builders.factory.build_agent"',
        'SAGENTS["AGENT_PERSISTENCE"] = "myproj.chat.agent_persistence.AgentPersistence"',
        'SAGENTS["DISPLAY_PERSISTENCE"] = '
        '"myproj.chat.display_message_persistence.DisplayMessagePersistence"',
        'SAGENTS["SCOPE"] = "myproj.scope.OrganizationScope"',
    ]


def test_the_settings_lines_install_the_app_and_swap_the_conversation_model() -> None:
    assert settings_lines(TEAM)[0] == 'INSTALLED_APPS += ["hostsite.agents"]'
    assert settings_lines(TEAM)[2] == (
        'SAGENTS_DJANGO_CONVERSATION_MODEL = "agents.Conversation"'
    )


def test_a_team_owner_gets_a_scope_module_whose_owner_is_refused_until_filled() -> None:
    files = render(TEAM)
    scope = files["hostsite/agents/scope.py"]

    assert TEAM.site_scope == "hostsite.agents.scope.TeamScope"
    assert TEAM.writes_scope
    assert scope.endswith(
        "class TeamScope(Scope):\n"
        "    @classmethod\n"
        "    def resolve_owner(cls, user):\n"
        '        """Return the Team whose conversations `user` may use, or None."""\n'
        "        return None  # refuses (not found) until you fill this in\n"
    )
    assert "from sagents_django.scope import Scope\n" in scope
    assert settings_lines(TEAM)[-1] == (
        'SAGENTS["SCOPE"] = "hostsite.agents.scope.TeamScope"'
    )
    # The package's modules type their scopes with it; the command needs no --scope.
    assert (
        "from .scope import TeamScope as Scope" in files["hostsite/agents/factory.py"]
    )
    assert "--scope" not in command_line(TEAM)


def test_a_user_owner_or_no_owner_or_a_scope_that_resolves_gets_no_scope_module() -> (
    None
):
    for options in (DEFAULT, NO_OWNER, PREFIXED_ELSEWHERE):
        assert not options.writes_scope
        assert not [path for path in render(options) if path.endswith("/scope.py")]
    given = replace(TEAM, scope="teams.scope.MemberScope", scope_resolves_owner=True)
    assert "hostsite/agents/scope.py" not in render(given)
    assert "--scope teams.scope.MemberScope" in command_line(given)
    assert settings_lines(given)[-1] == 'SAGENTS["SCOPE"] = "teams.scope.MemberScope"'


def test_a_given_scope_that_cannot_resolve_the_owner_is_extended() -> None:
    # Sagents derives the owner from the site's --scope in generated code (its
    # scope_query); here that code is a subclass of the site's scope class.
    given = replace(TEAM, scope="accounts.scope.SiteScope")
    files = render(given)
    scope = files["hostsite/agents/scope.py"]

    assert "from accounts.scope import SiteScope\n" in scope
    assert "class TeamScope(SiteScope):\n" in scope
    assert "It extends\n``accounts.scope.SiteScope`` (``--scope``)" in scope
    assert given.site_scope == "hostsite.agents.scope.TeamScope"
    assert settings_lines(given)[-1] == (
        'SAGENTS["SCOPE"] = "hostsite.agents.scope.TeamScope"'
    )
    assert (
        "from .scope import TeamScope as Scope" in files["hostsite/agents/factory.py"]
    )
    assert "--scope accounts.scope.SiteScope" in command_line(given)


def test_a_given_scope_named_as_the_generated_one_is_imported_under_another() -> None:
    scope = render(replace(TEAM, scope="accounts.scope.TeamScope"))[
        "hostsite/agents/scope.py"
    ]

    assert "from accounts.scope import TeamScope as BaseTeamScope\n" in scope
    assert "class TeamScope(BaseTeamScope):\n" in scope


def test_the_prefix_names_the_table_and_index_of_the_generated_app() -> None:
    files = render(PREFIXED_TEAM)
    models = files["hostsite/agents/models.py"]
    migration = files["hostsite/agents/migrations/0001_initial.py"]

    assert PREFIXED_TEAM.conversation_table == "chat_conversations"
    assert 'db_table = "chat_conversations"' in models
    assert '"db_table": "chat_conversations",' in migration
    assert 'name="chat_conv_team_recent",' in models
    assert 'name="chat_conv_team_recent",' in migration
    # The only model the generated app has: sagents_django's tables are its own.
    assert models.count("class ") == 2  # Conversation and its Meta
    assert migration.count("migrations.CreateModel(") == 1


def test_a_generated_conversation_model_is_registered_in_the_admin() -> None:
    admin = render(TEAM)["hostsite/agents/admin.py"]

    assert "from .models import Conversation" in admin
    assert (
        "@admin.register(Conversation)\n"
        "class ConversationAdmin(BaseConversationAdmin):\n"
    ) in admin
    assert "admin.py" not in " ".join(render(DEFAULT))


def test_the_factory_keeps_files_in_the_database_and_names_conversations() -> None:
    factory = render(DEFAULT)["project/agents/factory.py"]

    assert "FileSystemConfig(default=True, persistence=DatabasePersistence())" in (
        factory
    )
    assert 'filesystem_opts={"configs": build_file_storage()},' in factory
    assert (
        'middleware.append((ConversationTitle, {"chat_model": title_model}))' in factory
    )


def test_every_module_records_the_command_that_generated_it() -> None:
    command = command_line(TEAM)

    assert command == (
        "manage.py sagents_setup hostsite.agents --owner-type team "
        "--owner-model teams.Team"
    )
    assert all(command in text for text in render(TEAM).values() if text)


def test_a_long_prefix_gets_an_index_name_within_djangos_limit() -> None:
    options = SetupOptions(
        target="chat",
        owner_type="org",
        owner_field="organization_unit",
        owner_model="orgs.Org",
        table_prefix="a_rather_long_prefix_",
    )
    models = render(options)["chat/models.py"]
    found = re.search(r'models\.Index\(.*?name="([^"]+)"', models, re.DOTALL)
    assert found is not None
    name = found.group(1)

    assert len(name) <= 30
    assert name.startswith("a_rather_lon")


@pytest.mark.parametrize("options", COMBINATIONS.values(), ids=COMBINATIONS.keys())
def test_every_rendered_module_is_python_with_every_variable_filled(
    options: SetupOptions,
) -> None:
    for path, text in render(options).items():
        ast.parse(text, filename=path)
        assert "<<undefined" not in text, path


def test_rendering_twice_gives_the_same_files_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    assert render(TEAM) == render(TEAM)
    assert list(tmp_path.iterdir()) == []


def test_every_combination_passes_ruff(tmp_path: Path) -> None:
    paths = []
    for name, options in COMBINATIONS.items():
        root = tmp_path / name.replace(" ", "_").replace(",", "")
        for relative, text in render(options).items():
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            paths.append(str(path.relative_to(tmp_path)))
    # The host's scope module exists in a real project; ruff's first-party detection
    # looks for it.
    scope = tmp_path / "prefix_custom_scope_modules_elsewhere/myproj/scope.py"
    scope.write_text("")
    accounts = tmp_path / "prefixed_team_scope_extended/accounts"
    accounts.mkdir()
    (accounts / "scope.py").write_text("")
    for root in {Path(p).parts[0] for p in paths}:
        files = [str(Path(p).relative_to(root)) for p in paths if p.startswith(root)]
        assert ruff_problems(tmp_path / root, files) == ""


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"owner_model": "auth.Group"},
            "--owner-type user needs the user model, not 'auth.Group'",
        ),
        ({"target": "1bad.path"}, "bad component '1bad'"),
        ({"target": "../x"}, "not a dotted Python module path"),
        ({"target": "project.class"}, "bad component 'class'"),
        ({"target": "sagents_django.agents"}, "inside sagents_django"),
        ({"scope": "Scope"}, "must name a class in a module"),
        ({"factory": "project.agents.agent_persistence"}, "already generated"),
        ({"coordinator": "project.agents.factory"}, "already generated"),
        ({"owner_type": "tenant"}, "--owner-type must be one of"),
        ({"owner_field": "title"}, "is reserved"),
        ({"owner_field": "team-id"}, "not a Python identifier"),
        ({"owner_field": "a__b"}, "must not contain '__'"),
        ({"table_prefix": "Sagents-"}, "--table-prefix must be lowercase"),
        ({"owner_model": "Team"}, "--owner-model must be 'app_label.ModelName'"),
        (
            {
                "owner_type": "team",
                "owner_field": "team",
                "owner_model": "teams.Team",
                "scope": "project.agents.scope.SiteScope",
            },
            "is in project/agents/scope.py, where the generator writes a subclass",
        ),
    ],
)
def test_malformed_options_raise_one_line_errors(
    changes: dict[str, str], message: str
) -> None:
    options = SetupOptions(**{"target": "project.agents", **changes})  # type: ignore[arg-type]

    with pytest.raises(InvalidOption, match=message) as caught:
        render(options)
    assert "\n" not in str(caught.value)


def test_the_user_model_is_referenced_through_settings() -> None:
    assert DEFAULT.owner_model == AUTH_USER_MODEL
    options = SetupOptions(target="chat", owner_field="author")
    models = render(options)["chat/models.py"]

    assert options.needs_models
    assert (
        "    author = models.ForeignKey(\n        settings.AUTH_USER_MODEL," in models
    )
