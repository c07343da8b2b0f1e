"""Agents whose sub-agents delegate to sub-agents, for the tests of stored depth.

One scripted model serves every level (a sub-agent inherits its parent's model): each
level calls ``task`` to start the next, and the deepest one calls ``echo``, which
waits for approval, so every level's conversation is stored inside its parent's.
"""

from __future__ import annotations

import json
from typing import Any

from sagents_django.core import Agent, Message, Tool, ToolCall
from sagents_django.core.middleware.subagent import SubAgent
from sagents_django.core.subagents import SubAgentConfig
from sagents_django.core.testing import ScriptedModel

ECHO = Tool(
    name="echo",
    description="Echo anything.",
    function=lambda args, context: "echoed",
    parameters={"type": "object"},
)


def raw_call(call_id: str, name: str, raw_arguments: str) -> Message:
    return Message.assistant(
        tool_calls=[ToolCall(call_id=call_id, name=name, raw_arguments=raw_arguments)]
    )


def nested_json(depth: int, leaf: str = "1") -> str:
    """JSON arguments of exactly ``depth`` levels (``{"k": 1}`` is 1)."""
    return '{"k":' * depth + leaf + "}" * depth


def chain(levels: int, echo_arguments: str, *replies: Any) -> Agent:
    """An agent with ``levels`` sub-agents below it, the deepest calling echo."""
    script: list[Any] = [
        raw_call(
            f"t{level}",
            "task",
            json.dumps({"instructions": "go", "subagent_type": f"level{level}"}),
        )
        for level in range(1, levels + 1)
    ]
    script += [raw_call("e1", "echo", echo_arguments), *replies]
    config = SubAgentConfig(
        name=f"level{levels}",
        description="Echoes, with approval.",
        tools=[ECHO],
        interrupt_on={"echo": True},
    )
    for level in range(levels - 1, 0, -1):
        config = SubAgentConfig(
            name=f"level{level}",
            description="Delegates.",
            tools=[ECHO],
            middleware=[(SubAgent, {"subagents": [config], "general_purpose": False})],
        )
    return Agent(
        model=ScriptedModel(script),
        tools=[ECHO],
        middleware=[(SubAgent, {"subagents": [config], "general_purpose": False})],
        replace_default_middleware=True,
    )
