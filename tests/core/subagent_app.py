"""An agent factory shared by the sub-agent tests and their fresh interpreters.

Code lives in code: a process that resumes a paused sub-agent rebuilds the same agent
from this module, then loads the state from JSON.
"""

from __future__ import annotations

from sagents_django.core import Agent, ChatModel, Tool
from sagents_django.core.middleware.subagent import SubAgent
from sagents_django.core.subagents import SubAgentConfig

CALLS: list[dict] = []


def _add(args: dict, _context: object) -> str:
    CALLS.append(args)
    return str(args["a"] + args["b"])


ADD = Tool(
    name="add",
    description="Add two numbers.",
    function=_add,
    parameters={
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
)


def build_parent(api_base: str, transport: str = "openai", **subagent_options) -> Agent:
    model = ChatModel(
        model="openai/fake-model",
        params={"api_base": api_base, "api_key": "test"},
        transport=transport,
        max_retries=0,
        stream_idle_timeout=5.0,
    )
    calculator = SubAgentConfig(
        name="calculator",
        description="Adds numbers carefully, with approval.",
        system_prompt="You are the calculator sub-agent.",
        tools=[ADD],
        interrupt_on={"add": True},
    )
    return Agent(
        agent_id="parent-1",
        model=model,
        base_system_prompt="You are the parent.",
        tools=[ADD],
        middleware=[(SubAgent, {"subagents": [calculator], **subagent_options})],
        replace_default_middleware=True,
    )
