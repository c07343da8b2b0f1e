"""MCP servers in the admin: the database's rows with their status (checked from
the admin against the real HTTP server), the settings' servers on a page of their
own, no secret value anywhere, every error escaped and cut short."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from sagents_django.admin.mcp import ERROR_CHARS, status_cell
from sagents_django.mcp.status import ServerStatus
from sagents_django.models import StoredMcpServer
from tests.mcp.conftest import TOKEN, HttpServer

pytestmark = pytest.mark.django_db

SECRET = f"Bearer {TOKEN}"
CHANGELIST = "admin:sagents_django_storedmcpserver_changelist"
SETTINGS_PAGE = "admin:sagents_django_mcp_settings_servers"
HOSTILE = "<script>alert(1)</script>"


@pytest.fixture
def site(use_servers: Any, settings: Any) -> Any:
    def configure(**servers: Any) -> None:
        use_servers(**servers)
        settings.SAGENTS = {
            **settings.SAGENTS,
            "MCP_DATABASE_SERVERS": True,
            "MCP_SECRETS": {"notes_token": SECRET},
        }

    return configure


@pytest.fixture
def staff(admin_user: User) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


def test_the_changelist_checks_a_row_and_shows_it_up_without_its_secret(
    site: Any, staff: Client, admin_user: User, http_server: HttpServer
) -> None:
    site()
    server = StoredMcpServer.objects.create(
        user=admin_user,
        name="notes",
        url=http_server.url,
        headers={"Authorization": "notes_token"},
    )
    url = reverse(CHANGELIST)

    before = staff.get(url).content.decode()
    checked = staff.post(
        url,
        {"action": "check_now", "_selected_action": [server.pk]},
        follow=True,
    ).content.decode()
    after = staff.get(url).content.decode()

    assert "not checked" in before
    assert "Notes: up, 9 tools" in checked  # the admin's messages: capfirst
    assert 'class="sagents-mcp-up">up</span>, 9 tools <small>(checked 2' in after
    assert "Servers in settings" in after
    for page in (before, checked, after):
        assert TOKEN not in page


def test_the_change_form_shows_secret_names_never_their_values(
    site: Any, staff: Client, admin_user: User
) -> None:
    site()
    server = StoredMcpServer.objects.create(
        user=admin_user,
        name="notes",
        url="http://127.0.0.1:1/mcp",
        headers={"Authorization": "notes_token"},
    )

    page = staff.get(
        reverse("admin:sagents_django_storedmcpserver_change", args=[server.pk])
    ).content.decode()

    assert "notes_token" in page and TOKEN not in page
    assert "not checked" in page


def test_the_add_form_refuses_a_secret_typed_into_a_header(
    site: Any, staff: Client, admin_user: User
) -> None:
    site()

    page = staff.post(
        reverse("admin:sagents_django_storedmcpserver_add"),
        {
            "name": "notes",
            "user": admin_user.pk,
            "tenant": "",
            "url": "http://127.0.0.1:1/mcp",
            "headers": f'{{"Authorization": "{SECRET}"}}',
            "tools": "null",
            "enabled": "on",
        },
    ).content.decode()

    assert "not hold a secret" in page
    assert not StoredMcpServer.objects.exists()


def test_a_row_that_would_not_be_offered_says_why(
    site: Any, staff: Client, admin_user: User
) -> None:
    site()
    StoredMcpServer.objects.create(
        user=admin_user, name="far", url="http://mcp.example.org/mcp"
    )

    page = staff.get(reverse(CHANGELIST)).content.decode()

    assert "not offered" in page and "is not in SAGENTS[&#x27;MCP_ALLOWED_HOSTS" in page


def test_the_settings_page_lists_the_settings_servers_and_checks_them(
    site: Any, staff: Client, http_server: HttpServer
) -> None:
    site(
        notes=http_server.settings(headers={"Authorization": SECRET}),
        down={"url": "http://127.0.0.1:1/mcp", "connect_timeout": 2},
    )
    url = reverse(SETTINGS_PAGE)

    before = staff.get(url).content.decode()
    after = staff.post(url, follow=True).content.decode()

    assert before.count("not checked") == 2
    assert "<td>notes</td>" in after and "<td>127.0.0.1</td>" in after
    assert 'class="sagents-mcp-up">up</span>' in after
    assert 'class="sagents-mcp-down">down</span>' in after
    assert "could not connect" in after
    assert TOKEN not in before + after


def test_the_settings_page_needs_the_view_permission_and_checking_the_change_one(
    site: Any, django_user_model: Any
) -> None:
    site()
    user = django_user_model.objects.create_user("clerk", is_staff=True)
    client = Client()
    client.force_login(user)
    url = reverse(SETTINGS_PAGE)

    assert client.get(url).status_code == 403
    user.user_permissions.add(Permission.objects.get(codename="view_storedmcpserver"))
    assert client.get(url).status_code == 200
    assert client.post(url).status_code == 403


def test_a_status_error_is_escaped_and_cut_short() -> None:
    status = ServerStatus(
        name="notes", transport="http", target="127.0.0.1"
    ).with_error(HOSTILE + "x" * 1000, retry_at=None)

    cell = str(status_cell(status, None))

    assert HOSTILE not in cell and "&lt;script&gt;" in cell
    assert "x" * ERROR_CHARS not in cell and "…" in cell
