"""The top-level functions of Sagents' ``Sagents`` module, in Python form.

``new(**options)`` builds an Agent; ``execute(agent, state_or_messages)`` runs a turn
and blocks; ``aexecute(...)`` is the awaitable form.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .agent import Agent
from .modes import AgentResult
from .state import State


def new(**options: Any) -> Agent:
    """An Agent with the default middleware stack (see ``Agent`` for the options)."""
    return Agent(**options)


def execute(agent: Agent, state: State | Iterable[Any], **options: Any) -> AgentResult:
    """Run one turn and wait for it (for code without an event loop)."""
    return agent.execute(state, **options)


async def aexecute(
    agent: Agent, state: State | Iterable[Any], **options: Any
) -> AgentResult:
    """Run one turn; await it, or wrap it in ``asyncio.create_task``."""
    return await agent.aexecute(state, **options)
