"""The fake OpenAI server, proven through raw httpx, the openai SDK and litellm.

What litellm 1.106.2 actually does with each fault (``model="openai/..."``, async,
``stream=True``; the default aiohttp transport and DISABLE_AIOHTTP_TRANSPORT=True gave
the same exception classes):

- HTTP 429 -> ``litellm.RateLimitError``; 500 -> ``InternalServerError``; 503 ->
  ``ServiceUnavailableError``; 400 -> ``BadRequestError``; 401 ->
  ``AuthenticationError`` only if the message says "Incorrect API key provided"
  (otherwise ``invalid_request_error`` in the body makes it ``BadRequestError``);
  404 with code ``model_not_found`` -> ``NotFoundError``. Raised from ``acompletion``
  itself, before any chunk.
- Retries: the openai SDK retries 429/5xx/connection errors twice by default (three
  requests; 0.5-1 s backoff each, Retry-After: 0 does not shorten it).
  ``num_retries=0`` or ``max_retries=0`` makes it one request.
- Stall before the first byte -> ``litellm.Timeout`` after ``timeout=``.
- Everything that goes wrong after the first chunk -> ``MidStreamFallbackError`` (a
  ``ServiceUnavailableError`` subclass, ``status_code`` 500) raised from the
  iterator, with ``generated_content`` = the text streamed so far and
  ``original_exception`` an ``APIConnectionError``: a mid-stream stall (read timeout,
  *not* ``litellm.Timeout``), a malformed ``data:`` line (the JSONDecodeError is
  wrapped, not leaked), an in-band ``{"error": ...}`` event (it raises; no empty
  success on this path), a connection reset.
- A stream that ends cleanly without a finish chunk and without ``[DONE]`` is a
  SILENT SUCCESS: litellm synthesises ``finish_reason="stop"``. Truncation must be
  detected by the caller (e.g. no finish_reason seen from the provider).
- A reset before any response byte -> ``InternalServerError`` ("Connection error.").
- Non-streaming: stall -> ``Timeout``; malformed body -> ``InternalServerError``;
  ``{"error": ...}`` with HTTP 200 -> ``litellm.APIError``; truncated body or reset ->
  ``InternalServerError`` ("Connection error.").
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import litellm
import openai
import pytest
from litellm.exceptions import MidStreamFallbackError

from tests.fakes.fixtures import litellm_params
from tests.fakes.openai_server import (
    FakeOpenAIServer,
    fault,
    reply,
    tool_call,
)

# setup.cfg turns warnings into errors, and litellm 1.106.2 triggers two pydantic
# warnings of its own: a ReadOnly TypedDict item (first streamed response built) and,
# on the usage chunk, a deprecated instance access that, raised as an error inside the
# stream, surfaces as a MidStreamFallbackError.
pytestmark = [
    pytest.mark.filterwarnings(
        "ignore:Item .* is using the `ReadOnly` qualifier:UserWarning"
    ),
    pytest.mark.filterwarnings(
        "ignore:Accessing the 'model_.*' attribute on the instance:DeprecationWarning"
    ),
]

MESSAGES = [{"role": "user", "content": "hi"}]
# No SDK or litellm retries: one scripted step per call.
NO_RETRY: dict[str, Any] = {"num_retries": 0, "max_retries": 0}


# ----------------------------------------------------------------------- helpers


def post(
    server: FakeOpenAIServer, *, stream: bool = True, **body: Any
) -> dict[str, Any]:
    return {
        "method": "POST",
        "url": f"{server.base_url}/chat/completions",
        "json": {"model": "fake-model", "messages": MESSAGES, "stream": stream, **body},
    }


def sse_data(lines: Iterator[str]) -> list[str]:
    """The ``data:`` payloads of an SSE body, in order."""
    return [line[len("data: ") :] for line in lines if line.startswith("data: ")]


def stream_raw(server: FakeOpenAIServer, **body: Any) -> list[str]:
    with (
        httpx.Client(timeout=5) as client,
        client.stream(**post(server, **body)) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return sse_data(response.iter_lines())


def deltas(payloads: list[str]) -> list[dict[str, Any]]:
    return [
        json.loads(p)["choices"][0]["delta"]
        for p in payloads
        if p != "[DONE]" and json.loads(p)["choices"]
    ]


async def lite_stream(server: FakeOpenAIServer, **kwargs: Any) -> list[Any]:
    response = await litellm.acompletion(
        model=server.model,
        messages=MESSAGES,
        stream=True,
        **server.model_params,
        **{**NO_RETRY, **kwargs},
    )
    return [chunk async for chunk in response]


def lite_text(chunks: list[Any]) -> str:
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def lite_finish_reasons(chunks: list[Any]) -> list[str]:
    return [
        c.choices[0].finish_reason
        for c in chunks
        if c.choices and c.choices[0].finish_reason
    ]


def lite_tool_calls(chunks: list[Any]) -> dict[int, dict[str, str]]:
    """Tool-call deltas reassembled by index, as an agent loop would."""
    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks:
        if not chunk.choices:
            continue
        for delta in chunk.choices[0].delta.tool_calls or []:
            call = calls.setdefault(
                delta.index, {"id": "", "name": "", "arguments": ""}
            )
            if delta.id:
                call["id"] = delta.id
            if delta.function and delta.function.name:
                call["name"] = delta.function.name
            if delta.function and delta.function.arguments:
                call["arguments"] += delta.function.arguments
    return calls


# ---------------------------------------------------------------- raw HTTP: replies


def test_a_text_reply_streams_in_the_requested_number_of_chunks_then_done(fake_llm):
    fake_llm.script(reply("Hello world", chunks=5))

    payloads = stream_raw(fake_llm)

    assert payloads[-1] == "[DONE]"
    ds = deltas(payloads)
    assert ds[0] == {"role": "assistant", "content": ""}
    content = [d["content"] for d in ds[1:] if d.get("content")]
    assert len(content) == 5
    assert "".join(content) == "Hello world"
    finish = json.loads(payloads[-2])["choices"][0]["finish_reason"]
    assert finish == "stop"


def test_tool_call_arguments_arrive_in_fragments_with_id_and_name_first(fake_llm):
    args = {"city": "Paris", "unit": "celsius"}
    fake_llm.script(
        reply(tool_calls=[tool_call("get_weather", args, id="call_1")], args_chunks=4)
    )

    ds = [d for d in deltas(stream_raw(fake_llm)) if "tool_calls" in d]

    head, *rest = [d["tool_calls"][0] for d in ds]
    assert head == {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
    }
    assert len(rest) == 4
    assert all(set(piece) == {"index", "function"} for piece in rest)
    joined = "".join(piece["function"]["arguments"] for piece in rest)
    assert json.loads(joined) == args


def tool_deltas(server: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [d for d in deltas(stream_raw(server)) if "tool_calls" in d]


def test_parallel_tool_calls_can_be_interleaved_by_index(fake_llm):
    calls = [tool_call("t", {"n": n}) for n in range(3)]
    fake_llm.script(
        reply(tool_calls=calls, args_chunks=2, interleave=True),
        reply(tool_calls=calls, args_chunks=2),
    )

    interleaved = [d["tool_calls"][0]["index"] for d in tool_deltas(fake_llm)]
    sequential = [d["tool_calls"][0]["index"] for d in tool_deltas(fake_llm)]

    assert interleaved[:6] == [0, 1, 2, 0, 1, 2]
    assert sequential == [0, 0, 0, 1, 1, 1, 2, 2, 2]


def test_a_reply_can_carry_text_reasoning_and_tool_calls_together(fake_llm):
    fake_llm.script(
        reply(
            "Checking.",
            reasoning="Need weather",
            tool_calls=[tool_call("get_weather", {"city": "Oslo"})],
        )
    )

    ds = deltas(stream_raw(fake_llm))

    assert ds[1] == {"reasoning_content": "Need weather"}
    assert ds[2] == {"content": "Checking."}
    assert ds[3]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert ds[3]["tool_calls"][0]["id"] == "call_0_0"  # call_<request#>_<index>


def test_usage_chunk_is_sent_only_when_requested_unless_forced(fake_llm):
    fake_llm.script(
        reply("a"), reply("b", usage=(12, 5, 3)), reply("c", include_usage=True)
    )

    plain = stream_raw(fake_llm)
    asked = stream_raw(fake_llm, stream_options={"include_usage": True})
    forced = stream_raw(fake_llm)

    assert not any('"usage"' in p for p in plain)
    usage_chunk = json.loads(asked[-2])
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"] == {
        "prompt_tokens": 12,
        "completion_tokens": 5,
        "total_tokens": 17,
        "completion_tokens_details": {"reasoning_tokens": 3},
    }
    assert json.loads(forced[-2])["usage"]["total_tokens"] > 0


@pytest.mark.parametrize(
    "finish_reason", ["stop", "tool_calls", "length", "content_filter"]
)
def test_finish_reason_is_sent_as_scripted(fake_llm, finish_reason):
    fake_llm.script(reply("x", finish_reason=finish_reason))

    payloads = stream_raw(fake_llm)

    assert json.loads(payloads[-2])["choices"][0]["finish_reason"] == finish_reason


def test_a_non_streaming_request_gets_a_chat_completion_with_usage(fake_llm):
    fake_llm.script(
        reply(
            "Sure",
            reasoning="hmm",
            tool_calls=[tool_call("f", {"a": 1}, id="c1")],
            usage=(7, 3),
        )
    )

    body = httpx.request(**post(fake_llm, stream=False)).json()

    assert body["object"] == "chat.completion"
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "Sure"
    assert choice["message"]["reasoning_content"] == "hmm"
    assert choice["message"]["tool_calls"] == [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "f", "arguments": '{"a": 1}'},
        }
    ]
    assert body["usage"] == {
        "prompt_tokens": 7,
        "completion_tokens": 3,
        "total_tokens": 10,
    }


# ---------------------------------------------------------- raw HTTP: scripting etc.


def test_requests_are_recorded_with_body_and_headers(fake_llm):
    fake_llm.script(reply("a"))

    httpx.request(**post(fake_llm, stream=False), headers={"X-Trace": "t1"})

    (req,) = fake_llm.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["x-trace"] == "t1"
    assert req["model"] == "fake-model"
    assert req.messages == MESSAGES
    assert req.stream is False
    assert req.outcome == "ok"


def test_the_path_without_the_v1_prefix_is_accepted(fake_llm):
    fake_llm.script(reply("a"))
    base = fake_llm.base_url.removesuffix("/v1")

    response = httpx.post(f"{base}/chat/completions", json={"messages": MESSAGES})

    assert response.json()["choices"][0]["message"]["content"] == "a"


def test_an_exhausted_script_answers_500_with_a_clear_message(fake_llm):
    response = httpx.request(**post(fake_llm))

    assert response.status_code == 500
    assert response.json()["error"]["code"] == "script_exhausted"
    assert "script exhausted" in response.json()["error"]["message"]
    assert len(fake_llm.exhausted) == 1


def test_a_default_reply_answers_once_the_script_is_empty(fake_llm):
    fake_llm.script(reply("first"), default=reply("again"))

    texts = [
        httpx.request(**post(fake_llm, stream=False)).json()["choices"][0]["message"][
            "content"
        ]
        for _ in range(3)
    ]

    assert texts == ["first", "again", "again"]
    assert fake_llm.remaining == 0


def test_a_callable_step_builds_the_reply_from_the_request(fake_llm):
    fake_llm.script(lambda body: reply(f"you said {body['messages'][-1]['content']}"))

    payloads = stream_raw(fake_llm)

    assert "".join(d.get("content", "") for d in deltas(payloads)) == "you said hi"


def test_remaining_counts_unconsumed_steps_and_teardown_does_not_fail(fake_llm):
    fake_llm.script(reply("a"), reply("b"), reply("c"))

    stream_raw(fake_llm)

    assert fake_llm.remaining == 2
    assert fake_llm.model == "openai/fake-model"
    assert litellm_params(fake_llm) == {
        "api_base": fake_llm.base_url,
        "api_key": "test",
    }


def test_keep_alive_reuses_one_connection_for_several_requests(fake_llm):
    fake_llm.script(reply("a", chunks=2), reply("b"), reply("c", chunks=3))

    with httpx.Client() as client:
        for _ in range(2):
            with client.stream(**post(fake_llm)) as response:
                response.read()
        client.request(**post(fake_llm, stream=False))

    assert fake_llm.connections == 1


def test_close_framing_streams_without_chunked_encoding():
    with FakeOpenAIServer(framing="close") as server:
        server.script(reply("Hello", chunks=2))
        with httpx.Client() as client, client.stream(**post(server)) as response:
            assert "transfer-encoding" not in response.headers
            payloads = sse_data(response.iter_lines())

    assert payloads[-1] == "[DONE]"
    assert "".join(d.get("content", "") for d in deltas(payloads)) == "Hello"


def test_concurrent_requests_each_consume_exactly_one_step(fake_llm):
    fake_llm.script(*[reply(f"r{i}", chunks=3, delay=0.01) for i in range(8)])
    results: list[str] = []

    def worker() -> None:
        text = "".join(d.get("content", "") for d in deltas(stream_raw(fake_llm)))
        results.append(text)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)

    assert sorted(results) == sorted(f"r{i}" for i in range(8))
    assert fake_llm.remaining == 0


# -------------------------------------------------------------- raw HTTP: faults


def test_http_fault_sends_status_retry_after_and_an_openai_error_body(fake_llm):
    fake_llm.script(fault.http(429, retry_after=0), fault.http(500))

    limited = httpx.request(**post(fake_llm))
    failed = httpx.request(**post(fake_llm))

    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "0"
    assert limited.json()["error"]["code"] == "rate_limit_exceeded"
    assert failed.status_code == 500
    assert failed.json()["error"]["type"] == "server_error"


def test_slow_first_byte_delays_the_status_line(fake_llm):
    fake_llm.script(fault.slow_first_byte(0.3, then=reply("late")))

    started = time.monotonic()
    with (
        httpx.Client() as client,
        pytest.raises(httpx.ReadTimeout),
        client.stream(**post(fake_llm), timeout=0.1),
    ):
        pass
    fake_llm.script(fault.slow_first_byte(0.3, then=reply("late")))
    payloads = stream_raw(fake_llm)

    assert time.monotonic() - started >= 0.4
    assert "".join(d.get("content", "") for d in deltas(payloads)) == "late"


def test_stall_sends_partial_chunks_then_nothing_until_the_client_times_out(fake_llm):
    fake_llm.script(fault.stall(after=reply("partial text that", chunks=3)))
    received: list[str] = []

    with (
        httpx.Client(timeout=0.3) as client,
        client.stream(**post(fake_llm)) as response,
        pytest.raises(httpx.ReadTimeout),
    ):
        for line in response.iter_lines():
            if line.startswith("data: "):
                received.append(line[6:])

    assert (
        "".join(d.get("content", "") for d in deltas(received)) == "partial text that"
    )
    assert "[DONE]" not in received
    req = fake_llm.requests[0]
    assert req.done.wait(2)
    assert req.outcome == "client_disconnected"


def test_malformed_chunk_appears_mid_stream(fake_llm):
    fake_llm.script(fault.malformed_chunk(after=reply("ok", chunks=2)))

    payloads = stream_raw(fake_llm)

    assert "{not json" in payloads
    bad = payloads.index("{not json")
    assert "".join(d.get("content", "") for d in deltas(payloads[:bad])) == "ok"
    assert payloads[-1] == "[DONE]"


def test_inband_error_event_follows_the_partial_chunks_and_ends_the_stream(fake_llm):
    fake_llm.script(
        fault.inband_error(after=reply("Hel", chunks=1), message="overloaded")
    )

    payloads = stream_raw(fake_llm)

    assert json.loads(payloads[-1])["error"] == {
        "message": "overloaded",
        "type": "server_error",
        "param": None,
        "code": "overloaded",
    }
    assert "".join(d.get("content", "") for d in deltas(payloads[:-1])) == "Hel"


def test_no_done_ends_the_body_cleanly_without_finish_reason_or_done(fake_llm):
    fake_llm.script(fault.no_done(reply("truncated", chunks=2)))

    payloads = stream_raw(fake_llm)  # no exception: the chunked body is terminated

    assert "[DONE]" not in payloads
    assert all(json.loads(p)["choices"][0]["finish_reason"] is None for p in payloads)
    assert "".join(d.get("content", "") for d in deltas(payloads)) == "truncated"


def test_drop_resets_the_connection_mid_stream(fake_llm):
    fake_llm.script(fault.drop(after=reply("partial", chunks=2)))
    received: list[str] = []

    with (
        httpx.Client() as client,
        client.stream(**post(fake_llm)) as response,
        pytest.raises(httpx.ReadError, match="reset by peer"),
    ):
        for line in response.iter_lines():
            received.extend(sse_data(iter([line])))

    assert "".join(d.get("content", "") for d in deltas(received)) == "partial"
    assert fake_llm.requests[0].outcome == "fault:drop"


def test_drop_without_after_resets_before_any_response_byte(fake_llm):
    fake_llm.script(fault.drop())

    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        httpx.request(**post(fake_llm))


def test_chunk_delay_spaces_events_and_a_client_hang_up_is_recorded(fake_llm):
    fake_llm.script(reply("a b c d e f g h i j", chunks=10, delay=0.1))

    started = time.monotonic()
    with httpx.Client() as client, client.stream(**post(fake_llm)) as response:
        got: list[str] = []
        for line in response.iter_lines():
            if line.startswith("data: "):
                got.append(line)
            if len(got) == 3:
                break
    elapsed = time.monotonic() - started

    req = fake_llm.requests[0]
    assert req.done.wait(2)
    assert req.outcome == "client_disconnected"
    assert elapsed >= 0.1  # a lower bound: a delay cannot come early, however busy


def test_a_gap_is_a_silent_stretch_before_one_event_then_the_stream_goes_on(fake_llm):
    fake_llm.script(reply("a b c", chunks=3, gaps={2: 0.4}))

    arrivals: list[float] = []
    started = time.monotonic()
    with httpx.Client() as client, client.stream(**post(fake_llm)) as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                arrivals.append(time.monotonic() - started)

    # role chunk, "a ", then the gap, "b ", "c", finish, [DONE]
    assert len(arrivals) == 6, arrivals
    assert arrivals[2] >= 0.4, arrivals  # "b " was held back by the gap


def test_stop_releases_a_stalled_connection_promptly():
    server = FakeOpenAIServer().start()
    server.script(fault.stall(after=reply("x")))
    errors: list[BaseException] = []

    def client() -> None:
        try:
            stream_raw(server)
        except httpx.HTTPError as exc:
            errors.append(exc)

    thread = threading.Thread(target=client)
    thread.start()
    # Wait until the server holds the request (a fixed sleep raced a loaded machine).
    deadline = time.monotonic() + 10
    while not server.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    server.stop()
    thread.join(10)

    # The stall would hold the client forever: returning at all shows stop released it.
    assert not thread.is_alive()
    assert len(errors) == 1
    assert server.requests[0].outcome == "server_stopped"


# ------------------------------------------------------------------- openai SDK


@pytest.mark.asyncio
async def test_the_openai_sdk_parses_streamed_text_tool_calls_and_usage(fake_llm):
    fake_llm.script(
        reply(
            "Hi",
            chunks=2,
            tool_calls=[tool_call("f", {"x": [1, 2]})],
            args_chunks=3,
            usage=(4, 2),
        )
    )
    client = openai.AsyncOpenAI(
        base_url=fake_llm.base_url, api_key="test", max_retries=0
    )

    stream = await client.chat.completions.create(
        model="fake-model",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [c async for c in stream]
    await client.close()

    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    args = "".join(
        tc.function.arguments or ""
        for c in chunks
        if c.choices
        for tc in c.choices[0].delta.tool_calls or []
    )
    assert text == "Hi"
    assert json.loads(args) == {"x": [1, 2]}
    assert chunks[-1].usage.total_tokens == 6


# ------------------------------------------------------------- litellm: replies


@pytest.mark.asyncio
async def test_litellm_streams_text_from_the_fake_server(fake_llm):
    fake_llm.script(reply("Hello world", chunks=5))

    chunks = await lite_stream(fake_llm)

    assert lite_text(chunks) == "Hello world"
    assert lite_finish_reasons(chunks) == ["stop"]
    assert fake_llm.requests[0]["model"] == "fake-model"  # the "openai/" prefix is gone


@pytest.mark.asyncio
async def test_litellm_reassembles_fragmented_tool_call_arguments_exactly(fake_llm):
    weather = {"city": "Paris", "days": [1, 2, 3], "note": 'say "hi"'}
    fake_llm.script(
        reply(
            "Let me check.",
            tool_calls=[
                tool_call("get_weather", weather, id="call_1"),
                tool_call("get_time", {"tz": "Europe/Paris"}, id="call_2"),
            ],
            args_chunks=4,
            interleave=True,
        )
    )

    chunks = await lite_stream(fake_llm)

    calls = lite_tool_calls(chunks)
    assert calls[0] == {
        "id": "call_1",
        "name": "get_weather",
        "arguments": json.dumps(weather),
    }
    assert calls[1]["arguments"] == '{"tz": "Europe/Paris"}'
    assert lite_text(chunks) == "Let me check."
    assert lite_finish_reasons(chunks) == ["tool_calls"]


@pytest.mark.asyncio
async def test_litellm_passes_malformed_tool_arguments_through_verbatim(fake_llm):
    fake_llm.script(reply(raw_arguments='{"city": "Par', tool_name="get_weather"))

    chunks = await lite_stream(fake_llm)

    assert lite_tool_calls(chunks)[0]["arguments"] == '{"city": "Par'


@pytest.mark.asyncio
async def test_litellm_reports_reasoning_and_usage_with_reasoning_tokens(fake_llm):
    fake_llm.script(reply("Final", reasoning="Let me think", usage=(12, 5, 2)))

    chunks = await lite_stream(fake_llm, stream_options={"include_usage": True})

    reasoning = "".join(
        getattr(c.choices[0].delta, "reasoning_content", None) or ""
        for c in chunks
        if c.choices
    )
    assert reasoning == "Let me think"
    usage = next(c.usage for c in chunks if getattr(c, "usage", None))
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (
        12,
        5,
        17,
    )
    assert usage.completion_tokens_details.reasoning_tokens == 2


@pytest.mark.asyncio
@pytest.mark.parametrize("finish_reason", ["length", "content_filter"])
async def test_litellm_passes_finish_reason_through(fake_llm, finish_reason):
    fake_llm.script(reply("cut", finish_reason=finish_reason))

    chunks = await lite_stream(fake_llm)

    assert lite_finish_reasons(chunks) == [finish_reason]


@pytest.mark.asyncio
async def test_litellm_non_streaming_returns_tool_calls(fake_llm):
    fake_llm.script(reply(tool_calls=[tool_call("f", {"a": 1}, id="c1")], usage=(3, 4)))

    response = await litellm.acompletion(
        model=fake_llm.model, messages=MESSAGES, **fake_llm.model_params, **NO_RETRY
    )

    message = response.choices[0].message
    assert message.tool_calls[0].id == "c1"
    assert message.tool_calls[0].function.arguments == '{"a": 1}'
    assert response.choices[0].finish_reason == "tool_calls"
    assert response.usage.total_tokens == 7


def test_sync_litellm_completion_streams_through_the_fake_server(fake_llm):
    fake_llm.script(reply(tool_calls=[tool_call("f", {"q": "x"})], args_chunks=3))

    response = litellm.completion(
        model=fake_llm.model,
        messages=MESSAGES,
        stream=True,
        **fake_llm.model_params,
        **NO_RETRY,
    )
    chunks = list(response)

    assert lite_tool_calls(chunks)[0]["arguments"] == '{"q": "x"}'


@pytest.mark.asyncio
async def test_litellm_works_with_close_framing():
    with FakeOpenAIServer(framing="close") as server:
        server.script(reply("Hello", chunks=3))
        chunks = await lite_stream(server)

    assert lite_text(chunks) == "Hello"


@pytest.mark.asyncio
async def test_cancelling_a_litellm_stream_closes_the_connection(fake_llm):
    fake_llm.script(reply("one two three four five six", chunks=6, delay=0.2))
    seen: list[str] = []

    async def consume() -> None:
        response = await litellm.acompletion(
            model=fake_llm.model,
            messages=MESSAGES,
            stream=True,
            **fake_llm.model_params,
            **NO_RETRY,
        )
        async for chunk in response:
            seen.append(lite_text([chunk]))

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    req = fake_llm.requests[0]
    assert await asyncio.to_thread(req.done.wait, 2)
    assert req.outcome == "client_disconnected"
    assert 0 < len(seen) < 6


# -------------------------------------------------------------- litellm: faults


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("status", "exc_name"),
    [
        (429, "RateLimitError"),
        (500, "InternalServerError"),
        (503, "ServiceUnavailableError"),
        (400, "BadRequestError"),
        (401, "AuthenticationError"),
        (404, "NotFoundError"),
    ],
)
async def test_litellm_maps_http_errors_to_its_exception_types(
    fake_llm, status, exc_name
):
    fake_llm.script(fault.http(status, retry_after=0))

    with pytest.raises(getattr(litellm, exc_name)) as info:
        await lite_stream(fake_llm)

    assert info.value.status_code == status
    assert len(fake_llm.requests) == 1  # NO_RETRY: a single request


@pytest.mark.asyncio
async def test_litellm_retries_a_429_by_itself_unless_told_not_to(fake_llm):
    # The openai SDK under litellm retries (max_retries defaults to 2).
    fake_llm.script(fault.http(429, retry_after=0), reply("after retry"))

    response = await litellm.acompletion(
        model=fake_llm.model, messages=MESSAGES, stream=True, **fake_llm.model_params
    )
    chunks = [c async for c in response]

    assert lite_text(chunks) == "after retry"
    assert len(fake_llm.requests) == 2


@pytest.mark.asyncio
async def test_litellm_waits_through_a_slow_first_byte(fake_llm):
    fake_llm.script(fault.slow_first_byte(0.3, then=reply("late")))

    chunks = await lite_stream(fake_llm, timeout=2)

    assert lite_text(chunks) == "late"


@pytest.mark.asyncio
async def test_litellm_raises_timeout_when_the_server_stalls_before_any_byte(fake_llm):
    fake_llm.script(fault.stall())

    with pytest.raises(litellm.Timeout):
        await lite_stream(fake_llm, timeout=0.5)


@pytest.mark.asyncio
async def test_litellm_raises_midstream_fallback_error_on_a_mid_stream_stall(fake_llm):
    # Not litellm.Timeout: the read timeout after the first chunk is wrapped.
    fake_llm.script(fault.stall(after=reply("partial text that", chunks=3)))

    with pytest.raises(MidStreamFallbackError) as info:
        await lite_stream(fake_llm, timeout=0.5)

    assert not isinstance(info.value, litellm.Timeout)
    assert info.value.generated_content == "partial text that"
    assert isinstance(info.value.original_exception, litellm.APIConnectionError)


@pytest.mark.asyncio
async def test_litellm_raises_midstream_fallback_error_on_a_malformed_chunk(fake_llm):
    # The JSONDecodeError does not leak: it is wrapped like any mid-stream failure.
    fake_llm.script(fault.malformed_chunk(after=reply("ok", chunks=2)))

    with pytest.raises(MidStreamFallbackError) as info:
        await lite_stream(fake_llm)

    assert "Expecting property name" in str(info.value)
    assert info.value.generated_content == "ok"


@pytest.mark.asyncio
async def test_litellm_raises_on_an_inband_error_instead_of_an_empty_success(fake_llm):
    fake_llm.script(
        fault.inband_error(after=reply("Hel", chunks=1), message="overloaded"),
        fault.inband_error(message="overloaded", done=True),
    )

    with pytest.raises(MidStreamFallbackError) as after_text:
        await lite_stream(fake_llm)
    with pytest.raises(MidStreamFallbackError) as at_once:
        await lite_stream(fake_llm)

    assert "overloaded" in str(after_text.value)
    assert after_text.value.generated_content == "Hel"
    assert at_once.value.generated_content == ""


@pytest.mark.asyncio
async def test_litellm_treats_a_stream_without_finish_or_done_as_success(fake_llm):
    # A known gap: litellm invents finish_reason="stop" for a truncated stream. The
    # stream wrapper's received_finish_reason (None here) tells the two apart.
    fake_llm.script(fault.no_done(reply("truncated", chunks=2)), reply("whole"))

    truncated = await litellm.acompletion(
        model=fake_llm.model,
        messages=MESSAGES,
        stream=True,
        **fake_llm.model_params,
        **NO_RETRY,
    )
    chunks = [c async for c in truncated]
    whole = await litellm.acompletion(
        model=fake_llm.model,
        messages=MESSAGES,
        stream=True,
        **fake_llm.model_params,
        **NO_RETRY,
    )
    whole_chunks = [c async for c in whole]

    assert lite_text(chunks) == "truncated"
    assert lite_finish_reasons(chunks) == ["stop"]
    assert truncated.received_finish_reason is None
    assert lite_finish_reasons(whole_chunks) == ["stop"]
    assert whole.received_finish_reason == "stop"


@pytest.mark.asyncio
async def test_litellm_raises_midstream_fallback_error_on_a_connection_reset(fake_llm):
    fake_llm.script(fault.drop(after=reply("partial", chunks=2)))

    with pytest.raises(MidStreamFallbackError) as info:
        await lite_stream(fake_llm)

    assert info.value.generated_content == "partial"


@pytest.mark.asyncio
async def test_litellm_reports_a_reset_before_any_byte_as_internal_server_error(
    fake_llm,
):
    fake_llm.script(fault.drop())

    with pytest.raises(litellm.InternalServerError, match="Connection error"):
        await lite_stream(fake_llm)


@pytest.mark.asyncio
async def test_litellm_surfaces_an_exhausted_script_as_internal_server_error(fake_llm):
    with pytest.raises(litellm.InternalServerError, match="script exhausted"):
        await lite_stream(fake_llm)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("step", "exc_name", "match"),
    [
        (fault.stall(), "Timeout", "timed out"),
        (fault.malformed_chunk(), "InternalServerError", "Expecting property name"),
        (fault.inband_error(message="overloaded"), "APIError", "overloaded"),
        (fault.no_done(reply("truncated")), "InternalServerError", "Connection error"),
        (fault.drop(after=reply("partial")), "InternalServerError", "Connection error"),
        (
            fault.slow_first_byte(0.1, then=fault.http(429)),
            "RateLimitError",
            "Rate limit",
        ),
    ],
    ids=["stall", "malformed", "inband_error", "truncated", "drop", "slow_429"],
)
async def test_litellm_non_streaming_faults_raise_these_types(
    fake_llm, step, exc_name, match
):
    fake_llm.script(step)

    with pytest.raises(Exception, match=match) as info:
        await litellm.acompletion(
            model=fake_llm.model,
            messages=MESSAGES,
            timeout=0.3,
            **fake_llm.model_params,
            **NO_RETRY,
        )

    assert type(info.value) is getattr(litellm, exc_name)
