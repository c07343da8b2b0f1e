"""Every fault of the fake server ends the same way on both transports.

Each test runs one fault through litellm and through the lean httpx transport and
compares what a caller sees: the result's status and error text, the state, how many
requests were made (retries), and every callback with its payload. The state after
every fault must be one OpenAI accepts, with the next user message appended.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sagents_django.core import Agent, Message, Tool
from sagents_django.core.openai_format import INTERRUPTED_NOTES
from sagents_django.core.testing import validate_openai_messages
from tests.core.conftest import model_for
from tests.fakes.openai_server import FakeOpenAIServer, Fault, Reply, fault, reply
from tests.fakes.openai_server import tool_call as fake_call

PARTIAL = reply("Partial answer", chunks=2)
TOOL_CALL = reply(tool_calls=[fake_call("add", {"a": 1, "b": 2})], args_chunks=3)

# name -> (the fault, expected status, requests made, partial text kept)
FAULTS: dict[str, tuple[Callable[[], Fault | Reply], str, int, str | None]] = {
    "http_429": (lambda: fault.http(429, retry_after=0), "error", 2, None),
    "http_500": (lambda: fault.http(500), "error", 2, None),
    "http_400": (lambda: fault.http(400), "error", 1, None),
    "drop_before_any_byte": (lambda: fault.drop(), "error", 2, None),
    "drop_before_any_content": (lambda: fault.drop(after=reply("")), "error", 2, None),
    "drop_mid_text": (lambda: fault.drop(after=PARTIAL), "error", 1, "Partial answer"),
    "drop_mid_tool_call": (lambda: fault.drop(after=TOOL_CALL), "error", 1, None),
    "inband_error_before_content": (lambda: fault.inband_error(), "error", 2, None),
    "inband_error_mid_text": (
        lambda: fault.inband_error(after=PARTIAL),
        "error",
        1,
        "Partial answer",
    ),
    "malformed_chunk_before_content": (
        lambda: fault.malformed_chunk(),
        "error",
        2,
        None,
    ),
    "malformed_chunk_mid_text": (
        lambda: fault.malformed_chunk(after=PARTIAL),
        "error",
        1,
        "Partial answer",
    ),
    "missing_done_before_content": (
        lambda: fault.no_done(reply("")),
        "error",
        2,
        None,
    ),
    "missing_done_mid_text": (
        lambda: fault.no_done(PARTIAL),
        "error",
        1,
        "Partial answer",
    ),
    "stall_before_any_byte": (lambda: fault.stall(), "error", 2, None),
    "stall_mid_text": (
        lambda: fault.stall(after=PARTIAL),
        "error",
        1,
        "Partial answer",
    ),
    # Controls: what a good reply looks like on both.
    "no_fault_text": (lambda: reply("All good", chunks=3), "completed", 1, None),
    # Twice a tool call (each answered), then the closing text.
    "no_fault_tool_call": (lambda: TOOL_CALL, "completed", 3, None),
}


def _summary(key: str, args: tuple[Any, ...]) -> Any:
    """A callback's payload as comparable data (the execution argument dropped)."""
    if key == "on_llm_new_delta":
        return [delta.to_dict() for delta in args[1]]
    if key in ("on_tool_call_identified",):
        return (args[1].call_id, args[1].name)
    if key in ("on_tool_execution_started",):
        return args[1].call_id
    if key in ("on_tool_execution_completed", "on_tool_execution_failed"):
        return args[2].to_dict()
    if key in (
        "on_llm_new_message",
        "on_error_message_created",
        "on_tool_response_created",
        "on_message_processed",
    ):
        message = args[1].to_dict()
        message.get("metadata", {}).pop("usage", None)
        return message
    if key == "on_message_processing_error":
        partial = args[1].to_dict() if args[1] is not None else None
        return (partial, args[2])
    if key == "on_retries_exceeded":
        return args[1]
    return None  # headers, usage: their presence is compared, not their values


KEYS = (
    "on_llm_new_delta",
    "on_llm_new_message",
    "on_llm_response_headers",
    "on_tool_call_identified",
    "on_tool_execution_started",
    "on_tool_execution_completed",
    "on_tool_execution_failed",
    "on_tool_response_created",
    "on_message_processed",
    "on_message_processing_error",
    "on_error_message_created",
    "on_retries_exceeded",
)


def _recorder(log: list[tuple[str, Any]], key: str) -> Callable[..., None]:
    return lambda *args: log.append((key, _summary(key, args)))


async def outcome_of(
    make_fault: Callable[[], Fault | Reply], transport: str, *, idle: float
) -> dict:
    add = Tool(
        name="add",
        description="Add two numbers.",
        function=lambda args, _ctx: str(args["a"] + args["b"]),
    )
    with FakeOpenAIServer() as server:
        server.script(make_fault(), make_fault(), reply("Done after the tool"))
        model = model_for(server, transport, max_retries=1, stream_idle_timeout=idle)
        agent = Agent(model=model, tools=[add], replace_default_middleware=True)
        log: list[tuple[str, Any]] = []
        callbacks = {key: _recorder(log, key) for key in KEYS}
        result = await agent.aexecute(["Hi"], callbacks=[callbacks])
        requests = len(server.requests)
    next_turn = result.state.add_message(Message.user("Are you there?"))
    validate_openai_messages(next_turn)
    return {
        "status": result.status,
        "error": result.error,
        "exception": type(result.exception).__name__ if result.exception else None,
        "messages": [m.to_dict() for m in result.state.messages],
        "requests": requests,
        "callbacks": log,
    }


@pytest.mark.parametrize("name", list(FAULTS))
async def test_a_fault_ends_the_same_way_on_the_litellm_and_the_httpx_transport(
    name, litellm_warmed
):
    make_fault, status, requests, partial = FAULTS[name]

    # Stalls wait out the idle timeout (twice: the stall before any byte is retried);
    # elsewhere a generous one keeps a busy machine from reading as a stall.
    idle = 2.0 if name.startswith("stall") else 10.0
    on_litellm = await outcome_of(make_fault, "litellm", idle=idle)
    on_httpx = await outcome_of(make_fault, "openai", idle=idle)

    assert on_litellm == on_httpx
    assert on_httpx["status"] == status, on_httpx["error"]
    assert on_httpx["requests"] == requests
    texts = [m for m in on_httpx["messages"] if m["role"] == "assistant"]
    if partial is not None:
        assert texts[-1]["content"] == [{"type": "text", "content": partial}]
        assert texts[-1]["status"] == "stream_error"
        # The next call's model reads that this reply broke off.
        (sent,) = Message.from_dict(texts[-1]).to_openai()
        assert sent["content"] == f"{partial}\n\n{INTERRUPTED_NOTES['stream_error']}"
    elif status == "error":
        assert texts == []  # nothing half-made is left in the state
    deltas = [
        d
        for key, payload in on_httpx["callbacks"]
        if key == "on_llm_new_delta"
        for d in payload
    ]
    if status == "error":
        # No "complete" stop reason is ever announced before a failure.
        assert all("status" not in d for d in deltas)
