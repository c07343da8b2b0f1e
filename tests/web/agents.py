"""The factory the browser tests' site names: the project's agent (titles on), with
``write_file`` waiting for approval, so a turn of the demo model pauses once."""

from __future__ import annotations

from typing import Any

from project.agents import factory
from sagents_django.core import Agent


def build_agent(*, agent_id: str, scope: Any, filesystem_scope: Any = None) -> Agent:
    return factory.build_agent(
        agent_id=agent_id,
        scope=scope,
        filesystem_scope=filesystem_scope,
        interrupt_on={"write_file": True},
    )
