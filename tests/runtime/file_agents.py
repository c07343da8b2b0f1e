"""The factory of the file tests (``test_file_flush.py``, the shared-scope socket
tests): an agent with only the FileSystem middleware, its files in the database
with a long debounce (an edit of an existing file waits in the process), and
``hold``, a tool that returns once its worker drains (deterministic: no sleep);
and ``not_a_scope``, a broken ``SAGENTS["FILESYSTEM_SCOPE"]``."""

from __future__ import annotations

import threading
from typing import Any

from sagents_django.conf import sagents_settings
from sagents_django.core import Agent, ChatModel, Tool
from sagents_django.core.filesystem import FileSystemConfig
from sagents_django.core.middleware.filesystem import FileSystem
from sagents_django.filesystems import DatabasePersistence
from sagents_django.runtime import draining

DEBOUNCE_MS = 600_000
"""Ten minutes: longer than any test, so only a flush stores an edit."""
HOLD_SECONDS = 60


def hold(_args: dict[str, Any], _context: Any) -> str:
    """Return once this process drains. Its listener is called after the turn's
    (registered when the turn started), so the turn's handover is asked before
    this tool's result reaches the turn."""
    released = threading.Event()
    remove = draining.on_drain(released.set)
    try:
        return "released" if released.wait(HOLD_SECONDS) else "not released"
    finally:
        remove()


HOLD = Tool(name="hold", description="Wait for the worker to drain.", function=hold)


def build_agent(*, agent_id: str, scope: Any, filesystem_scope: Any = None) -> Agent:
    storage = FileSystemConfig(
        default=True, persistence=DatabasePersistence(), debounce_ms=DEBOUNCE_MS
    )
    return Agent(
        agent_id=agent_id,
        model=ChatModel(
            model=sagents_settings.MODEL,
            params=sagents_settings.MODEL_PARAMS,
            max_retries=0,
        ),
        tools=[HOLD],
        middleware=[FileSystem(configs=[storage])],
        replace_default_middleware=True,
        filesystem_scope=filesystem_scope,
        tool_context={"scope": scope},
    )


def not_a_scope(scope: Any, conversation: Any) -> Any:
    """A broken ``SAGENTS["FILESYSTEM_SCOPE"]``: no scope at all."""
    return {"user": conversation.user_id}
