"""OpenTelemetry spans of the core: a turn, its model calls and tool calls, and a
sub-agent's spans inside its parent's task call, in one trace. Without a
configured provider nothing is recorded, and nothing of OpenTelemetry is imported.
The runtime's turn (run id on every span): tests/runtime/test_tracing.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from opentelemetry.trace import StatusCode

from sagents_django.core import Agent, ChatModel
from sagents_django.core.middleware.subagent import SubAgent
from sagents_django.core.tracing import RUN_ID
from tests.core.subagent_app import ADD
from tests.fakes.openai_server import FakeOpenAIServer, fault, reply, tool_call
from tests.otel import Recorded

ROOT = Path(__file__).resolve().parents[2]


def parent(llm: FakeOpenAIServer) -> Agent:
    return Agent(
        agent_id="parent-1",
        model=ChatModel(
            model="openai/fake-model",
            params=dict(llm.model_params),
            max_retries=0,
            stream_idle_timeout=5.0,
        ),
        tools=[ADD],
        middleware=[SubAgent],
        replace_default_middleware=True,
    )


async def test_a_turn_is_a_span_over_its_model_and_tool_calls_and_its_subagents(
    fake_llm: FakeOpenAIServer, spans: Recorded
) -> None:
    fake_llm.script(
        reply(
            tool_calls=[
                tool_call(
                    "task",
                    {
                        "instructions": "Add 2 and 3.",
                        "subagent_type": "general-purpose",
                    },
                    id="task_1",
                )
            ]
        ),
        reply(tool_calls=[tool_call("add", {"a": 2, "b": 3}, id="sub_add")]),
        reply("The sum is 5."),
        reply("My sub-agent says 5."),
    )
    result = await parent(fake_llm).aexecute(["What is 2+3?"])
    assert result.status == "completed", result.error

    [turn] = spans.named("sagents.turn")
    assert spans.tree(turn) == [
        "sagents.turn",
        [
            ["sagents.model_call", []],
            [
                "sagents.tool_call",
                [
                    [
                        "sagents.subagent",
                        [
                            ["sagents.model_call", []],
                            ["sagents.tool_call", []],
                            ["sagents.model_call", []],
                        ],
                    ]
                ],
            ],
            ["sagents.model_call", []],
        ],
    ]
    assert len(spans.all()) == 8  # nothing outside the tree
    assert {s.context.trace_id for s in spans.all()} == {turn.context.trace_id}
    assert turn.parent is None
    assert dict(turn.attributes or {}) == {
        "sagents.agent_id": "parent-1",
        "sagents.trigger": "execute",
        "sagents.status": "completed",
    }

    task, add = spans.named("sagents.tool_call")[::-1]  # the inner one ends first
    assert task.attributes is not None and add.attributes is not None
    assert (
        task.attributes["gen_ai.tool.name"],
        add.attributes["gen_ai.tool.name"],
    ) == (
        "task",
        "add",
    )
    assert add.attributes["gen_ai.tool.call.id"] == "sub_add"
    assert add.attributes["sagents.tool.error"] is False
    assert add.status.status_code == StatusCode.UNSET
    [subagent] = spans.named("sagents.subagent")
    assert spans.parent_of(subagent) is task
    assert subagent.attributes is not None
    assert subagent.attributes["sagents.subagent.type"] == "general-purpose"
    assert subagent.attributes["sagents.subagent.id"] == "parent-1.sub.task_1"
    assert subagent.attributes["sagents.status"] == "completed"

    for call in spans.named("sagents.model_call"):
        attributes = dict(call.attributes or {})
        assert attributes["gen_ai.request.model"] == "openai/fake-model"
        assert attributes["gen_ai.response.model"] == "openai/fake-model"
        assert attributes["gen_ai.usage.input_tokens"] > 0
        assert attributes["gen_ai.usage.output_tokens"] > 0
        assert attributes["sagents.stop_reason"] == "complete"
    assert not any(RUN_ID in (s.attributes or {}) for s in spans.all())  # no run


async def test_a_tool_error_and_a_failed_model_call_mark_their_spans_failed(
    fake_llm: FakeOpenAIServer, spans: Recorded
) -> None:
    fake_llm.script(
        reply(tool_calls=[tool_call("add", {"a": "two"}, id="bad_add")]),
        fault.http(500, message="upstream exploded"),
    )
    result = await parent(fake_llm).aexecute(["What is 2+3?"])
    assert result.status == "error"

    [tool] = spans.named("sagents.tool_call")
    assert tool.status.status_code == StatusCode.ERROR
    assert tool.status.description is None  # the model's arguments stay out
    assert tool.attributes is not None
    assert tool.attributes["error.type"] == "tool_error"
    assert tool.attributes["sagents.tool.error"] is True
    ok, failed = spans.named("sagents.model_call")
    assert ok.status.status_code == StatusCode.UNSET
    assert failed.status.status_code == StatusCode.ERROR
    assert [e.name for e in failed.events] == ["exception"]
    [turn] = spans.named("sagents.turn")
    assert turn.status.status_code == StatusCode.ERROR
    assert turn.attributes is not None and turn.attributes["sagents.status"] == "error"


WITHOUT_OPENTELEMETRY = """
import asyncio, importlib.abc, json, sys, time

asked = []

class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "opentelemetry":
            asked.append(name)
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, Absent())

from sagents_django.core import Agent, Message, ToolCall
from sagents_django.core.middleware.subagent import SubAgent
from sagents_django.core.testing import ScriptedModel
from sagents_django.core import tracing
from tests.core.subagent_app import ADD

model = ScriptedModel([
    Message.assistant(tool_calls=[ToolCall(call_id="t", name="task", arguments={
        "instructions": "Add.", "subagent_type": "general-purpose"})]),
    Message.assistant(tool_calls=[ToolCall(call_id="a", name="add", arguments={
        "a": 1, "b": 2})]),
    "3.",
    "It is 3.",
])
agent = Agent(model=model, tools=[ADD], middleware=[SubAgent],
              replace_default_middleware=True)
status = agent.execute(["1+2?"]).status
loaded = sorted(n for n, m in sys.modules.items()
                if n.split(".")[0] == "opentelemetry" and m is not None)

# Installed but not configured: the API's placeholder provider records nothing.
sys.meta_path.pop(0)
import opentelemetry.trace
off = tracing.span("sagents.model_call", {}) is tracing._OFF
started = time.perf_counter()
for _ in range(10000):
    with tracing.span("sagents.tool_call", {"gen_ai.tool.name": "x"}):
        pass
per_call = (time.perf_counter() - started) / 10000
print(json.dumps({"status": status, "asked": asked, "loaded": loaded,
                  "off": off, "per_call": per_call}))
"""


def test_without_opentelemetry_a_turn_runs_and_imports_none_of_it() -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_OPENTELEMETRY],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    outcome: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["status"] == "completed"
    # Not even tried: the core never imports OpenTelemetry itself.
    assert outcome["asked"] == [] and outcome["loaded"] == []
    # Imported by someone else but with no provider set: spans cost next to nothing.
    assert outcome["off"] is True
    assert outcome["per_call"] < 20e-6
