"""The factory the MCP turn tests name in SAGENTS["FACTORY"] (also in their
worker process): the runtime tests' agent with the configured MCP servers' tools,
``notes__delete_note`` waiting for approval."""

from __future__ import annotations

from typing import Any

from project.agents import factory
from sagents_django.conf import sagents_settings
from sagents_django.core import Agent, ChatModel, build_default_middleware
from sagents_django.mcp import mcp_tools

INTERRUPT_ON = {"write_file": True, "notes__delete_note": True}


def build_agent(*, agent_id: str, scope: Any, filesystem_scope: Any = None) -> Agent:
    return Agent(
        agent_id=agent_id,
        model=ChatModel(
            model=sagents_settings.MODEL,
            params=sagents_settings.MODEL_PARAMS,
            max_retries=0,
        ),
        base_system_prompt=factory.SYSTEM_PROMPT,
        tools=mcp_tools(scope),
        middleware=build_default_middleware(
            filesystem_opts={"configs": factory.build_file_storage()},
            interrupt_on=INTERRUPT_ON,
        ),
        replace_default_middleware=True,
        filesystem_scope=filesystem_scope,
        tool_context={"scope": scope},
    )
