"""The SAGENTS system checks, by id, and the accessors that share their rules.

Every key has a check: a bad value fails ``manage.py check`` with a stable id and a
hint, and code that reads the value anyway gets ``ImproperlyConfigured`` naming it,
never a TypeError in the middle of a turn.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from sagents_django import conf
from sagents_django.conf import sagents_settings


def sagents_messages() -> list[checks.CheckMessage]:
    return [
        m for m in checks.run_checks() if (m.id or "").startswith("sagents_django.")
    ]


def sagents_ids() -> set[str]:
    return {m.id for m in sagents_messages()}


BAD_VALUES = [
    ("MODEL", "", "sagents_django.E002"),
    ("MODEL", ["openai/gpt-4o"], "sagents_django.E002"),
    ("MODEL_PARAMS", {1: "one"}, "sagents_django.E003"),  # names the key 1
    ("MODEL_PARAMS", "temperature=0", "sagents_django.E003"),
    ("EXECUTOR", "Celery", "sagents_django.E004"),
    ("EXECUTOR", None, "sagents_django.E004"),
    ("FALLBACK_MODELS", "openai/gpt-4o-mini", "sagents_django.E005"),
    ("FALLBACK_MODELS", ["openai/gpt-4o-mini", ""], "sagents_django.E005"),
    ("FALLBACK_MODELS", ["openai/gpt-4o-mini", 3], "sagents_django.E005"),
    ("FALLBACK_MODELS", {"openai/gpt-4o-mini": 1}, "sagents_django.E005"),
    ("SCOPE", "Scope", "sagents_django.E006"),
    ("SCOPE", "my-app.scope.Scope", "sagents_django.E006"),
    ("SCOPE", 42, "sagents_django.E006"),
    ("MAX_STATE_BYTES", "20MB", "sagents_django.E009"),
    ("MAX_STATE_BYTES", 0, "sagents_django.E009"),
    ("MAX_STATE_BYTES", -1, "sagents_django.E009"),
    ("MAX_STATE_BYTES", True, "sagents_django.E009"),
    ("MAX_STATE_BYTES", 1.5e6, "sagents_django.E009"),
    ("MAX_STATE_BYTES", None, "sagents_django.E009"),
    ("FACTORY", "build_agent", "sagents_django.E010"),
    ("FACTORY", 3, "sagents_django.E010"),
    ("DOUBLE_TEXT", "queue", "sagents_django.E011"),
    ("DOUBLE_TEXT", None, "sagents_django.E011"),
    ("WHILE_APPROVAL_PENDING", "queue", "sagents_django.E025"),
    ("WHILE_APPROVAL_PENDING", True, "sagents_django.E025"),
    ("MAX_QUEUED_ROUNDS", 0, "sagents_django.E012"),
    ("MAX_QUEUED_ROUNDS", "10", "sagents_django.E012"),
    ("INACTIVITY_TIMEOUT", -5, "sagents_django.E013"),
    ("INACTIVITY_TIMEOUT", 1.5, "sagents_django.E013"),
    ("DELTA_WINDOW_MS", 0, "sagents_django.E014"),
    ("DELTA_WINDOW_MS", None, "sagents_django.E014"),
    ("DATABASE_THREADS", 0, "sagents_django.E016"),
    ("DATABASE_THREADS", "8", "sagents_django.E016"),
    ("HEARTBEAT_SECONDS", 0, "sagents_django.E020"),
    ("HEARTBEAT_SECONDS", "5", "sagents_django.E020"),
    ("LEASE_SECONDS", -1, "sagents_django.E021"),
    ("LEASE_SECONDS", None, "sagents_django.E021"),
    ("SWEEP_SECONDS", True, "sagents_django.E022"),
    ("MAX_ATTEMPTS", 0, "sagents_django.E023"),
    ("MAX_ATTEMPTS", 2.5, "sagents_django.E023"),
    ("DRAIN_SECONDS", -1, "sagents_django.E030"),
    ("DRAIN_SECONDS", "5", "sagents_django.E030"),
    ("DRAIN_SECONDS", None, "sagents_django.E030"),
    ("AGENT_PERSISTENCE", None, "sagents_django.E017"),
    ("AGENT_PERSISTENCE", "Persistence", "sagents_django.E017"),
    ("DISPLAY_PERSISTENCE", 3, "sagents_django.E018"),
    ("MCP_DATABASE_SERVERS", "yes", "sagents_django.E043"),
    ("MCP_DATABASE_SERVERS", None, "sagents_django.E043"),
    ("RETENTION_DAYS", 0, "sagents_django.E050"),
    ("RETENTION_DAYS", "30", "sagents_django.E050"),
    ("RETENTION_DAYS", -7, "sagents_django.E050"),
    ("RETENTION_FOR", "retention_for", "sagents_django.E051"),
    ("RETENTION_DELETES", "all", "sagents_django.E052"),
    ("APPROVALS", [], "sagents_django.E070"),
    ("APPROVALS", {"QUORUMS": 2}, "sagents_django.E070"),
    ("APPROVALS", {"PERMISSIONS": {"write_file": "approve"}}, "sagents_django.E070"),
    ("APPROVALS", {"QUORUM": 1}, "sagents_django.E070"),
    ("APPROVALS", {"EXPIRES_AFTER": 0}, "sagents_django.E070"),
    ("APPROVALS", {"ON_EXPIRY": "approve"}, "sagents_django.E070"),
    ("APPROVALS", {"HIGH_RISK": "delete_file"}, "sagents_django.E070"),
    ("APPROVALS", {"TENANCY": "not a path"}, "sagents_django.E070"),
    ("LIFECYCLE_BATCH", 0, "sagents_django.E053"),
    ("LIFECYCLE_BATCH", 1.5, "sagents_django.E053"),
    ("EXPORT_INLINE_MAX_ROWS", None, "sagents_django.E054"),
    ("EXPORT_STORAGE", "", "sagents_django.E055"),
    ("SHARE_WITH", "share_with", "sagents_django.E060"),
    ("SHARE_WITH", 3, "sagents_django.E060"),
    ("BUDGETS", [], "sagents_django.E065"),
    ("BUDGETS", {"LIMITS": []}, "sagents_django.E065"),
    (
        "BUDGETS",
        {"DEFAULTS": [{"scope": "user", "limit": "-1"}]},
        "sagents_django.E065",
    ),
    (
        "BUDGETS",
        {"DEFAULTS": [{"scope": "user", "limit": "1e9"}]},
        "sagents_django.E065",
    ),
    (
        "BUDGETS",
        {"DEFAULTS": [{"scope": "user", "limit": "NaN"}]},
        "sagents_django.E065",
    ),
    ("BUDGETS", {"DEFAULTS": [{"scope": "team", "limit": "1"}]}, "sagents_django.E065"),
    (
        "BUDGETS",
        {"DEFAULTS": [{"scope": "user", "period": "week", "limit": "1"}]},
        "sagents_django.E065",
    ),
    ("BUDGETS", {"DEFAULTS": [{"scope": "user", "limit": 1.5}]}, "sagents_django.E065"),
    ("BUDGETS", {"SOFT_ACTION": "email"}, "sagents_django.E065"),
    ("BUDGETS", {"UNPRICED": "free"}, "sagents_django.E065"),
    ("BUDGETS", {"UNPRICED": {"input": "-1", "output": "1"}}, "sagents_django.E065"),
    ("BUDGETS", {"MAX_OUTPUT_TOKENS": 0}, "sagents_django.E065"),
    ("BUDGETS", {"BUDGET_FOR": "nodots"}, "sagents_django.E065"),
]


def named(value: Any) -> Any:
    """What the message must quote: the value, or in a container the bad item."""
    if isinstance(value, dict) and not all(isinstance(k, str) for k in value):
        return next(k for k in value if not isinstance(k, str))
    if isinstance(value, list):
        return next((v for v in value if not isinstance(v, str) or not v), value)
    return value


@pytest.mark.parametrize(
    ("key", "value", "check_id"),
    BAD_VALUES,
    ids=[f"{key}={value!r}" for key, value, _ in BAD_VALUES],
)
def test_a_bad_value_fails_its_own_check_naming_the_value(
    key: str, value: Any, check_id: str
) -> None:
    with override_settings(SAGENTS={key: value}):
        [message] = sagents_messages()
    assert message.id == check_id
    assert message.level == checks.ERROR
    assert repr(named(value)) in message.msg
    assert f"SAGENTS[{key!r}]" in message.msg
    assert message.hint


@pytest.mark.parametrize(
    ("key", "value", "check_id"),
    [v for v in BAD_VALUES if v[0] != "SCOPE"],
    ids=[f"{key}={value!r}" for key, value, _ in BAD_VALUES if key != "SCOPE"],
)
def test_code_reading_a_bad_value_gets_improperly_configured_not_a_type_error(
    key: str, value: Any, check_id: str
) -> None:
    with (
        override_settings(SAGENTS={key: value}),
        pytest.raises(ImproperlyConfigured, match=f"SAGENTS\\[{key!r}\\]"),
    ):
        getattr(sagents_settings, key)


def test_a_lease_that_two_heartbeats_could_outlast_is_refused() -> None:
    with override_settings(SAGENTS={"HEARTBEAT_SECONDS": 5, "LEASE_SECONDS": 10}):
        [message] = sagents_messages()
    assert message.id == "sagents_django.E024"
    assert "LEASE_SECONDS" in message.msg and "(10)" in message.msg
    with override_settings(SAGENTS={"HEARTBEAT_SECONDS": 0.5, "LEASE_SECONDS": 1.5}):
        assert sagents_messages() == []


def test_fallback_models_as_a_string_is_never_read_as_its_letters() -> None:
    with (
        override_settings(SAGENTS={"FALLBACK_MODELS": "gpt"}),
        pytest.raises(ImproperlyConfigured, match="not the string 'gpt'"),
    ):
        _ = sagents_settings.FALLBACK_MODELS


GOOD = {
    "MODEL": "openai/gpt-4o-mini",
    "MODEL_PARAMS": {"temperature": 0, "api_base": "http://127.0.0.1:1/v1"},
    "FALLBACK_MODELS": ("openai/gpt-4o-mini", "anthropic/claude-3-5-haiku"),
    "EXECUTOR": "celery",
    "SCOPE": "sagents_django.scope.Scope",
    "MAX_STATE_BYTES": 1024,
    "FACTORY": "project.agents.factory.build_agent",
    "DOUBLE_TEXT": "interrupt",
    "MESSAGE_PREPROCESSOR": "tests.runtime.agents.Mentions",
    "FILESYSTEM_SCOPE": "sagents_django.runtime.file_scopes.owner_files",
    "WHILE_APPROVAL_PENDING": "dismiss",
    "APPROVALS": {
        "PERMISSIONS": {"*": "sagents_django.decide_approvals"},
        "OWNER_DECIDES": False,
        "HIGH_RISK": ["delete_file"],
        "QUORUM": 3,
        "EXPIRES_AFTER": None,
        "ON_EXPIRY": "dismiss",
        "TENANCY": "tests.web.test_approval_routing.nobody",
    },
    "MAX_QUEUED_ROUNDS": 3,
    "INACTIVITY_TIMEOUT": None,
    "DELTA_WINDOW_MS": 5,
    "DATABASE_THREADS": 4,
    "HEARTBEAT_SECONDS": 0.5,
    "LEASE_SECONDS": 2,
    "SWEEP_SECONDS": 1,
    "MAX_ATTEMPTS": 5,
    "DRAIN_SECONDS": 0,
    "AGENT_PERSISTENCE": "project.agents.agent_persistence.AgentPersistence",
    "DISPLAY_PERSISTENCE": "sagents_django.persistence.DjangoDisplayMessagePersistence",
    "MCP_SERVERS": {
        "docs": {"command": ["python", "-m", "docs_server"], "env": {"K": "v"}},
        "tickets": {"url": "https://mcp.example.com/mcp", "tools": ["search"]},
    },
    "MCP_ALLOWED_HOSTS": ["mcp.example.com"],
    "MCP_DATABASE_SERVERS": True,
    "MCP_SECRETS": {"tickets_token": "Bearer s3cret"},
    "RETENTION_DAYS": 30,
    "RETENTION_FOR": "tests.lifecycle.plans.retention_for",
    "RETENTION_DELETES": "contents",
    "LIFECYCLE_BATCH": 10,
    "EXPORT_INLINE_MAX_ROWS": 100,
    "EXPORT_STORAGE": "default",
    "SHARE_WITH": "tests.sharing.tenants.share_with",
    "BUDGETS": {
        "DEFAULTS": [{"scope": "user", "period": "day", "limit": "5"}],
        "SOFT_ACTION": "approve",
        "UNPRICED": {"input": "5", "output": "15"},
        "MAX_OUTPUT_TOKENS": 2048,
        "RESERVATION_SECONDS": 60,
    },
}


def test_every_key_has_a_check_and_good_values_pass_them_all() -> None:
    assert set(GOOD) == set(conf.DEFAULTS) == set(conf.VALIDATORS)
    with override_settings(SAGENTS=GOOD):
        assert sagents_ids() == set()
        models = sagents_settings.FALLBACK_MODELS
        assert models == ["openai/gpt-4o-mini", "anthropic/claude-3-5-haiku"]
        assert sagents_settings.MAX_STATE_BYTES == 1024


def test_several_bad_keys_are_all_reported_at_once() -> None:
    bad = {"EXECUTOR": "threads", "MAX_STATE_BYTES": "1MB", "FALLBACK_MODELS": "x/y"}
    with override_settings(SAGENTS=bad):
        assert sagents_ids() == {
            "sagents_django.E004",
            "sagents_django.E005",
            "sagents_django.E009",
        }


@pytest.mark.parametrize(
    "path",
    [
        "sagents_django.no_such_module.Scope",
        "sagents_django.scope.NoSuchScope",
    ],
)
def test_a_scope_that_cannot_be_imported_fails_e007(path: str) -> None:
    with override_settings(SAGENTS={"SCOPE": path}):
        [message] = sagents_messages()
    assert message.id == "sagents_django.E007"
    assert repr(path) in message.msg


def test_a_scope_module_that_raises_while_importing_fails_e007(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken_scope_module.py").write_text(
        textwrap.dedent(
            """
            raise RuntimeError("settings typo in the host's scope module")
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with override_settings(SAGENTS={"SCOPE": "broken_scope_module.TeamScope"}):
        [message] = sagents_messages()
    assert message.id == "sagents_django.E007"
    assert "settings typo in the host's scope module" in message.msg


