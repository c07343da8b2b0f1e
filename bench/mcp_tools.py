"""The cost of a tool call through an MCP server, beside a plain tool.

What it measures: the wall time of ``execute_tool_call`` (the core's path for every
tool call: argument check, span, the function, the result) for three tools that do
the same thing, echo a short text:

- ``plain``: an async ``Tool`` in this process;
- ``stdio``: the ``echo`` tool of the notes server (``tests/mcp/servers``, written
  with the MCP SDK's ``MCPServer``), a subprocess spoken to over stdin/stdout;
- ``http``: the same server under uvicorn on 127.0.0.1, over streamable HTTP;
- ``stdio (SDK)`` and ``http (SDK)``: the SDK client's own ``call_tool`` on the
  same connections, without this app's layer (the tool, the registry, the guard,
  the result's text): the difference is what the app adds to the SDK and server.

The calls run on the process's runtime loop, where turns run (so no hop between
loops), in rounds that take turns between the three so the machine's noise falls on
all of them alike; the median and p99 per call are printed, with the overhead of
each MCP transport over the plain tool (difference of medians) and the ratio. The
time to connect and read a tool list from cold (a new connection each time) is
printed under the table. The protocol version the SDK negotiated is printed too.

Run from the repository root::

    .venv/bin/python bench/mcp_tools.py            # 10 rounds of 100 calls each
    .venv/bin/python bench/mcp_tools.py --quick    # smoke run

A benchmark, not a test: it prints figures and asserts no thresholds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tests" / "mcp" / "servers" / "notes_server.py"
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def start_http_server() -> tuple[subprocess.Popen[bytes], str]:
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "http"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={"PATH": "/usr/bin:/bin", "REDIRECT_TO": "http://127.0.0.1:1/"},
    )
    assert process.stdout is not None
    port = int(process.stdout.readline())
    return process, f"http://127.0.0.1:{port}/mcp"


async def timed_calls(tool: Any, count: int) -> list[float]:
    from sagents_django.core import State, ToolCall, ToolContext
    from sagents_django.core.tools import execute_tool_call

    tools = {tool.name: tool}
    times = []
    for index in range(count):
        call = ToolCall(call_id=f"c{index}", name=tool.name, arguments={"text": "hi"})
        context = ToolContext(state=State(), agent_id="bench", tool_call=call)
        started = time.perf_counter()
        result = await execute_tool_call(call, tools, context)
        times.append(time.perf_counter() - started)
        assert result.content == "hi", result.content
    return times


class SdkCall:
    """The SDK client's ``call_tool`` alone, in ``timed_calls``' shape."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def __call__(self, count: int) -> list[float]:
        times = []
        for _ in range(count):
            started = time.perf_counter()
            result = await self.client.call_tool("echo", {"text": "hi"})
            times.append(time.perf_counter() - started)
            assert result.content[0].text == "hi"
        return times


async def timed(tool: Any, count: int) -> list[float]:
    if isinstance(tool, SdkCall):
        return await tool(count)
    return await timed_calls(tool, count)


async def measure(rounds: int, per_round: int, url: str) -> None:
    from django.test import override_settings

    from sagents_django.core import Tool
    from sagents_django.mcp import amcp_tools, server_statuses
    from sagents_django.mcp.registry import registry

    async def echo(arguments: dict[str, Any], _context: Any) -> str:
        return str(arguments["text"])

    plain = Tool(
        name="echo",
        description="Say the text back.",
        function=echo,
        parameters={
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    )
    servers = {
        "stdio": {"command": [sys.executable, str(SERVER)], "tools": ["echo"]},
        "http": {"url": url, "tools": ["echo"]},
    }
    with override_settings(
        SAGENTS={"MCP_SERVERS": servers, "MCP_ALLOWED_HOSTS": ["127.0.0.1"]}
    ):
        offered = {t.server: t for t in await amcp_tools(None)}
        connections = registry().connections
        tools = {
            "plain": plain,
            "stdio": offered["stdio"],
            "stdio (SDK)": SdkCall(await connections["stdio"].client()),
            "http": offered["http"],
            "http (SDK)": SdkCall(await connections["http"].client()),
        }
        for tool in tools.values():  # warm up
            await timed(tool, 20)
        times: dict[str, list[float]] = {name: [] for name in tools}
        for _ in range(rounds):
            for name, tool in tools.items():
                times[name] += await timed(tool, per_round)
        versions = {s.name: s.protocol_version for s in server_statuses()}

        cold: dict[str, list[float]] = {"stdio": [], "http": []}
        for _ in range(3 if per_round < 50 else 7):
            for name in cold:
                await registry().close()
                started = time.perf_counter()
                await amcp_tools(None, servers=[name])
                cold[name].append(time.perf_counter() - started)
        await registry().close()

    base = statistics.median(times["plain"])
    print(
        f"\n{rounds} rounds x {per_round} calls per tool "
        f"(protocol: stdio {versions['stdio']}, http {versions['http']})\n"
    )
    print("| tool | median ms | p99 ms | overhead ms (median) | ratio |")
    print("| --- | --- | --- | --- | --- |")
    for name, values in times.items():
        median = statistics.median(values)
        print(
            f"| {name} | {median * 1000:.3f} | {percentile(values, 99) * 1000:.3f} "
            f"| {(median - base) * 1000:.3f} | {median / base:.0f}x |"
        )
    print(
        "\ncold start (connect + handshake + tools/list), median ms: "
        + ", ".join(
            f"{name} {statistics.median(v) * 1000:.0f}" for name, v in cold.items()
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    options = parser.parse_args()
    import django

    django.setup()
    from sagents_django.runtime import loop

    process, url = start_http_server()
    try:
        rounds, per_round = (2, 20) if options.quick else (10, 100)
        loop.submit(measure(rounds, per_round, url)).result()
    finally:
        process.terminate()
        process.wait(10)
        if process.stdout is not None:
            process.stdout.close()


if __name__ == "__main__":
    main()
