"""The runtime: turns run by an executor (in-process or Celery), events published
over the channel layer. ``agent_server`` is the entry point (see ``server``)."""

from __future__ import annotations

from .server import AgentServer, Submission, agent_server
from .waiting import RunOutcome, RunTimeout

__all__ = ["AgentServer", "RunOutcome", "RunTimeout", "Submission", "agent_server"]