class LooksLikeAScope:
    @classmethod
    def from_request(cls, request: Any) -> LooksLikeAScope:
        return cls()


@pytest.mark.parametrize(
    "path",
    [
        "sagents_django.scope.get_scope",  # a function
        "sagents_django.conf.DEFAULTS",  # a value
        "collections.OrderedDict",  # a class that is no scope
        # Scope's methods without Scope: the runtime refuses it (InvalidInput).
        "tests.test_checks.LooksLikeAScope",
    ],
)
def test_a_scope_path_naming_no_scope_class_fails_e008(path: str) -> None:
    with override_settings(SAGENTS={"SCOPE": path}):
        [message] = sagents_messages()
    assert message.id == "sagents_django.E008"
    assert repr(path) in message.msg


def test_unknown_keys_of_any_type_are_one_warning() -> None:
    with override_settings(SAGENTS={"MODLE": "x", 3: "y"}):
        [message] = sagents_messages()
    assert message.id == "sagents_django.W001"
    assert "'MODLE'" in message.msg and "3" in message.msg


def test_manage_py_check_fails_on_a_typo_instead_of_every_turn() -> None:
    with (
        override_settings(SAGENTS={"MAX_STATE_BYTES": "20MB"}),
        pytest.raises(SystemCheckError, match=r"sagents_django\.E009"),
    ):
        call_command("check")


