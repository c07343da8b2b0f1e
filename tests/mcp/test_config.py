"""``SAGENTS["MCP_SERVERS"]`` and ``MCP_ALLOWED_HOSTS``: what is refused, with
which check id and message, and that values given are used as they are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from sagents_django.conf import sagents_settings
from sagents_django.mcp import mcp_tools
from sagents_django.mcp.config import parse_servers
from tests.mcp.conftest import stdio

SECRET = "Bearer hunter2-hunter2"


def messages(**sagents: Any) -> list[checks.CheckMessage]:
    with override_settings(SAGENTS=sagents):
        found = checks.run_checks()
    return [m for m in found if m.id and m.id.startswith("sagents_django.")]


@pytest.mark.parametrize(
    ("servers", "words"),
    [
        ("docs", "must be a dict of server name to options"),
        ({"docs": {"command": "python -m docs; rm -rf /"}}, "no shell parses it"),
        ({"docs": {"command": []}}, "non-empty list of non-empty strings"),
        ({"docs": {"command": ["python", 3]}}, "non-empty list of non-empty strings"),
        ({"docs": {"command": ["py"], "url": "http://h/mcp"}}, "not both or neither"),
        ({"docs": {}}, "not both or neither"),
        ({"docs": {"command": ["py"], "shell": True}}, "unknown options 'shell'"),
        ({"a__b": {"command": ["py"]}}, "MCP server name 'a__b' must be"),
        ({"": {"command": ["py"]}}, "MCP server name '' must be"),
        ({"docs": {"command": ["py"], "prefix": ""}}, "so it cannot be empty"),
        ({"docs": {"url": "ftp://h/mcp"}}, "must be an http:// or https:// URL"),
        ({"docs": {"url": "https://u:p@h/mcp"}}, "must not carry credentials"),
        ({"docs": {"url": "https://h/mcp", "env": {}}}, "'env'] are stdio options"),
        ({"docs": {"command": ["py"], "headers": {}}}, "'headers'] are HTTP options"),
        ({"docs": {"command": ["py"], "timeout": 0}}, "timeout must be a positive"),
        ({"docs": {"command": ["py"], "max_tools": 5000}}, "from 1 to 1000"),
        ({"docs": {"command": ["py"], "tools": "echo"}}, "a list of tool names"),
        ({"docs": {"command": ["py"], "idempotent": "yes"}}, "idempotent must be None"),
        (
            {"a": {"command": ["py"]}, "b": {"command": ["py"], "prefix": "a"}},
            "both use the prefix 'a'",
        ),
    ],
)
def test_bad_servers_fail_e040_with_the_reason(servers: Any, words: str) -> None:
    (message,) = messages(MCP_SERVERS=servers)

    assert message.id == "sagents_django.E040"
    assert words in message.msg
    with (
        override_settings(SAGENTS={"MCP_SERVERS": servers}),
        pytest.raises(ImproperlyConfigured, match="MCP_SERVERS"),
    ):
        mcp_tools(None)


def test_secret_values_are_never_repeated_in_an_error() -> None:
    servers = {
        "docs": {"url": "https://h/mcp", "headers": {"Authorization": SECRET, "X": 1}}
    }

    (message,) = messages(MCP_SERVERS=servers, MCP_ALLOWED_HOSTS=["h"])

    assert "headers must be a dict of strings to strings" in message.msg
    assert "hunter2" not in message.msg
    (server,) = parse_servers(
        {"docs": {"url": "https://h/mcp", "headers": {"Authorization": SECRET}}}
    ).values()
    assert "hunter2" not in repr(server)


@pytest.mark.parametrize("hosts", ["mcp.example.com", [""], ["https://h"], [3]])
def test_bad_allowed_hosts_fail_e041(hosts: Any) -> None:
    (message,) = messages(MCP_ALLOWED_HOSTS=hosts)

    assert message.id == "sagents_django.E041"


def test_an_http_server_on_a_host_not_allowed_fails_e042() -> None:
    servers = {"docs": {"url": "https://169.254.169.254/mcp"}}

    (message,) = messages(MCP_SERVERS=servers, MCP_ALLOWED_HOSTS=["mcp.example.com"])

    assert message.id == "sagents_django.E042"
    assert "host '169.254.169.254', which is not in" in message.msg


def test_good_servers_pass_and_read_as_given() -> None:
    servers = {
        "docs": {"command": ["python", "-m", "docs"], "idempotent": ["read"]},
        "tickets": {"url": "https://MCP.example.com/mcp", "prefix": "t", "timeout": 5},
    }

    assert messages(MCP_SERVERS=servers, MCP_ALLOWED_HOSTS=["mcp.example.com"]) == []
    with override_settings(SAGENTS={"MCP_SERVERS": servers}):
        assert servers == sagents_settings.MCP_SERVERS
    parsed = parse_servers(servers, ["mcp.example.com"])
    assert parsed["docs"].command == ("python", "-m", "docs")
    assert parsed["docs"].is_idempotent("read", None)
    assert not parsed["docs"].is_idempotent("write", True)
    assert parsed["tickets"].prefix == "t" and parsed["tickets"].timeout == 5.0


def test_a_command_is_run_as_its_arguments_with_no_shell(
    use_servers: Any, tmp_path: Path
) -> None:
    planted = tmp_path / "planted"
    use_servers(
        notes=stdio(
            "notes_server.py",
            f"$(touch {planted})",
            f"; touch {planted}",
            tools=["echo"],
        )
    )

    tools = mcp_tools(None)

    assert [t.name for t in tools] == ["notes__echo"]
    assert not planted.exists()


def test_a_servers_tools_carry_its_permissions() -> None:
    from types import SimpleNamespace

    from sagents_django.mcp.tools import build_tools

    [server] = parse_servers(
        {
            "notes": {
                "command": ["python", "server.py"],
                "permission": "notes.use_notes",
                "tool_permissions": {"delete": ["notes.delete_note"]},
            }
        }
    ).values()
    listed = [
        SimpleNamespace(
            name=name,
            title=None,
            description="",
            input_schema={"type": "object"},
            annotations=None,
        )
        for name in ("read", "delete")
    ]

    tools, problems = build_tools(server, tuple(listed), lambda s, r: lambda a, c: "")

    assert problems == ()
    assert [t.permissions for t in tools] == [
        ("notes.use_notes",),
        ("notes.use_notes", "notes.delete_note"),
    ]


@pytest.mark.parametrize(
    "options",
    [{"permission": "use_notes"}, {"tool_permissions": {"delete": "nodot"}}],
)
def test_a_misspelt_server_permission_fails_e040(options: dict[str, Any]) -> None:
    (message,) = messages(MCP_SERVERS={"notes": {"command": ["py"], **options}})
    assert message.id == "sagents_django.E040"
    assert "app_label.codename" in message.msg
