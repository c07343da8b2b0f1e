"""The project skeleton: Django checks, migrations, settings, the socket guard."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.test import override_settings

from sagents_django import conf
from sagents_django.conf import sagents_settings

REPO = Path(__file__).resolve().parent.parent


def test_manage_py_check_passes() -> None:
    call_command("check", fail_level="WARNING")


@pytest.mark.django_db
def test_migrations_are_complete() -> None:
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


def test_socket_guard_blocks_a_connection_to_another_host() -> None:
    with (
        socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock,
        pytest.raises(RuntimeError, match=r"Blocked network connection to .*10\.255"),
    ):
        sock.connect(("10.255.255.1", 80))


def test_socket_guard_blocks_create_connection_by_host_name() -> None:
    with pytest.raises(RuntimeError, match="Blocked network connection"):
        socket.create_connection(("api.openai.com", 443), timeout=1)


async def test_socket_guard_blocks_asyncio_connections_too() -> None:
    with pytest.raises(RuntimeError, match="Blocked network connection"):
        await asyncio.open_connection("10.255.255.1", 80)


def test_socket_guard_allows_loopback() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as client:
            assert client.connect_ex(("localhost", port)) == 0


def test_importing_the_core_loads_no_django_channels_celery_or_litellm_module() -> None:
    code = (
        "import json, sys\n"
        "import sagents_django.core\n"
        "names = [n for n in sys.modules"
        " if n.split('.')[0] in ('django', 'channels', 'celery', 'litellm')]\n"
        "print(json.dumps(sorted(names)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert json.loads(result.stdout) == []


@override_settings(SAGENTS={})
def test_conf_falls_back_to_embedded_defaults() -> None:
    assert sagents_settings.MODEL == "sagents/demo"
    assert sagents_settings.MODEL_PARAMS == {}
    assert sagents_settings.FALLBACK_MODELS == []
    assert sagents_settings.EXECUTOR == "inline"
    assert sagents_settings.MAX_STATE_BYTES == 20 * 1024 * 1024


def test_conf_is_reset_when_sagents_changes() -> None:
    with override_settings(SAGENTS={"MODEL": "openai/gpt-4o-mini"}):
        assert sagents_settings.MODEL == "openai/gpt-4o-mini"
        with override_settings(SAGENTS={"MODEL": "anthropic/claude"}):
            assert sagents_settings.MODEL == "anthropic/claude"
        assert sagents_settings.MODEL == "openai/gpt-4o-mini"


def test_conf_rejects_an_unknown_key() -> None:
    with pytest.raises(ImproperlyConfigured, match="Unknown SAGENTS setting 'NOPE'"):
        conf.get("NOPE")


def _check_ids() -> set[str]:
    return {message.id for message in checks.run_checks() if message.id}


@override_settings(SAGENTS="sagents/demo")
def test_check_e001_fires_when_sagents_is_not_a_dict() -> None:
    assert "sagents_django.E001" in _check_ids()


@pytest.mark.parametrize("model", ["", "   ", None, 42])
def test_check_e002_fires_when_model_is_not_a_non_empty_string(model: object) -> None:
    with override_settings(SAGENTS={"MODEL": model}):
        assert "sagents_django.E002" in _check_ids()


@override_settings(SAGENTS={"MODEL_PARAMS": ["temperature", 0]})
def test_check_e003_fires_when_model_params_is_not_a_dict() -> None:
    assert "sagents_django.E003" in _check_ids()


@override_settings(SAGENTS={"EXECUTOR": "threads"})
def test_check_e004_fires_for_an_unknown_executor() -> None:
    assert "sagents_django.E004" in _check_ids()


@override_settings(SAGENTS={"MODLE": "openai/gpt-4o"})
def test_check_w001_warns_about_an_unknown_key() -> None:
    assert "sagents_django.W001" in _check_ids()


def test_checks_pass_for_the_project_settings() -> None:
    assert not {i for i in _check_ids() if i.startswith("sagents_django.")}


def test_home_page_shows_the_configured_model(client, settings) -> None:
    settings.SAGENTS = {"MODEL": "openai/gpt-4o-mini"}
    response = client.get("/")
    assert response.status_code == 200
    assert b"sagents-django" in response.content
    assert b"openai/gpt-4o-mini" in response.content


def test_the_projects_pages_take_its_own_layout_through_the_override(
    client, settings
) -> None:
    response = client.get("/")
    # templates/sagents_django/base.html extends the site's base: its header.
    assert b"Sign in" in response.content
    assert b"Open the Django admin" in response.content


def test_the_app_renders_in_a_site_without_base_html_admin_or_sign_in(
    client, settings
) -> None:
    settings.ROOT_URLCONF = "tests.app_only_urls"
    settings.TEMPLATES = [
        {
            "BACKEND": "django.template.backends.django.DjangoTemplates",
            "DIRS": [],
            "APP_DIRS": True,
        }
    ]
    response = client.get("/")
    assert response.status_code == 200
    assert b"It works" in response.content
    assert b"Sign in" not in response.content
    assert b"Open the Django admin" not in response.content
    # No link to a sign-in page nothing serves: what to add instead.
    assert b"django.contrib.auth.urls" in response.content


@pytest.mark.django_db
def test_sign_in_page_renders(client) -> None:
    response = client.get("/accounts/login/")
    assert response.status_code == 200
    assert b"Sign in" in response.content


def test_celery_app_takes_json_only_and_acknowledges_late() -> None:
    from project import celery_app

    assert celery_app.main == "project"
    assert celery_app.conf.accept_content == ["json"]
    assert celery_app.conf.task_serializer == "json"
    assert celery_app.conf.task_acks_late is True
    assert celery_app.conf.task_reject_on_worker_lost is True
    assert celery_app.conf.worker_prefetch_multiplier == 1


def test_celery_workers_keep_running_turns_while_the_broker_is_away() -> None:
    from project import celery_app

    assert celery_app.conf.broker_connection_max_retries is None  # wait, never exit
    assert celery_app.conf.worker_cancel_long_running_tasks_on_connection_loss is False


def test_asgi_application_drains_on_sigterm_and_routes_http_and_websocket() -> None:
    from project.asgi import application
    from sagents_django.asgi import DrainOnSigterm

    assert isinstance(application, DrainOnSigterm)
    router = application.application
    assert set(router.application_mapping) == {"http", "websocket"}  # type: ignore[attr-defined]


HTTPS_ENVIRONMENT = {
    "SECURE_SSL_REDIRECT": "true",
    "SESSION_COOKIE_SECURE": "true",
    "CSRF_COOKIE_SECURE": "true",
    "SECURE_HSTS_SECONDS": "31536000",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "true",
    "SECURE_HSTS_PRELOAD": "true",
    "SECURE_PROXY_SSL_HEADER": "HTTP_X_FORWARDED_PROTO=https",
}


def manage(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    """``manage.py`` in a subprocess, with ``env`` as the only project variables."""
    environment = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SECURE_", "DJANGO_", "DATABASE_URL"))
        and k not in ("DEBUG", "SECRET_KEY", "ALLOWED_HOSTS")
        and not k.endswith("_COOKIE_SECURE")
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env={**environment, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_check_deploy_passes_with_the_https_variables_set() -> None:
    done = manage(
        ["check", "--deploy", "--fail-level", "WARNING"],
        DEBUG="false",
        SECRET_KEY="a-long-random-production-secret-" + "x7Qz" * 10,
        **HTTPS_ENVIRONMENT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout


def test_check_deploy_names_each_https_setting_while_they_are_unset() -> None:
    done = manage(
        ["check", "--deploy"],
        DEBUG="false",
        SECRET_KEY="a-long-random-production-secret-" + "x7Qz" * 10,
    )
    for warning in ("W004", "W008", "W012", "W016"):
        assert f"security.{warning}" in done.stderr + done.stdout


def test_a_malformed_proxy_ssl_header_stops_the_site_with_a_clear_error() -> None:
    done = manage(["check"], SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto")
    assert done.returncode != 0
    assert (
        "SECURE_PROXY_SSL_HEADER must look like HTTP_X_FORWARDED_PROTO=https, "
        "not 'X-Forwarded-Proto'" in done.stderr
    )
