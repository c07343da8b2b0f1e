"""The factory of the durability tests' workers: the test agent plus tools that
leave a trace on disk (so a test counts how often each really ran) and one that
kills its own worker.

- ``note`` (not idempotent): appends a line to ``path``, then sleeps ``seconds``;
- ``read_note`` (idempotent): the same, marked safe to run again;
- ``crash`` (idempotent, so a takeover runs it again): SIGKILLs its process.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from sagents_django.core import Agent, Tool
from tests.runtime import agents

PARAMETERS = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "seconds": {"type": "number"}},
    "required": ["path"],
}


def note(args: dict[str, Any], _context: Any) -> str:
    with open(args["path"], "a") as out:
        out.write(f"{os.getpid()}\n")
    time.sleep(float(args.get("seconds", 0)))
    return f"noted in {args['path']}"


def crash(_args: dict[str, Any], _context: Any) -> str:
    os.kill(os.getpid(), signal.SIGKILL)
    return "unreachable"


TOOLS = [
    Tool(name="note", description="Note.", function=note, parameters=PARAMETERS),
    Tool(
        name="read_note",
        description="Note (idempotent).",
        function=note,
        parameters=PARAMETERS,
        idempotent=True,
    ),
    Tool(
        name="crash",
        description="Crash.",
        function=crash,
        parameters={"type": "object", "properties": {}},
        idempotent=True,
    ),
]


def build_agent(*, agent_id: str, scope: Any, filesystem_scope: Any = None) -> Agent:
    return agents.build_agent(
        agent_id=agent_id, scope=scope, filesystem_scope=filesystem_scope, tools=TOOLS
    )
