"""The runtime tests' agent (``tests.runtime.agents``) with the shop's order tools:
the factory a site with ORM tools names in ``SAGENTS["FACTORY"]``."""

from __future__ import annotations

from typing import Any

from sagents_django.core import Agent
from tests.runtime import agents
from tests.shop.tools import order_tools


def build_agent(*, agent_id: str, scope: Any, filesystem_scope: Any = None) -> Agent:
    return agents.build_agent(
        agent_id=agent_id,
        scope=scope,
        filesystem_scope=filesystem_scope,
        tools=order_tools(operations=["list", "search", "get", "count"]).tools(),
    )
