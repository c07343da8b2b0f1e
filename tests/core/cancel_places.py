"""The places a turn can be waiting when Stop is pressed, as runnable scenarios.

Shared by tests/core/test_cancellation.py (one test per place) and
bench/cancel_latency.py (the latency of each place over many runs). Each place scripts
the fake server so that the turn would wait ``long`` seconds there, and says when the
turn has reached that wait (``ready``); ``run_place`` then calls ``CancelToken.cancel``
from another thread, as the runtime's listener will, and measures how long the turn
takes to return after it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sagents_django.core import Agent, AgentResult, CancelToken, Tool
from sagents_django.core.middleware.subagent import SubAgent
from sagents_django.core.subagents import SubAgentConfig
from tests.core.conftest import model_for
from tests.fakes.openai_server import FakeOpenAIServer, fault, reply, tool_call

TEXT = " ".join(f"word{i}" for i in range(100))
SYNC_TOOL_SECONDS = 0.3


@dataclass
class Setup:
    """One scripted turn, waiting somewhere for ``long`` seconds."""

    agent: Agent
    ready: Callable[[], bool]
    """True once the turn waits where this place says (then Stop is pressed)."""
    callbacks: list[dict[str, Any]] = field(default_factory=list)
    marks: dict[str, Any] = field(default_factory=dict)
    """What the scenario's tools and callbacks saw (started, finished_at...)."""


@dataclass
class Outcome:
    result: AgentResult
    cancelled_at: float
    returned_at: float
    requests: int
    marks: dict[str, Any]

    @property
    def latency(self) -> float:
        """Seconds from ``cancel()`` (or the end of a sync tool that ran on past it,
        which cannot be interrupted) to the turn's return."""
        settled = max(self.cancelled_at, self.marks.get("finished_at", 0.0))
        return self.returned_at - settled


def _agent(server: FakeOpenAIServer, transport: str, **options: Any) -> Agent:
    model = model_for(server, transport, stream_idle_timeout=600.0, max_retries=2)
    return Agent(model=model, replace_default_middleware=True, **options)


def _counting(marks: dict[str, Any]) -> dict[str, Any]:
    marks["deltas"] = []
    marks["identified"] = []
    return {
        "on_llm_new_delta": lambda ex, deltas: marks["deltas"].extend(deltas),
        "on_tool_call_identified": lambda ex, call, _t: marks["identified"].append(
            call
        ),
    }


def first_byte(server: FakeOpenAIServer, transport: str, long: float) -> Setup:
    server.script(fault.slow_first_byte(long, then=reply("Too late")))
    return Setup(agent=_agent(server, transport), ready=lambda: bool(server.requests))


def mid_stream(server: FakeOpenAIServer, transport: str, long: float) -> Setup:
    server.script(reply(TEXT, chunks=100, delay=long / 100))
    marks: dict[str, Any] = {}
    return Setup(
        agent=_agent(server, transport),
        ready=lambda: len(marks["deltas"]) >= 3,
        callbacks=[_counting(marks)],
        marks=marks,
    )


def gap(server: FakeOpenAIServer, transport: str, long: float) -> Setup:
    # Events: 0 the role chunk, 1 "Hello ", then silence before 2 "there".
    server.script(reply("Hello there", chunks=2, gaps={2: long}))
    marks: dict[str, Any] = {}
    return Setup(
        agent=_agent(server, transport),
        ready=lambda: len(marks["deltas"]) >= 1,
        callbacks=[_counting(marks)],
        marks=marks,
    )


def tool_call_arguments(server: FakeOpenAIServer, transport: str, long: float) -> Setup:
    marks: dict[str, Any] = {"ran": []}
    add = Tool(
        name="add",
        description="Add.",
        function=lambda args, _ctx: marks["ran"].append(args) or "3",
    )
    call = tool_call("add", {"a": 1, "b": 2, "note": "x" * 40}, id="add_1")
    # Events: 0 the role chunk, 1 the call's id and name, 2 the first piece of its
    # arguments, then silence before the rest.
    server.script(reply(tool_calls=[call], args_chunks=5, gaps={3: long}))
    return Setup(
        agent=_agent(server, transport, tools=[add]),
        ready=lambda: len(marks["deltas"]) >= 2,
        callbacks=[_counting(marks)],
        marks=marks,
    )


