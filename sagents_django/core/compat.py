"""Sagents' names, for code ported from Elixir: one module, so the rest of the
public surface keeps Python's names.

==========================================  =========================================
Sagents (Elixir)                            here
==========================================  =========================================
``Sagents.new!(%{system_prompt: ...})``     ``new(system_prompt=...)`` (an ``Agent``)
``Sagents.execute(agent, state)``           ``execute(agent, state)``; ``aexecute``
``State.new!(%{messages: [...]})``          ``State(messages=[...])`` (dicts, strings)
``Todo.resolved?/1``, ``Todo.open?/1``      ``todo.resolved``, ``todo.open``
``AgentServer.*``                           ``sagents_django.runtime.agent_server``
``AgentServer.queue_message_from_tool/3``   ``ToolContext.queue_message``
``Message.new_user!/1``                     ``Message.user``
==========================================  =========================================

Everything else keeps the name the reference gives it (``interrupt_on``,
``base_system_prompt``, ``handle_message``, the callback keys, the events).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .agent import Agent
from .exceptions import ConfigurationError
from .modes import AgentResult
from .state import State

__all__ = ["aexecute", "execute", "new"]

ALIASES = {"system_prompt": "base_system_prompt"}
"""Sagents option names ``new`` also takes, and the ``Agent`` option each is."""


def new(**options: Any) -> Agent:
    """An Agent with the default middleware stack; Sagents' option names too
    (``system_prompt`` for ``base_system_prompt``)."""
    for alias, name in ALIASES.items():
        if alias in options:
            if name in options:
                raise ConfigurationError(f"Pass {alias} or {name}, not both")
            options[name] = options.pop(alias)
    return Agent(**options)


def execute(agent: Agent, state: State | Iterable[Any], **options: Any) -> AgentResult:
    """Run one turn and wait for it (for code without an event loop)."""
    return agent.execute(state, **options)


async def aexecute(
    agent: Agent, state: State | Iterable[Any], **options: Any
) -> AgentResult:
    """Run one turn; await it, or wrap it in ``asyncio.create_task``."""
    return await agent.aexecute(state, **options)
