"""MCP servers kept in the database (``StoredMcpServer``): offered to their user or
tenant only, their secrets named (never stored, never shown), their URLs held to
the allow-list when saved and again when offered, against the real HTTP server."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from sagents_django.mcp import mcp_tools, server_statuses
from sagents_django.models import StoredMcpServer
from sagents_django.scope import Scope
from tests.mcp.conftest import TOKEN, Counter, HttpServer
from tests.mcp.helpers import run

pytestmark = pytest.mark.django_db

SECRET = f"Bearer {TOKEN}"


@pytest.fixture
def users() -> dict[str, User]:
    """alice and bob work for acme, carol for globex (a tenant is an account
    user here: the test project's conversations belong to users)."""
    names = ("alice", "bob", "carol", "acme", "globex")
    return {name: User.objects.create_user(name) for name in names}


def scope_of(users: dict[str, User], name: str) -> Scope:
    tenant = {"alice": "acme", "bob": "acme", "carol": "globex"}[name]
    return Scope(user=users[name], owner=users[tenant])


@pytest.fixture
def allow_rows(use_servers: Any, settings: Any) -> Callable[..., None]:
    """The site allows database servers (and names servers in settings)."""

    def allow(on: bool = True, **servers: Any) -> None:
        use_servers(**servers)
        settings.SAGENTS = {
            **settings.SAGENTS,
            "MCP_DATABASE_SERVERS": on,
            "MCP_SECRETS": {"notes_token": SECRET, "other_token": "Bearer other"},
        }

    return allow


def row(**values: Any) -> StoredMcpServer:
    """A row saved as the ORM would (no clean(): a hostile or stale row)."""
    values.setdefault("headers", {"Authorization": "notes_token"})
    return StoredMcpServer.objects.create(**values)


def offered(scope: Any) -> set[str]:
    return {tool.name for tool in mcp_tools(scope)}


def test_a_users_server_goes_to_that_user_and_a_tenants_to_its_members_only(
    allow_rows: Any, users: dict[str, User], http_server: HttpServer
) -> None:
    allow_rows()
    row(user=users["alice"], name="mine", url=http_server.url, tools=["token"])
    row(tenant=str(users["acme"].pk), name="shared", url=http_server.url)
    row(tenant=str(users["globex"].pk), name="theirs", url=http_server.url)

    alice = mcp_tools(scope_of(users, "alice"))
    bob = offered(scope_of(users, "bob"))
    carol = offered(scope_of(users, "carol"))

    assert {t.name for t in alice} == {"mine__token"} | {
        name for name in bob if name.startswith("shared__")
    }
    assert "shared__echo" in bob and not any(n.startswith("mine__") for n in bob)
    assert carol and all(name.startswith("theirs__") for name in carol)
    assert offered(Scope(user=None)) == set() and offered(None) == set()
    # The row's header carries the secret it names.
    result = asyncio.run(run(alice, "mine__token", {}))
    assert result.content == "token ok"
    shown = repr(server_statuses()) + repr(alice)
    assert TOKEN not in shown


def test_rows_are_not_offered_unless_the_site_allows_them(
    allow_rows: Any, users: dict[str, User], http_server: HttpServer
) -> None:
    allow_rows(on=False)
    row(user=users["alice"], name="mine", url=http_server.url)

    assert offered(scope_of(users, "alice")) == set()


def test_another_users_or_tenants_id_gets_nothing_of_theirs(
    allow_rows: Any, users: dict[str, User], http_server: HttpServer
) -> None:
    allow_rows()
    row(user=users["bob"], name="bobs", url=http_server.url)
    row(tenant=str(users["globex"].pk), name="globex", url=http_server.url)
    # A tenant id that is alice's own user id is not her tenant: a tenant is
    # what her scope's owner is.
    row(tenant=str(users["alice"].pk), name="mislabelled", url=http_server.url)

    assert offered(scope_of(users, "alice")) == set()
    # A scope that owns nothing gets only its user's own rows.
    assert offered(Scope(user=users["carol"], owner=None)) == set()


def test_a_disabled_row_and_one_whose_name_another_took_are_left_out(
    allow_rows: Any,
    users: dict[str, User],
    http_server: HttpServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    allow_rows(notes=http_server.settings())
    row(user=users["alice"], name="off", url=http_server.url, enabled=False)
    row(user=users["alice"], name="notes", url=http_server.url)  # a settings name
    row(user=users["alice"], name="dup", url=http_server.url, tools=["echo"])
    row(tenant=str(users["acme"].pk), name="dup", url=http_server.url)

    names = offered(scope_of(users, "alice"))

    assert {n for n in names if not n.startswith("notes__")} == {"dup__echo"}
    assert "server in SAGENTS['MCP_SERVERS']" in caplog.text
    assert "a server offered before it has that name" in caplog.text


@pytest.mark.parametrize(
    "url",
    [
        "http://mcp.example.org/mcp",  # a host that is not allowed
        "file:///etc/passwd",
        "http://user:pw@127.0.0.1/mcp",
        "gopher://127.0.0.1/mcp",
        "http://127.0.0.1:99999/mcp",
        "http://127.0.0.1/mcp\r\nHost: evil",
    ],
)
def test_a_hostile_url_in_a_row_is_never_reached(
    allow_rows: Any,
    users: dict[str, User],
    caplog: pytest.LogCaptureFixture,
    url: str,
) -> None:
    allow_rows()
    row(user=users["alice"], name="evil", url=url)

    assert offered(scope_of(users, "alice")) == set()
    assert "its tools are not offered" in caplog.text
    assert not any(s.name.startswith("evil#") for s in server_statuses())


def test_a_row_redirecting_to_another_host_is_not_followed(
    allow_rows: Any, users: dict[str, User], http_server: HttpServer
) -> None:
    allow_rows()
    moved = row(
        user=users["alice"],
        name="moved",
        url=f"http://127.0.0.1:{http_server.port}/moved/mcp",
    )

    assert offered(scope_of(users, "alice")) == set()
    [status] = [s for s in server_statuses() if s.name == f"moved#{moved.pk}"]
    assert status.state == "failed" and "not followed" in (status.last_error or "")
    assert Counter.hits == 0


def test_a_row_whose_host_left_the_allow_list_is_refused_when_offered(
    allow_rows: Any,
    users: dict[str, User],
    http_server: HttpServer,
    settings: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    allow_rows()
    kept = row(user=users["alice"], name="kept", url=http_server.url)
    kept.full_clean()  # valid when saved
    settings.SAGENTS = {**settings.SAGENTS, "MCP_ALLOWED_HOSTS": ["mcp.example.com"]}

    assert offered(scope_of(users, "alice")) == set()
    assert "'127.0.0.1' is not in SAGENTS['MCP_ALLOWED_HOSTS']" in caplog.text


def test_a_secret_that_is_gone_from_the_settings_leaves_the_row_out(
    allow_rows: Any,
    users: dict[str, User],
    http_server: HttpServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    allow_rows()
    row(
        user=users["alice"],
        name="lost",
        url=http_server.url,
        headers={"Authorization": "no_such_secret"},
    )

    assert offered(scope_of(users, "alice")) == set()
    assert "is not in SAGENTS['MCP_SECRETS']" in caplog.text
    assert TOKEN not in caplog.text


# Saving through clean() -------------------------------------------------------------
def problems(users: dict[str, User], **values: Any) -> dict[str, list[str]]:
    fields: dict[str, Any] = {
        "user": users["alice"],
        "name": "tickets",
        "url": "http://127.0.0.1:8000/mcp",
        "headers": {"Authorization": "notes_token"},
    }
    fields.update(values)
    with pytest.raises(ValidationError) as caught:
        StoredMcpServer(**fields).full_clean()
    return caught.value.message_dict


@pytest.mark.parametrize(
    ("values", "field", "said"),
    [
        ({"url": "http://mcp.example.org/mcp"}, "url", "is not in SAGENTS"),
        ({"url": "file:///etc/passwd"}, "url", "http:// or https://"),
        ({"url": "javascript:alert(1)"}, "url", "http:// or https://"),
        ({"url": "http://u:p@127.0.0.1/"}, "url", "credentials"),
        ({"url": "http://127.0.0.1/" + "a" * 2000}, "url", "at most 2000"),
        ({"url": "http://127.0.0.1/\r\nX: y"}, "url", "control characters"),
        ({"name": "n" * 31}, "name", "at most 30"),
        ({"name": "a__b"}, "name", "no '__'"),
        ({"name": "notes"}, "name", "SAGENTS['MCP_SERVERS']"),
        ({"headers": {"X-Evil\r\nHost": "notes_token"}}, "headers", "header name"),
        ({"headers": {"Authorization": "a\r\nX-Evil: 1"}}, "headers", "must name"),
        ({"headers": {"Authorization": SECRET}}, "headers", "not hold a secret"),
        ({"headers": {"Host": "notes_token"}}, "headers", "cannot be replaced"),
        ({"headers": {"Authorization": "nope"}}, "headers", "not in SAGENTS"),
        ({"headers": ["Authorization"]}, "headers", "must be an object"),
        ({"headers": {f"X-{i}": "notes_token" for i in range(21)}}, "headers", "20"),
        ({"tools": "echo"}, "tools", "list"),
        ({"tools": ["x" * 129]}, "tools", "1 to 128"),
        ({"tools": ["a"] * 1001}, "tools", "at most 1000"),
        ({"tenant": "1"}, "tenant", "either a user or a tenant"),
        ({"user": None, "tenant": "999999"}, "tenant", "No user has"),
        ({"user": None, "tenant": "x" * 300}, "tenant", "at most 255"),
        ({"user": None}, "tenant", "either a user or a tenant"),
    ],
)
def test_clean_refuses_a_bad_row_without_quoting_a_secret(
    allow_rows: Any,
    users: dict[str, User],
    values: dict[str, Any],
    field: str,
    said: str,
) -> None:
    allow_rows(notes={"url": "http://127.0.0.1:1/mcp"})

    found = problems(users, **values)

    assert said in " ".join(found.get(field, [])), found
    assert TOKEN not in repr(found)


def test_clean_accepts_a_good_row_and_keeps_the_tenant_as_the_scope_gives_it(
    allow_rows: Any, users: dict[str, User]
) -> None:
    allow_rows()
    server = StoredMcpServer(
        tenant=f" {users['acme'].pk}".strip(),
        name="tickets",
        url="https://127.0.0.1/mcp",
        headers={"Authorization": "notes_token"},
        tools=["search"],
    )

    server.full_clean()

    assert server.tenant == str(users["acme"].pk)