def retry_backoff(server: FakeOpenAIServer, transport: str, long: float) -> Setup:
    server.script(fault.http(429, retry_after=long), reply("Too late"))
    return Setup(
        agent=_agent(server, transport),
        ready=lambda: bool(server.requests) and server.requests[0].done.is_set(),
    )


def async_tool(server: FakeOpenAIServer, transport: str, long: float) -> Setup:
    marks: dict[str, Any] = {"started": threading.Event(), "interrupted": False}

    async def wait(args: dict[str, Any], _ctx: Any) -> str:
        marks["started"].set()
        try:
            await asyncio.sleep(long)
        except asyncio.CancelledError:
            marks["interrupted"] = True
            raise
        return "waited"

    server.script(
        reply(tool_calls=[tool_call("wait", {}, id="wait_1")]), reply("Never asked")
    )
    tool = Tool(name="wait", description="Wait.", function=wait)
    return Setup(
        agent=_agent(server, transport, tools=[tool]),
        ready=marks["started"].is_set,
        marks=marks,
    )


def sync_tool(server: FakeOpenAIServer, transport: str, long: float) -> Setup:
    marks: dict[str, Any] = {"started": threading.Event()}

    def work(args: dict[str, Any], _ctx: Any) -> str:
        marks["started"].set()
        time.sleep(SYNC_TOOL_SECONDS)  # a thread: it cannot be interrupted
        marks["finished_at"] = time.monotonic()
        return "work done"

    server.script(
        reply(tool_calls=[tool_call("work", {}, id="work_1")]), reply("Never asked")
    )
    tool = Tool(name="work", description="Work.", function=work)
    return Setup(
        agent=_agent(server, transport, tools=[tool]),
        ready=marks["started"].is_set,
        marks=marks,
    )


def task(subagent_type: str, call_id: str) -> Any:
    arguments = {"instructions": "Do the work.", "subagent_type": subagent_type}
    return tool_call("task", arguments, id=call_id)


def subagent_depth_2(server: FakeOpenAIServer, transport: str, long: float) -> Setup:
    """parent -> task(manager) -> manager -> task(worker) -> worker waits."""
    worker = SubAgentConfig(name="worker", description="Works.")
    manager = SubAgentConfig(
        name="manager",
        description="Delegates.",
        middleware=[(SubAgent, {"subagents": [worker], "general_purpose": False})],
    )
    server.script(
        reply(tool_calls=[task("manager", "task_parent")]),
        reply(tool_calls=[task("worker", "task_manager")]),
        fault.slow_first_byte(long, then=reply("Too late")),
    )
    agent = _agent(
        server,
        transport,
        middleware=[(SubAgent, {"subagents": [manager], "general_purpose": False})],
    )
    return Setup(agent=agent, ready=lambda: len(server.requests) >= 3)


PLACES: dict[str, Callable[[FakeOpenAIServer, str, float], Setup]] = {
    "first_byte": first_byte,
    "mid_stream": mid_stream,
    "gap": gap,
    "tool_call_arguments": tool_call_arguments,
    "retry_backoff": retry_backoff,
    "async_tool": async_tool,
    "sync_tool": sync_tool,
    "subagent_depth_2": subagent_depth_2,
}


async def run_place(
    place: str, server: FakeOpenAIServer, transport: str, *, long: float
) -> Outcome:
    """Run the place's turn; press Stop from a thread once it waits there."""
    setup = PLACES[place](server, transport, long)
    token = CancelToken()
    pressed: dict[str, float] = {}
    done = threading.Event()

    def press_stop_when_ready() -> None:
        while not done.is_set():
            if setup.ready():
                pressed["at"] = time.monotonic()
                token.cancel("Stop pressed")
                return
            time.sleep(0.001)

    watcher = threading.Thread(target=press_stop_when_ready, daemon=True)
    watcher.start()
    try:
        result = await setup.agent.aexecute(
            ["Go"], callbacks=setup.callbacks, cancel=token
        )
        returned_at = time.monotonic()
    finally:
        done.set()
        watcher.join()
    if "at" not in pressed:
        raise AssertionError(f"{place}: the turn ended before it reached its wait")
    return Outcome(
        result=result,
        cancelled_at=pressed["at"],
        returned_at=returned_at,
        requests=len(server.requests),
        marks=setup.marks,
    )
