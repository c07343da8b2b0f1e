"""The factory the runtime tests name in SAGENTS["FACTORY"] (also in worker processes).

The site's default stack without conversation titles (a title request would take a
reply scripted for the turn), with ``write_file`` waiting for approval, a ``Notes``
middleware that keeps what ``notify_middleware`` tells it, and ``count_users``,
offered only to users who hold ``auth.view_user`` (test_tool_access.py).
"""

from __future__ import annotations

from typing import Any

from project.agents import factory
from sagents_django.conf import sagents_settings
from sagents_django.core import (
    Agent,
    ChatModel,
    Middleware,
    State,
    Tool,
    build_default_middleware,
)
from sagents_django.tool_access import ScopeToolAccess

STALL_SECONDS = 1.0
"""A provider silent this long has stalled (the site default is two minutes)."""


class Notes(Middleware):
    def handle_message(self, message: Any, state: State) -> State:
        return state.put_metadata("notes", [*state.get_metadata("notes", []), message])


COUNT_USERS = Tool(
    name="count_users",
    description="How many users the site has.",
    function=lambda args, context: "42 users",
    permission="auth.view_user",
)


def build_agent(
    *, agent_id: str, scope: Any, filesystem_scope: Any = None, tools: Any = ()
) -> Agent:
    middleware = build_default_middleware(
        filesystem_opts={"configs": factory.build_file_storage()},
        interrupt_on={"write_file": True},
    )
    middleware.append((Notes, {"id": "notes"}))
    return Agent(
        agent_id=agent_id,
        model=ChatModel(
            model=sagents_settings.MODEL,
            params=sagents_settings.MODEL_PARAMS,
            max_retries=0,  # a failure ends the turn at once (tests of failures)
            stream_idle_timeout=STALL_SECONDS,
        ),
        base_system_prompt=factory.SYSTEM_PROMPT,
        tools=[*tools, COUNT_USERS],
        middleware=middleware,
        replace_default_middleware=True,
        filesystem_scope=filesystem_scope,
        tool_context={"scope": scope},
        tool_access=ScopeToolAccess(scope),
    )
