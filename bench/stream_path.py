"""Per-chunk cost of the streaming path: provider chunk in, delta handed to callbacks.

What it measures: the client-side CPU time per streamed chunk of a 100-chunk reply
(``reply(text, chunks=100)`` from the fake OpenAI server, plus its role, finish and
usage events) along four paths, in the same run, replies interleaved path by path:

- ``raw httpx``: ``httpx.AsyncClient.stream`` + ``aiter_lines`` + ``json.loads`` of
  each ``data:`` line: the floor for any Python client.
- ``ours, openai``: our chain (``llm.stream_once``: transport, delta assembly,
  ``on_llm_new_delta`` callbacks) through ``ChatModel(transport="openai")``, the lean
  httpx SSE reader.
- ``ours, litellm``: the same chain through ``ChatModel(transport="litellm")``.
- ``bare litellm``: ``litellm.acompletion(stream=True)`` and an ``async for`` that
  reads each chunk's content, nothing else.

The fake server runs in a SUBPROCESS, so ``time.process_time()`` of this process is
the client's CPU alone (a server thread in the same process would inflate it). Three
servers run, one per measure:

- burst (one stream at a time, no pause between events): the processing cost. CPU
  ms/chunk is the client CPU from the first content chunk to the end of the stream
  divided by the chunks in that span; wall ms/chunk is (stream time - time to first
  chunk) / chunks. Medians over replies.
- paced (one stream, an event every 2 ms): each chunk arrives in its own socket read,
  so the figure adds an event-loop wake-up per chunk (on a quiet loop, a cold one).
- concurrent (``--streams``, default 20, at 50 chunks/s each, as a fast provider
  streams): the all-in client CPU of the whole window (requests, streams, litellm's
  background threads) divided by the content chunks, median of rounds. This is the
  realistic load, and the figure behind "streams/core" = 1000 / (50 x CPU ms/chunk),
  the number of such streams one core could carry.

Ratios are to raw httpx in the same measure.

Run from the repository root::

    .venv/bin/python bench/stream_path.py          # ~2 minutes
    .venv/bin/python bench/stream_path.py --quick  # ~30 s (litellm's import and
                                                   # first calls take most of it)

A benchmark, not a test: it prints figures and asserts no thresholds. Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CHUNKS = 100
# ~4 characters per chunk, about one token, as providers stream.
TEXT = ("Streaming tokens one by one to a person who reads them. " * 8)[: CHUNKS * 4]
MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Tell me something, slowly."},
]
PACED_DELAY = 0.002
RATE_DELAY = 0.02  # 50 chunks/s, a fast provider

SERVER_SCRIPT = """
import sys
sys.path.insert(0, sys.argv[1])
from tests.fakes.openai_server import FakeOpenAIServer, reply
server = FakeOpenAIServer(
    delay=float(sys.argv[2]), default=reply(sys.argv[3], chunks=int(sys.argv[4]))
).start()
print(server.port, flush=True)
sys.stdin.read()  # serve until the parent closes our stdin
server.stop()
"""


class Server:
    """The fake OpenAI server in a child process."""

    def __init__(self, delay: float) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                SERVER_SCRIPT,
                str(REPO),
                str(delay),
                TEXT,
                str(CHUNKS),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline())
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()


@dataclass
class Sample:
    """One reply: content chunks and the clocks at request, first chunk and end."""

    chunks: int = 0
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def mark(self) -> None:
        self.wall.append(time.perf_counter())
        self.cpu.append(time.process_time())

    def on_chunk(self) -> None:
        self.chunks += 1
        if self.chunks == 1:
            self.mark()

    @property
    def stream_cpu(self) -> float:
        return (self.cpu[2] - self.cpu[1]) / (self.chunks - 1)

    @property
    def stream_wall(self) -> float:
        return (self.wall[2] - self.wall[1]) / (self.chunks - 1)


Path_ = Callable[[str, Sample], Awaitable[None]]


def make_paths() -> dict[str, Path_]:
    import httpx

    from sagents_django.core.callbacks import Callbacks
    from sagents_django.core.llm import ChatModel, stream_once
    from sagents_django.core.transports import import_litellm

    litellm = import_litellm()
    client = httpx.AsyncClient(timeout=httpx.Timeout(None, connect=30.0))

    async def raw_httpx(base_url: str, sample: Sample) -> None:
        body = {
            "model": "fake-model",
            "messages": MESSAGES,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        headers = {"Authorization": "Bearer test"}
        loads = json.loads
        async with client.stream(
            "POST", f"{base_url}/chat/completions", json=body, headers=headers
        ) as response:
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    break
                chunk = loads(payload)
                choices = chunk.get("choices")
                if choices and choices[0]["delta"].get("content"):
                    sample.on_chunk()

    def ours(transport: str) -> Path_:
        async def run(base_url: str, sample: Sample) -> None:
            model = ChatModel(
                model="openai/fake-model",
                params={"api_base": base_url, "api_key": "test"},
                transport=transport,  # type: ignore[arg-type]
                max_retries=0,
            )

            def on_delta(execution: Any, deltas: list[Any]) -> None:
                for delta in deltas:
                    if delta.content:
                        sample.on_chunk()

            callbacks = Callbacks([{"on_llm_new_delta": on_delta}])
            call = await stream_once(
                model,
                model.request(list(MESSAGES), []),
                execution=None,
                callbacks=callbacks,
            )
            if call.message.text != TEXT:
                raise RuntimeError(f"{transport}: the reply was not assembled whole")

        return run

    async def bare_litellm(base_url: str, sample: Sample) -> None:
        response = await litellm.acompletion(
            model="openai/fake-model",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
            api_base=base_url,
            api_key="test",
            num_retries=0,
            max_retries=0,
        )
        async for chunk in response:
            if chunk.choices and chunk.choices[0].delta.content:
                sample.on_chunk()

    return {
        "raw httpx": raw_httpx,
        "ours, openai": ours("openai"),
        "ours, litellm": ours("litellm"),
        "bare litellm": bare_litellm,
    }


async def measure_single(
    paths: dict[str, Path_], base_url: str, replies: int, warmup: int
) -> dict[str, dict[str, float]]:
    """One stream at a time, paths interleaved reply by reply."""
    samples: dict[str, list[Sample]] = {name: [] for name in paths}
    for round_ in range(warmup + replies):
        for name, path in paths.items():
            gc.collect()
            await asyncio.sleep(0.02)  # let the previous path's threads settle
            sample = Sample()
            sample.mark()
            await path(base_url, sample)
            sample.mark()
            if sample.chunks != CHUNKS:
                raise RuntimeError(f"{name}: saw {sample.chunks} chunks")
            if round_ >= warmup:
                samples[name].append(sample)
    return {
        name: {
            "cpu": statistics.median(s.stream_cpu for s in runs),
            "wall": statistics.median(s.stream_wall for s in runs),
        }
        for name, runs in samples.items()
    }


async def measure_concurrent(
    paths: dict[str, Path_], base_url: str, streams: int, rounds: int
) -> dict[str, float]:
    """``streams`` replies at once per path; CPU of the whole window per chunk."""
    per_chunk: dict[str, list[float]] = {name: [] for name in paths}
    warmup = 1 if rounds > 1 else 0
    for round_ in range(rounds + warmup):  # a first round warms connection pools
        for name, path in paths.items():
            gc.collect()
            await asyncio.sleep(0.05)
            samples = [Sample() for _ in range(streams)]
            before = time.process_time()
            await asyncio.gather(*(path(base_url, s) for s in samples))
            await asyncio.sleep(0.05)  # background work of these replies
            cpu = time.process_time() - before
            chunks = sum(s.chunks for s in samples)
            if chunks != CHUNKS * streams:
                raise RuntimeError(f"{name}: saw {chunks} chunks")
            if round_ >= warmup:
                per_chunk[name].append(cpu / chunks)
    return {name: statistics.median(values) for name, values in per_chunk.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fast smoke run")
    parser.add_argument("--replies", type=int, default=None, help="default 15")
    parser.add_argument(
        "--streams", type=int, default=None, help="concurrent streams (default 20)"
    )
    args = parser.parse_args()
    replies = args.replies or (3 if args.quick else 15)
    warmup = 1 if args.quick else 3
    rounds = 1 if args.quick else 5
    args.streams = args.streams or (10 if args.quick else 20)

    started = time.perf_counter()
    paths = make_paths()  # imports litellm (seconds), outside any timing
    # Move the imported modules' objects out of the collector's way: a full
    # collection of litellm's heap takes ~0.25 s; after freeze() it takes ~1 ms.
    gc.collect()
    gc.freeze()
    print(
        f"Python {sys.version.split()[0]}, {os.cpu_count()} cores; litellm import "
        f"{time.perf_counter() - started:.1f} s; load average "
        f"{os.getloadavg()[0]:.2f} before the run"
    )
    print(
        f"{CHUNKS}-chunk replies ({len(TEXT)} chars); fake server in a subprocess; "
        f"single streams: median of {replies} replies per path; concurrent: "
        f"{args.streams} streams at {1 / RATE_DELAY:.0f} chunks/s each, median of "
        f"{rounds} rounds"
    )
    burst, paced, rate = Server(0.0), Server(PACED_DELAY), Server(RATE_DELAY)

    async def run_all() -> tuple[Any, Any, Any]:
        # One event loop for everything: clients and pools are per loop.
        phases = []
        for label, run in (
            ("burst", lambda: measure_single(paths, burst.base_url, replies, warmup)),
            ("paced", lambda: measure_single(paths, paced.base_url, replies, warmup)),
            (
                "concurrent",
                lambda: measure_concurrent(paths, rate.base_url, args.streams, rounds),
            ),
        ):
            began = time.perf_counter()
            phases.append(await run())
            print(f"  {label}: {time.perf_counter() - began:.0f} s", flush=True)
        return tuple(phases)

    try:
        single_burst, single_paced, concurrent = asyncio.run(run_all())
    finally:
        for server in (burst, paced, rate):
            server.close()
    print(f"measured in {time.perf_counter() - started:.0f} s")

    raw_burst = single_burst["raw httpx"]["cpu"]
    raw_paced = single_paced["raw httpx"]["cpu"]
    raw_conc = concurrent["raw httpx"]
    print(
        f"\n{'':<15} {'--- burst, 1 stream ---':^31} {'paced 2 ms':^17} "
        f"{f'--- {args.streams} streams @50/s ---':^38}"
    )
    print(
        f"{'path':<15} {'CPU ms/chunk':>12} {'x raw':>6} {'wall ms/chunk':>13} "
        f"{'CPU ms/chunk':>12} {'x raw':>5} {'CPU ms/chunk':>12} {'x raw':>6} "
        f"{'streams/core':>14}"
    )
    for name in paths:
        b, p, c = single_burst[name], single_paced[name], concurrent[name]
        print(
            f"{name:<15} {b['cpu'] * 1000:>12.4f} {b['cpu'] / raw_burst:>5.1f}x "
            f"{b['wall'] * 1000:>13.4f} {p['cpu'] * 1000:>12.4f} "
            f"{p['cpu'] / raw_paced:>4.1f}x {c * 1000:>12.4f} {c / raw_conc:>5.1f}x "
            f"{1 / (50 * c):>14.0f}"
        )
    print(
        "\nburst: the server sends without pauses (many chunks per socket read): the "
        "processing cost.\n  CPU = client CPU from the first content chunk to the "
        "end / chunks; wall = (stream time - time to first chunk) / chunks.\n"
        "paced: one event every 2 ms, each chunk in its own read (includes the "
        "event-loop wake-up per chunk).\nconcurrent: all-in client CPU (requests, "
        "streams, background threads) / content chunks;\n  streams/core = 1000 / "
        "(50 x CPU ms/chunk) from this column."
    )
    for label, table in (
        ("burst", {k: v["cpu"] for k, v in single_burst.items()}),
        ("concurrent", concurrent),
    ):
        ours, wrapper = table["ours, openai"], table["ours, litellm"]
        print(
            f"{label}: ours via litellm / ours via openai = {wrapper / ours:.1f}x "
            f"(+{(wrapper - ours) * 1000:.3f} ms per chunk)"
        )


if __name__ == "__main__":
    main()