@pytest.mark.parametrize(
    "path",
    [
        "project.agents.factory.no_such_function",
        "no_such_module.build_agent",
        "project.agents.factory.SYSTEM_PROMPT",
    ],
)
def test_a_factory_that_cannot_be_used_fails_e015(path: str) -> None:
    with override_settings(SAGENTS={"FACTORY": path}):
        [message] = sagents_messages()
    assert message.id == "sagents_django.E015"
    assert path in message.msg


@pytest.mark.parametrize("key", ["AGENT_PERSISTENCE", "DISPLAY_PERSISTENCE"])
@pytest.mark.parametrize(
    "path",
    ["project.agents.agent_persistence.Nope", "project.agents.factory.build_agent"],
)
def test_a_persistence_class_that_cannot_be_used_fails_e019(
    key: str, path: str
) -> None:
    with override_settings(SAGENTS={key: path}):
        [message] = sagents_messages()
    assert message.id == "sagents_django.E019"
    assert key in message.msg and path in message.msg


def test_no_channel_layer_is_a_warning_that_says_what_to_add() -> None:
    with override_settings(CHANNEL_LAYERS={}):
        [warning] = [m for m in checks.run_checks() if m.id == "sagents_django.W002"]
    assert "InMemoryChannelLayer" in warning.hint
    with override_settings(
        CHANNEL_LAYERS={"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    ):
        assert not [m for m in checks.run_checks() if m.id == "sagents_django.W002"]


@pytest.mark.parametrize("value", ["mentions", 3, "tests.runtime.agents."])
def test_a_preprocessor_that_is_no_dotted_path_fails_e026(value: Any) -> None:
    with override_settings(SAGENTS={"MESSAGE_PREPROCESSOR": value}):
        assert sagents_ids() == {"sagents_django.E026"}


@pytest.mark.parametrize(
    "path",
    [
        "tests.runtime.agents.NoSuchPreprocessor",  # not there
        "sagents_django.conf.DEFAULTS",  # no preprocess()
    ],
)
def test_a_preprocessor_that_cannot_be_used_fails_e027(path: str) -> None:
    with override_settings(SAGENTS={"MESSAGE_PREPROCESSOR": path}):
        [message] = sagents_messages()
    assert message.id == "sagents_django.E027"
    assert repr(path) in message.msg


@pytest.mark.parametrize("value", ["user_files", 3, ("user", 42)])
def test_a_filesystem_scope_that_is_no_dotted_path_fails_e028(value: Any) -> None:
    with override_settings(SAGENTS={"FILESYSTEM_SCOPE": value}):
        assert sagents_ids() == {"sagents_django.E028"}


@pytest.mark.parametrize(
    "path",
    [
        "tests.runtime.file_agents.no_such_function",  # not there
        "tests.runtime.file_agents.DEBOUNCE_MS",  # not a function
    ],
)
def test_a_filesystem_scope_that_cannot_be_used_fails_e029(path: str) -> None:
    with override_settings(SAGENTS={"FILESYSTEM_SCOPE": path}):
        [message] = sagents_messages()
    assert message.id == "sagents_django.E029"
    assert repr(path) in message.msg


@pytest.mark.parametrize(
    ("secrets", "said"),
    [
        ({"token": "Bearer s3cret\r\nX-Evil: 1"}, "line breaks"),
        ({"token": ""}, "non-empty string values"),
        ({"bad name": "Bearer s3cret"}, "letters, digits and _"),
        ("Bearer s3cret", "must be a dict"),
    ],
)
def test_mcp_secrets_fail_e044_without_quoting_a_secret(
    secrets: Any, said: str
) -> None:
    with override_settings(SAGENTS={"MCP_SECRETS": secrets}):
        [message] = sagents_messages()
    assert message.id == "sagents_django.E044"
    assert said in message.msg and "s3cret" not in message.msg
    assert message.hint


def test_chat_pages_mounted_without_django_htmx_fail_e101_with_a_hint() -> None:
    from django.conf import settings

    without = [a for a in settings.INSTALLED_APPS if a != "django_htmx"]
    with override_settings(INSTALLED_APPS=without):
        [error] = [m for m in checks.run_checks() if m.id == "sagents_django.E101"]
        with pytest.raises(SystemCheckError, match=r"sagents_django\.E101"):
            call_command("check")
    assert "django_htmx" in error.msg and "registered tag library" in error.msg
    assert '"django_htmx"' in error.hint and "INSTALLED_APPS" in error.hint
    assert "sagents_django.E101" not in {m.id for m in checks.run_checks()}


def test_without_the_chat_pages_mounted_django_htmx_is_not_required() -> None:
    from django.conf import settings

    without = [a for a in settings.INSTALLED_APPS if a != "django_htmx"]
    with override_settings(INSTALLED_APPS=without, ROOT_URLCONF="tests.no_pages_urls"):
        ids = {m.id for m in checks.run_checks()}
    assert "sagents_django.E101" not in ids
