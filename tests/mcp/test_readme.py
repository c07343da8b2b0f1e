"""The docs' "Tools from MCP servers" section is true: its settings pass the
checks, and its factory code offers a server's tools."""

from __future__ import annotations

import os
from typing import Any

from django.core import checks
from django.test import override_settings

from tests.docs import marked
from tests.mcp.conftest import stdio


def blocks() -> list[str]:
    return [marked("mcp-settings").code, marked("mcp-factory").code]


def test_the_readmes_settings_pass_the_checks() -> None:
    settings_code, _factory = blocks()
    namespace: dict[str, Any] = {"os": os}
    os.environ["TICKETS_TOKEN"] = "t"
    try:
        exec(settings_code, namespace)
    finally:
        del os.environ["TICKETS_TOKEN"]

    with override_settings(SAGENTS=namespace["SAGENTS"]):
        found = [m for m in checks.run_checks() if m.id.startswith("sagents_django.")]
    assert found == []


def test_the_readmes_factory_offers_a_servers_tools(use_servers: Any) -> None:
    _settings, factory_code = blocks()
    namespace: dict[str, Any] = {}
    exec(factory_code, namespace)
    use_servers(tickets=stdio(tools=["echo"]))

    tools = namespace["build_tools"](scope=None)

    assert [t.name for t in tools] == ["tickets__echo"]
    assert set(namespace["INTERRUPT_ON"]) == {"tickets__create_ticket"}
