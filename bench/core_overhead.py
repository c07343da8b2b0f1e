"""Per-step overhead of the agent loop, with LangChain's deepagents beside it.

What it measures: the wall time of one ``Agent.aexecute`` that runs a 20-step tool
loop (19 responses calling a trivial sync ``echo`` tool, then a final answer),
divided by 20, against an instant in-process model (``ScriptedModel``: the real chain
of deltas, assembly and callbacks, no HTTP). Nothing is subtracted: what is left is
the framework's own cost per model call + tool call. It is measured at 10, 100 and
1,000 messages of prior history (alternating user/assistant messages of ~200
characters), the median of several runs each; the process CPU time per step is
printed beside it (it stays honest on a busy machine, where wall time also counts
waiting for a core). The time to build our ``Agent`` (once per turn in a
Sagents-style app, outside the steps) and deepagents' ``create_deep_agent`` are
printed under each table.

Stacks (``--stack``):

- ``custom`` (default): five middleware, HumanInTheLoop with ``interrupt_on`` for a
  tool that is never called, and four pass-through middleware that override
  ``before_model`` and ``after_model``.
- ``default``: ``Agent(model=..., tools=[...], interrupt_on=...)`` without
  ``replace_default_middleware``: whatever ``build_default_middleware`` returns
  (TodoList, FileSystem, SubAgent, Summarization, PatchToolCalls), plus
  HumanInTheLoop; the header names the stack that was actually built.
- ``both``: one after the other.

The same workload runs on deepagents (``create_deep_agent`` with the same tool, the
same ``interrupt_on``, a fake chat model that answers instantly with the same
scripted tool calls, the same histories and 20 steps), interleaved run by run with
ours, and the ratio deepagents/ours is printed per history length. deepagents lives in
a separate virtualenv; when it cannot be imported here the script runs the
deepagents half under ``.venv-bench/bin/python`` in a subprocess, and when that is
missing too it prints our figures and says why the comparison is missing.

Run from the repository root::

    .venv-bench/bin/python bench/core_overhead.py          # both in one process
    .venv/bin/python bench/core_overhead.py                # deepagents via .venv-bench
    .venv/bin/python bench/core_overhead.py --quick        # smoke run
    .venv/bin/python bench/core_overhead.py --stack default
    .venv/bin/python bench/core_overhead.py --profile 1000 # cProfile of ours
    .venv/bin/python bench/core_overhead.py --pin 1        # one core

The sync tool runs in a worker thread (``asyncio.to_thread``), and the thread hop costs
about 0.1 ms more per step when the worker and the event loop sit on different cores,
which the scheduler decides once per process: unpinned, ours reads ~0.13 or ~0.25 ms
per step at 10 messages from one process to the next. ``--pin CPU`` pins the process
(and the deepagents child) to one core for steadier figures; ``taskset -c 1`` does
the same from outside.

(``python3 -m venv .venv-bench && .venv-bench/bin/pip install -r
requirements-bench.txt -e .`` creates the deepagents virtualenv.)

A benchmark, not a test: it prints figures and asserts no thresholds.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# deepagents/LangSmith: no tracing, no network.
os.environ.setdefault("LANGSMITH_TRACING", "false")
os.environ.setdefault("LANGCHAIN_TRACING_V2", "false")

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

STEPS = 20  # model calls per turn: 19 tool-calling responses + the final answer
TOOL_CALLS = STEPS - 1
PROMPT = f"Call the echo tool {TOOL_CALLS} times, then say you are done."
FINAL_TEXT = "Done: the echo tool ran every time."
HITL_TOOL = "delete_everything"  # in interrupt_on, never called

_WORDS = " ".join(
    (
        "the agent reads a file and writes a short summary of what changed in the",
        "project while the user waits for an answer about tests deployment settings",
        "database migration channel layer worker queue template view model form",
        "field request response timeout retry stream token message tool call result",
    )
).split()


def make_history(count: int, *, seed: int = 7) -> list[tuple[str, str]]:
    """``count`` alternating (role, text) pairs, user first, texts of 180-220 chars."""
    rng = random.Random(seed)
    history = []
    for i in range(count):
        target = rng.randint(180, 220)
        words: list[str] = []
        while sum(len(w) + 1 for w in words) < target:
            words.append(rng.choice(_WORDS))
        text = " ".join(words)[:target].rstrip().capitalize() + "."
        history.append(("user" if i % 2 == 0 else "assistant", text))
    return history


def tool_calls_since_prompt(roles_from_end: Any) -> int:
    """Tool results after the last user message (walks back from the end)."""
    count = 0
    for role in roles_from_end:
        if role == "user":
            break
        if role == "tool":
            count += 1
    return count


# Ours --------------------------------------------------------------------------------
def build_ours(stack: str) -> tuple[Any, Any]:
    """(agent factory, description of the stack) for ``stack``."""
    from sagents_django.core import Agent, Message, Middleware, Tool, ToolCall
    from sagents_django.core.testing import ScriptedModel

    class PassThrough(Middleware):
        def before_model(self, state: Any) -> Any:
            return state

        def after_model(self, state: Any) -> Any:
            return state

    def echo(args: dict[str, Any], context: Any) -> str:
        return f"echo: {args['text']}"

    def delete_everything(args: dict[str, Any], context: Any) -> str:
        return "deleted"

    tools = [
        Tool(
            name="echo",
            description="Repeat the text.",
            function=echo,
            parameters={
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
        ),
        Tool(
            name=HITL_TOOL,
            description="Delete every file (needs approval).",
            function=delete_everything,
        ),
    ]

    def answer(request: Any) -> Any:
        names = {t["function"]["name"] for t in request.tools}
        if "echo" not in names:
            # Not the tool loop (e.g. a summarization call of the default stack).
            return Message.assistant("Summary of the conversation so far.")
        done = tool_calls_since_prompt(m["role"] for m in reversed(request.messages))
        if done >= TOOL_CALLS:
            return Message.assistant(FINAL_TEXT)
        return Message.assistant(
            tool_calls=[
                ToolCall(
                    call_id=f"call_{done}",
                    name="echo",
                    arguments={"text": f"step {done}"},
                )
            ]
        )

    def factory(**options: Any) -> Any:
        """A new agent; ``options`` go to ``Agent`` (``agent_id``...)."""
        model = ScriptedModel([answer], repeat_last=True)
        if stack == "custom":
            return Agent(
                model=model,
                tools=tools,
                middleware=[(PassThrough, {"id": f"pass-{i}"}) for i in range(4)],
                interrupt_on={HITL_TOOL: True},
                replace_default_middleware=True,
                **options,
            )
        return Agent(
            model=model, tools=tools, interrupt_on={HITL_TOOL: True}, **options
        )

    agent = factory()
    names = [type(e.middleware).__name__ for e in agent.middleware]
    return factory, f"{len(names)} middleware: {', '.join(names) or 'none'}"


def ours_messages(history: list[tuple[str, str]]) -> list[Any]:
    from sagents_django.core import Message

    return [
        Message.user(text) if role == "user" else Message.assistant(text)
        for role, text in history
    ]


def ours_state(history: list[tuple[str, str]]) -> Any:
    from sagents_django.core import Message, State

    return State(messages=[*ours_messages(history), Message.user(PROMPT)])


async def run_ours(agent: Any, state: Any) -> tuple[float, float]:
    """(wall, CPU) seconds per step of one turn."""
    started, cpu = time.perf_counter(), time.process_time()
    result = await agent.aexecute(state)
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu
    if result.status != "completed":
        raise RuntimeError(f"our turn ended {result.status}: {result.error}")
    calls = sum(len(m.tool_calls) for m in result.state.messages[-2 * STEPS :])
    if result.last_message.text != FINAL_TEXT or calls < TOOL_CALLS:
        raise RuntimeError("our turn did not run the scripted 20 steps")
    return elapsed / STEPS, cpu / STEPS


# deepagents --------------------------------------------------------------------------
def deepagents_missing() -> str | None:
    try:
        import deepagents  # noqa: F401
        import langchain_core  # noqa: F401
    except ImportError as exc:
        return f"{exc}"
    return None


def deepagents_versions() -> str:
    from importlib.metadata import version

    return ", ".join(
        f"{name} {version(name)}"
        for name in ("deepagents", "langchain", "langchain-core", "langgraph")
    )


def build_deepagents(*, checkpointer: Any = None) -> Any:
    """deepagents' graph on the scripted model; ``checkpointer``: LangGraph's
    (``bench/durable_step.py``), else none."""
    from deepagents import create_deep_agent
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool

    @tool
    def echo(text: str) -> str:
        """Repeat the text."""
        return f"echo: {text}"

    @tool
    def delete_everything() -> str:
        """Delete every file (needs approval)."""
        return "deleted"

    class ScriptedChatModel(BaseChatModel):
        """Answers instantly: tool calls until 19 results follow the prompt."""

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _reply(self, messages: list[Any]) -> ChatResult:
            # LangChain's message types are "human"/"tool"; map for the helper.
            done = tool_calls_since_prompt(
                {"human": "user"}.get(m.type, m.type) for m in reversed(messages)
            )
            if done >= TOOL_CALLS:
                message = AIMessage(content=FINAL_TEXT)
            else:
                message = AIMessage(
                    content="",
                    tool_calls=[
                        {
                            "name": "echo",
                            "args": {"text": f"step {done}"},
                            "id": f"call_{done}",
                            "type": "tool_call",
                        }
                    ],
                )
            return ChatResult(generations=[ChatGeneration(message=message)])

        def _generate(self, messages: Any, stop: Any = None, **kwargs: Any) -> Any:
            return self._reply(messages)

        async def _agenerate(
            self, messages: Any, stop: Any = None, **kwargs: Any
        ) -> Any:
            return self._reply(messages)  # no executor hop: as instant as ours

    return create_deep_agent(
        model=ScriptedChatModel(),
        tools=[echo, delete_everything],
        interrupt_on={HITL_TOOL: True},
        checkpointer=checkpointer,
    )


def deepagents_messages(history: list[tuple[str, str]]) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage

    return [
        HumanMessage(content=text) if role == "user" else AIMessage(content=text)
        for role, text in history
    ]


def deepagents_input(history: list[tuple[str, str]]) -> dict[str, Any]:
    from langchain_core.messages import HumanMessage

    return {"messages": [*deepagents_messages(history), HumanMessage(content=PROMPT)]}


async def run_deepagents(graph: Any, payload: dict[str, Any]) -> tuple[float, float]:
    started, cpu = time.perf_counter(), time.process_time()
    result = await graph.ainvoke(payload, config={"recursion_limit": 1000})
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu
    messages = result["messages"]
    tools = sum(1 for m in messages if m.type == "tool")
    if messages[-1].content != FINAL_TEXT or tools < TOOL_CALLS:
        raise RuntimeError("the deepagents turn did not run the scripted 20 steps")
    return elapsed / STEPS, cpu / STEPS


# Driving -----------------------------------------------------------------------------
async def measure(
    sizes: list[int], runs: int, *, stack: str | None, deep: bool
) -> dict[str, Any]:
    """Per-step seconds of every run, by engine and history size; interleaved."""
    out: dict[str, Any] = {"ours": {}, "deepagents": {}, "build": [], "deep_build": []}
    factory = build_ours(stack)[0] if stack else None
    graph = build_deepagents() if deep else None
    for _ in range(3 if deep else 0):
        started = time.perf_counter()
        build_deepagents()
        out["deep_build"].append(time.perf_counter() - started)
    gc.collect()
    gc.freeze()  # imported modules' objects: out of every later collection
    for size in sizes:
        history = make_history(size)
        state = ours_state(history) if factory else None
        payload = deepagents_input(history) if graph is not None else None
        # One warm-up turn each (imports, caches, first-call paths), not counted.
        if factory:
            await run_ours(factory(), state)
        if graph is not None:
            await run_deepagents(graph, payload)
        ours, theirs = [], []
        for _ in range(runs):
            # Each run starts from a collected heap, so neither engine pays for the
            # other's garbage (GC stays on during the run: it is part of the cost).
            if factory:
                gc.collect()
                # A Sagents-style app builds the agent from code on every turn:
                # timed apart from the steps.
                started = time.perf_counter()
                agent = factory()
                out["build"].append(time.perf_counter() - started)
                ours.append(await run_ours(agent, state))
            if graph is not None:
                gc.collect()
                theirs.append(await run_deepagents(graph, payload))
        out["ours"][size] = ours
        out["deepagents"][size] = theirs
    return out


def deepagents_subprocess(sizes: list[int], runs: int) -> tuple[dict, list, str]:
    """Run the deepagents half under .venv-bench; (per-step runs, builds, versions)."""
    python = REPO / ".venv-bench" / "bin" / "python"
    if not python.exists():
        raise RuntimeError(
            "deepagents is not importable here and .venv-bench does not exist "
            "(python3 -m venv .venv-bench && .venv-bench/bin/pip install -r "
            "requirements-bench.txt -e .)"
        )
    command = [
        str(python),
        __file__,
        "--deepagents-json",
        "--sizes",
        ",".join(map(str, sizes)),
        "--runs",
        str(runs),
    ]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-3:]
        raise RuntimeError(f"the .venv-bench run failed: {' | '.join(tail)}")
    data = json.loads(done.stdout.strip().splitlines()[-1])
    runs_by_size = {int(k): v for k, v in data["runs"].items()}
    return runs_by_size, data["build"], data["versions"]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"


def report(
    stack: str,
    description: str,
    sizes: list[int],
    runs: int,
    ours: dict[int, list[list[float]]],
    theirs: dict[int, list[list[float]]] | None,
    why_missing: str | None,
    versions: str | None,
    where: str,
    build: list[float],
    deep_build: list[float],
) -> None:
    def med(values: list[list[float]], i: int) -> float:
        return statistics.median(v[i] for v in values)

    print(f"\n== stack: {stack} ({description})")
    print(
        f"   {STEPS} steps per turn, ms per step: median of {runs} runs of wall "
        "time (and of process CPU time)"
    )
    if theirs:
        print(f"   deepagents: {versions} ({where})")
        print(
            f"{'history':>8} {'ours':>7} {'(CPU)':>7} {'deepagents':>11} {'(CPU)':>7} "
            f"{'deep/ours':>10} {'(CPU)':>7}"
        )
    else:
        print(f"{'history':>8} {'ours':>7} {'(CPU)':>7}")
    for size in sizes:
        wall, cpu = med(ours[size], 0), med(ours[size], 1)
        line = f"{size:>8} {ms(wall):>7} {ms(cpu):>7}"
        if theirs:
            deep_wall, deep_cpu = med(theirs[size], 0), med(theirs[size], 1)
            line += (
                f" {ms(deep_wall):>11} {ms(deep_cpu):>7} {deep_wall / wall:>9.1f}x"
                f" {deep_cpu / cpu:>6.1f}x"
            )
        print(line)
    print(
        f"   building our Agent (once per turn in a Sagents-style app): "
        f"{ms(statistics.median(build))} ms, median of {len(build)}"
    )
    if theirs and deep_build:
        print(
            f"   create_deep_agent (usually once per process): "
            f"{ms(statistics.median(deep_build))} ms, median of {len(deep_build)}"
        )
    if not theirs:
        print(f"   deepagents comparison missing: {why_missing}")


def profile_ours(size: int, stack: str, turns: int) -> None:
    import cProfile
    import pstats

    factory = build_ours(stack)[0]
    state = ours_state(make_history(size))

    profiler = cProfile.Profile()

    async def go(profile: bool) -> None:
        agents = [factory() for _ in range(turns)]  # building is not profiled
        for agent in agents:
            if profile:
                profiler.enable()
            await run_ours(agent, state)
            if profile:
                profiler.disable()

    asyncio.run(go(False))  # warm-up
    asyncio.run(go(True))
    print(f"\n== cProfile of ours: stack {stack}, history {size}, {turns} turns")
    stats = pstats.Stats(profiler).strip_dirs()
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fast smoke run")
    parser.add_argument(
        "--stack", choices=("custom", "default", "both"), default="custom"
    )
    parser.add_argument("--runs", type=int, default=None, help="default 7 (quick 2)")
    parser.add_argument("--sizes", default=None, help="default 10,100,1000")
    parser.add_argument(
        "--no-deepagents", action="store_true", help="skip the comparison"
    )
    parser.add_argument(
        "--profile", type=int, metavar="HISTORY", help="cProfile ours at HISTORY"
    )
    parser.add_argument(
        "--pin",
        type=int,
        metavar="CPU",
        help="pin the process (and the deepagents child) to one CPU",
    )
    parser.add_argument(
        "--deepagents-json", action="store_true", help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    runs = args.runs or (2 if args.quick else 7)
    sizes = (
        [int(s) for s in args.sizes.split(",")]
        if args.sizes
        else ([10, 100] if args.quick else [10, 100, 1000])
    )

    if args.pin is not None:
        # A sync tool runs in a worker thread; when the worker and the loop land on
        # different cores each hop costs ~0.1 ms more, and which happens is decided
        # per process. Pinning makes runs comparable.
        os.sched_setaffinity(0, {args.pin})
    if args.deepagents_json:  # the child of deepagents_subprocess
        data = asyncio.run(measure(sizes, runs, stack=None, deep=True))
        print(
            json.dumps(
                {
                    "runs": data["deepagents"],
                    "build": data["deep_build"],
                    "versions": deepagents_versions(),
                }
            )
        )
        return

    if args.profile is not None:
        stacks = ["custom", "default"] if args.stack == "both" else [args.stack]
        for stack in stacks:
            profile_ours(args.profile, stack, 2 if args.quick else 10)
        return

    print(
        f"Python {sys.version.split()[0]}, {os.cpu_count()} cores, {sys.executable}; "
        f"load average {os.getloadavg()[0]:.2f} before the run; "
        + (f"pinned to CPU {args.pin}" if args.pin is not None else "not pinned")
    )
    stacks = ["custom", "default"] if args.stack == "both" else [args.stack]
    missing = "--no-deepagents" if args.no_deepagents else deepagents_missing()
    in_process = missing is None
    theirs_sub: dict[int, list[float]] | None = None
    deep_build_sub: list[float] = []
    versions: str | None = deepagents_versions() if in_process else None
    where = "same process, interleaved run by run"
    if not in_process and not args.no_deepagents:
        try:
            theirs_sub, deep_build_sub, versions = deepagents_subprocess(sizes, runs)
            where = ".venv-bench subprocess, same run"
            missing = None
        except Exception as exc:  # report, never crash the run
            missing = f"deepagents not importable here ({missing}); {exc}"
    for stack in stacks:
        try:
            description = build_ours(stack)[1]
        except Exception as exc:
            print(f"\n== stack: {stack}: cannot build the agent: {exc!r}")
            continue
        try:
            data = asyncio.run(measure(sizes, runs, stack=stack, deep=in_process))
        except Exception as exc:
            print(f"\n== stack: {stack}: the workload failed: {exc!r}")
            continue
        theirs = data["deepagents"] if in_process else theirs_sub
        report(
            stack,
            description,
            sizes,
            runs,
            data["ours"],
            theirs,
            missing,
            versions,
            where,
            data["build"],
            data["deep_build"] if in_process else deep_build_sub,
        )


if __name__ == "__main__":
    main()
