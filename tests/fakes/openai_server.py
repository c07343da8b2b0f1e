"""A scripted, fault-injecting fake of OpenAI's chat completions HTTP API.

Tests point litellm (``model="openai/<anything>"``, ``api_base=server.base_url``,
``api_key="test"``) at this server so the real HTTP, SSE and error-mapping path runs,
with every byte under the test's control. Stdlib only: an asyncio server on its own
event loop in a daemon thread, so sync and async tests can both use it.

    with FakeOpenAIServer() as server:
        server.script(
            reply("Hello world", chunks=5),
            reply(tool_calls=[tool_call("get_weather", {"city": "Paris"})]),
            fault.http(429, retry_after=0),
        )
        ...litellm.completion(model=server.model, **server.model_params, ...)
        assert server.requests[0]["messages"][0]["content"] == "hi"

Each request consumes one scripted step, in order. A step is a :class:`Reply`, a
:class:`Fault` or a callable ``(request_json) -> Reply | Fault``. An exhausted script
answers HTTP 500 with ``code="script_exhausted"`` unless a ``default`` is set.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "FakeOpenAIServer",
    "Fault",
    "RecordedRequest",
    "Reply",
    "Step",
    "ToolCall",
    "fault",
    "reply",
    "tool_call",
]

FAKE_MODEL = "openai/fake-model"


# --------------------------------------------------------------------------- script


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str  # the JSON text exactly as sent; may be invalid on purpose
    id: str | None = None  # None: "call_<request#>_<index>"


def tool_call(
    name: str,
    arguments: Mapping[str, Any] | str | None = None,
    *,
    id: str | None = None,
) -> ToolCall:
    """A tool call; a ``str`` for ``arguments`` is sent verbatim (malformed JSON)."""
    if arguments is None:
        arguments = {}
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCall(name=name, arguments=text, id=id)


@dataclass(frozen=True)
class Reply:
    """One assistant turn, rendered as SSE chunks or as one chat.completion."""

    text: str | None = None
    chunks: int = 1
    tool_calls: tuple[ToolCall, ...] = ()
    args_chunks: int = 1
    interleave: bool = False  # parallel tool calls: round-robin their chunks
    reasoning: str | None = None
    reasoning_chunks: int = 1
    reasoning_field: str = "reasoning_content"  # the DeepSeek/vLLM-style delta key
    finish_reason: str | None = None  # None: "tool_calls" if tool calls else "stop"
    usage: tuple[int, ...] | None = None  # (prompt, completion[, reasoning])
    include_usage: bool | None = None  # None: as the request's stream_options ask
    delay: float | None = None  # seconds between SSE events; None: server default
    gaps: tuple[tuple[int, float], ...] = ()  # (body event index, extra seconds)
    model: str | None = None  # None: echo the request's model
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def resolved_finish_reason(self) -> str:
        if self.finish_reason is not None:
            return self.finish_reason
        return "tool_calls" if self.tool_calls else "stop"


def reply(
    text: str | None = None,
    *,
    chunks: int = 1,
    tool_calls: Sequence[ToolCall] = (),
    args_chunks: int = 1,
    raw_arguments: str | None = None,
    tool_name: str = "tool",
    interleave: bool = False,
    reasoning: str | None = None,
    reasoning_chunks: int = 1,
    reasoning_field: str = "reasoning_content",
    finish_reason: str | None = None,
    usage: tuple[int, ...] | None = None,
    include_usage: bool | None = None,
    delay: float | None = None,
    gaps: Mapping[int, float] | None = None,
    model: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """Build a :class:`Reply`.

    ``raw_arguments`` adds a ``tool_name`` call whose arguments string is sent as is,
    for malformed tool-argument JSON. ``include_usage=True`` sends the usage chunk
    even when the request did not ask for it, ``False`` never sends it.
    ``gaps={i: seconds}`` adds a silent stretch before body event ``i`` (event 0 is
    the role chunk; then reasoning, text and tool-call chunks in order), for streams
    that go quiet mid-way and then go on.
    """
    calls = list(tool_calls)
    if raw_arguments is not None:
        calls.append(ToolCall(name=tool_name, arguments=raw_arguments))
    if usage is not None and len(usage) not in (2, 3):
        raise ValueError(
            "usage is (prompt, completion) or (prompt, completion, reasoning)"
        )
    return Reply(
        text=text,
        chunks=chunks,
        tool_calls=tuple(calls),
        args_chunks=args_chunks,
        interleave=interleave,
        reasoning=reasoning,
        reasoning_chunks=reasoning_chunks,
        reasoning_field=reasoning_field,
        finish_reason=finish_reason,
        usage=usage,
        include_usage=include_usage,
        delay=delay,
        gaps=tuple(sorted((gaps or {}).items())),
        model=model,
        headers=tuple((headers or {}).items()),
    )


FaultKind = Literal[
    "http",
    "slow_first_byte",
    "stall",
    "malformed_chunk",
    "inband_error",
    "no_done",
    "drop",
]


@dataclass(frozen=True)
class Fault:
    """A misbehaving response. Build with the ``fault`` helpers."""

    kind: FaultKind
    after: Reply | None = None  # chunks sent (without the finish chunk) first
    then: Reply | Fault | None = None  # slow_first_byte: what follows the wait
    status: int = 500
    retry_after: float | None = None
    message: str = ""
    error_type: str | None = None
    code: str | None = None
    seconds: float = 0.0
    line: str = "{not json"
    done: bool = False  # inband_error: also send [DONE] after the error event
    headers: tuple[tuple[str, str], ...] = ()


# OpenAI's own (type, code, message) per status. The wording matters: litellm maps
# errors partly by substring (e.g. "invalid_request_error" without "Incorrect API key
# provided" becomes BadRequestError even on a 401).
_HTTP_ERRORS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request (fake server)."),
    401: (
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided: test (fake server).",
    ),
    403: ("permission_error", None, "Permission denied (fake server)."),
    404: (
        "invalid_request_error",
        "model_not_found",
        "The model `fake-model` does not exist (fake server).",
    ),
    429: (
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for fake-model (fake server).",
    ),
    500: (
        "server_error",
        None,
        "The server had an error while processing your request (fake server).",
    ),
    503: (
        "server_error",
        None,
        "The engine is currently overloaded, please try again later (fake server).",
    ),
}


class fault:  # a lowercase namespace reads well in scripts
    """Fault builders. Streaming and non-streaming requests both get a faithful fault;
    the docstrings say what a non-streaming request sees."""

    @staticmethod
    def http(
        status: int,
        *,
        retry_after: float | None = None,
        message: str | None = None,
        error_type: str | None = None,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Fault:
        """An HTTP error with an OpenAI-shaped ``{"error": {...}}`` JSON body."""
        default_type, default_code, default_message = _HTTP_ERRORS.get(
            status, ("api_error", None, f"Fake server error {status}.")
        )
        return Fault(
            kind="http",
            status=status,
            retry_after=retry_after,
            message=message or default_message,
            error_type=error_type or default_type,
            code=code if code is not None else default_code,
            headers=tuple((headers or {}).items()),
        )

    @staticmethod
    def slow_first_byte(seconds: float, then: Reply | Fault | None = None) -> Fault:
        """Wait ``seconds`` before the status line, then answer ``then`` (a reply or
        another fault, e.g. a slow 429)."""
        return Fault(kind="slow_first_byte", seconds=seconds, then=then or reply(""))

    @staticmethod
    def stall(after: Reply | None = None) -> Fault:
        """Send ``after``'s chunks, then no more bytes until the client gives up or the
        server stops. ``after=None`` stalls before the status line. Non-streaming:
        stalls before the status line."""
        return Fault(kind="stall", after=after)

    @staticmethod
    def malformed_chunk(after: Reply | None = None, line: str = "{not json") -> Fault:
        """``data: {not json`` mid-stream: after ``after``'s chunks, before its finish
        chunk and ``[DONE]``. Non-streaming: a 200 whose body is ``line``."""
        return Fault(kind="malformed_chunk", after=after or reply(""), line=line)

    @staticmethod
    def inband_error(
        after: Reply | None = None,
        message: str = "overloaded",
        *,
        error_type: str = "server_error",
        code: str | None = "overloaded",
        done: bool = False,
    ) -> Fault:
        """``data: {"error": {...}}`` after ``after``'s chunks; then the stream ends
        (with ``[DONE]`` only if ``done``). Non-streaming: a 200 whose body is
        ``{"error": {...}}``."""
        return Fault(
            kind="inband_error",
            after=after or reply(""),
            message=message,
            error_type=error_type,
            code=code,
            done=done,
        )

    @staticmethod
    def no_done(after: Reply) -> Fault:
        """Send ``after``'s chunks, then end the body cleanly with neither a finish
        chunk nor ``[DONE]``. Non-streaming: half the JSON body, then a clean close."""
        return Fault(kind="no_done", after=after)

    @staticmethod
    def drop(after: Reply | None = None, *, linger: float = 0.05) -> Fault:
        """Send ``after``'s chunks, wait ``linger`` (so they reach the client), then
        reset the connection (SO_LINGER 0 + close: a TCP RST). ``after=None`` resets
        without answering. Non-streaming: half the JSON body, then the reset."""
        return Fault(kind="drop", after=after, seconds=linger)


Step = Reply | Fault | Callable[[dict[str, Any]], Reply | Fault]


# ------------------------------------------------------------------------ recording


@dataclass
class RecordedRequest:
    """One HTTP request as received. Indexing reads the JSON body: ``req["model"]``."""

    index: int
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes
    json: Any
    # "pending" until answered; then "ok", "client_disconnected", "server_stopped",
    # "exhausted", "http_error", or "fault:<kind>".
    outcome: str = "pending"
    done: threading.Event = field(default_factory=threading.Event, repr=False)

    def __getitem__(self, key: str) -> Any:
        return self.json[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.json.get(key, default) if isinstance(self.json, dict) else default

    @property
    def stream(self) -> bool:
        return bool(self.get("stream"))

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.get("messages") or [])


# --------------------------------------------------------------------- rendering


def _split(text: str, n: int) -> list[str]:
    """``text`` in ``n`` nearly equal non-empty pieces (fewer if text is short)."""
    if not text:
        return []
    n = max(1, min(n, len(text)))
    size, extra = divmod(len(text), n)
    pieces, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        pieces.append(text[start:end])
        start = end
    return pieces


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


class _Render:
    """Turns a Reply into OpenAI wire objects for one request."""

    def __init__(self, r: Reply, req: RecordedRequest, include_usage: bool) -> None:
        self.r = r
        self.req = req
        self.include_usage = include_usage
        self.id = f"chatcmpl-fake-{req.index}"
        self.created = int(time.time())
        self.model = r.model or str(req.get("model") or "fake-model")

    def call_id(self, i: int, call: ToolCall) -> str:
        return call.id or f"call_{self.req.index}_{i}"

    def usage(self) -> dict[str, Any]:
        if self.r.usage is not None:
            prompt, completion, *rest = self.r.usage
            reasoning = rest[0] if rest else None
        else:
            prompt = _estimate_tokens(json.dumps(self.req.messages)) or 1
            body = (self.r.text or "") + "".join(c.arguments for c in self.r.tool_calls)
            reasoning = _estimate_tokens(self.r.reasoning or "") or None
            completion = _estimate_tokens(body) + (reasoning or 0)
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        if reasoning is not None:
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        return usage

    def chunk(
        self, delta: dict[str, Any], finish_reason: str | None = None
    ) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_fake",
            "choices": [
                {
                    "index": 0,
                    "delta": delta,
                    "logprobs": None,
                    "finish_reason": finish_reason,
                }
            ],
        }

    def body_chunks(self) -> list[dict[str, Any]]:
        """Everything up to, not including, the finish chunk."""
        r = self.r
        out = [self.chunk({"role": "assistant", "content": ""})]
        for piece in _split(r.reasoning or "", r.reasoning_chunks):
            out.append(self.chunk({r.reasoning_field: piece}))
        for piece in _split(r.text or "", r.chunks):
            out.append(self.chunk({"content": piece}))
        per_call: list[list[dict[str, Any]]] = []
        for i, call in enumerate(r.tool_calls):
            # OpenAI-style: the first delta names the call, later ones carry only
            # the index and the next piece of the arguments string.
            head = {
                "index": i,
                "id": self.call_id(i, call),
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            deltas = [head] + [
                {"index": i, "function": {"arguments": piece}}
                for piece in _split(call.arguments, r.args_chunks)
            ]
            per_call.append([self.chunk({"tool_calls": [d]}) for d in deltas])
        if r.interleave:
            out.extend(_round_robin(per_call))
        else:
            for chunks in per_call:
                out.extend(chunks)
        return out

    def tail_chunks(self) -> list[dict[str, Any]]:
        out = [self.chunk({}, self.r.resolved_finish_reason)]
        if self.include_usage:
            usage_chunk = self.chunk({})
            usage_chunk["choices"] = []
            usage_chunk["usage"] = self.usage()
            out.append(usage_chunk)
        return out

    def completion(self) -> dict[str, Any]:
        r = self.r
        message: dict[str, Any] = {
            "role": "assistant",
            "content": r.text or (None if r.tool_calls else ""),
            "refusal": None,
        }
        if r.reasoning is not None:
            message[r.reasoning_field] = r.reasoning
        if r.tool_calls:
            message["tool_calls"] = [
                {
                    "id": self.call_id(i, c),
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for i, c in enumerate(r.tool_calls)
            ]
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_fake",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": r.resolved_finish_reason,
                }
            ],
            "usage": self.usage(),
        }


def _round_robin(lists: Iterable[list[dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    queues = [deque(x) for x in lists]
    while any(queues):
        for q in queues:
            if q:
                yield q.popleft()


def _error_body(message: str, type_: str | None, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    413: "Payload Too Large",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


# -------------------------------------------------------------------------- server


class _ClientGone(Exception):
    pass


class _Conn:
    """One TCP connection: HTTP/1.1 request parsing and raw response writing."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader = reader
        self.writer = writer
        self.buf = bytearray()
        self.gone = asyncio.Event()
        self._watcher: asyncio.Task[None] | None = None
        self.req: RecordedRequest | None = None
        self.planned = "ok"

    def settle(self) -> None:
        """Record the outcome *before* the bytes that let the client finish, so a
        test that reads ``req.outcome`` right after its call returns sees it."""
        if self.req is not None:
            self.req.outcome = self.planned
            self.req.done.set()

    async def _fill(self) -> bool:
        data = await self.reader.read(65536)
        self.buf += data
        return bool(data)

    async def read_request(self) -> tuple[str, str, dict[str, str], bytes] | None:
        while b"\r\n\r\n" not in self.buf:
            if len(self.buf) > 1 << 20 or not await self._fill():
                return None
        head, _, rest = bytes(self.buf).partition(b"\r\n\r\n")
        self.buf = bytearray(rest)
        lines = head.decode("latin-1").split("\r\n")
        method, path, _version = lines[0].split(" ", 2)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body = await self._read_chunked_body()
        else:
            length = int(headers.get("content-length") or 0)
            while len(self.buf) < length:
                if not await self._fill():
                    return None
            body, self.buf = bytes(self.buf[:length]), self.buf[length:]
        return method, path, headers, body

    async def _read_chunked_body(self) -> bytes:
        body = bytearray()
        while True:
            while b"\r\n" not in self.buf:
                if not await self._fill():
                    raise _ClientGone
            size_line, _, rest = bytes(self.buf).partition(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            self.buf = bytearray(rest)
            while len(self.buf) < size + 2:
                if not await self._fill():
                    raise _ClientGone
            body += self.buf[:size]
            self.buf = self.buf[size + 2 :]
            if size == 0:
                return bytes(body)

    # While a response is being produced, read (and keep) whatever the client sends
    # so that a client closing the socket is noticed at once, even mid-sleep.
    def watch(self) -> None:
        self.gone.clear()

        async def run() -> None:
            with contextlib.suppress(ConnectionError):
                while await self._fill():
                    pass
            self.gone.set()

        self._watcher = asyncio.ensure_future(run())

    async def unwatch(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            # asyncio.wait, unlike awaiting the task, never swallows our own
            # cancellation (the server stopping).
            await asyncio.wait([self._watcher])
            self._watcher = None

    async def pause(self, seconds: float) -> None:
        if seconds > 0:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.gone.wait(), seconds)
        if self.gone.is_set():
            raise _ClientGone

    async def send(self, data: bytes) -> None:
        if self.gone.is_set() or self.writer.is_closing():
            raise _ClientGone
        self.writer.write(data)
        try:
            await self.writer.drain()
        except ConnectionError as exc:
            raise _ClientGone from exc

    def reset(self) -> None:
        sock = self.writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
        self.writer.transport.abort()


class FakeOpenAIServer:
    """Fake OpenAI chat completions server on 127.0.0.1 (a free port).

    ``framing="chunked"`` (default) streams with ``Transfer-Encoding: chunked`` and
    keeps connections alive, like api.openai.com; ``"close"`` ends each streamed body
    by closing the connection. ``delay`` is the default pause between SSE events.
    ``include_usage=True`` sends the streamed usage chunk even when not asked for.
    """

    model = FAKE_MODEL

    def __init__(
        self,
        *,
        framing: Literal["chunked", "close"] = "chunked",
        delay: float = 0.0,
        include_usage: bool | None = None,
        default: Step | None = None,
    ) -> None:
        self.framing = framing
        self.delay = delay
        self.include_usage = include_usage
        self.default = default
        self.requests: list[RecordedRequest] = []
        self.connections = 0  # TCP connections accepted: shows keep-alive reuse
        self._steps: deque[Step] = deque()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self.port = 0

    # -- scripting -------------------------------------------------------------

    _UNSET: Any = object()

    def script(self, *steps: Step, default: Step | None = _UNSET) -> FakeOpenAIServer:
        """Append steps to the queue (one per request, in order)."""
        with self._lock:
            self._steps.extend(steps)
            if default is not self._UNSET:
                self.default = default
        return self

    def reset(self) -> None:
        """Forget the script, the default and the recorded requests."""
        with self._lock:
            self._steps.clear()
            self.default = None
            self.requests.clear()

    @property
    def remaining(self) -> int:
        """Scripted steps not yet consumed."""
        with self._lock:
            return len(self._steps)

    @property
    def exhausted(self) -> list[RecordedRequest]:
        """Requests that found the script empty (answered with HTTP 500)."""
        with self._lock:
            return [r for r in self.requests if r.outcome == "exhausted"]

    @property
    def last_request(self) -> RecordedRequest:
        with self._lock:
            return self.requests[-1]

    # -- addresses ---------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model_params(self) -> dict[str, Any]:
        return {"api_base": self.base_url, "api_key": "test"}

    def litellm_kwargs(self, **extra: Any) -> dict[str, Any]:
        """``model`` + ``model_params`` + ``extra``: ``litellm.completion(**...)``."""
        return {"model": self.model, **self.model_params, **extra}

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> FakeOpenAIServer:
        if self._thread is not None:
            return self
        self._ready.clear()
        self._thread = threading.Thread(
            target=self._run, name="fake-openai-server", daemon=True
        )
        self._thread.start()
        self._ready.wait(10)
        if self._startup_error is not None:
            raise RuntimeError("fake OpenAI server failed to start") from (
                self._startup_error
            )
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving and close every connection, stalled ones included."""
        if self._thread is None:
            return
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stopping.set)
        self._thread.join(timeout)
        self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as exc:  # surfaced by start()
            self._startup_error = exc
            self._ready.set()
        finally:
            loop.close()

    async def _serve(self) -> None:
        self._stopping = asyncio.Event()
        server = await asyncio.start_server(self._on_connection, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            await self._stopping.wait()
        finally:
            server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await server.wait_closed()

    # -- HTTP --------------------------------------------------------------------

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        conn = _Conn(reader, writer)
        keep_alive = True
        req: RecordedRequest | None = None
        try:
            while keep_alive:
                parsed = await conn.read_request()
                if parsed is None:
                    break
                method, path, headers, body = parsed
                req = self._record(method, path, headers, body)
                conn.req, conn.planned = req, "ok"
                conn.watch()
                try:
                    keep_alive = await self._respond(conn, req)
                    if headers.get("connection", "").lower() == "close":
                        keep_alive = False
                except _ClientGone:
                    req.outcome = "client_disconnected"
                    keep_alive = False
                except asyncio.CancelledError:
                    req.outcome = "server_stopped"
                    raise
                finally:
                    await conn.unwatch()
                    req.done.set()
        except asyncio.CancelledError:
            # The server is stopping: release the client at once. Not re-raised:
            # asyncio.start_server's done-callback logs cancelled handler tasks.
            conn.reset()
        except (_ClientGone, ConnectionError, ValueError):
            pass  # the client left mid-request, or sent something unparsable
        finally:
            if req is not None:
                req.done.set()
            if not writer.is_closing():
                writer.close()
            self._tasks.discard(task)

    def _record(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> RecordedRequest:
        try:
            parsed: Any = json.loads(body) if body else None
        except ValueError:
            parsed = None
        with self._lock:
            req = RecordedRequest(
                index=len(self.requests),
                method=method,
                path=path,
                headers=headers,
                body=body,
                json=parsed,
            )
            self.requests.append(req)
        return req

    def _next_step(self, req: RecordedRequest) -> Reply | Fault | None:
        with self._lock:
            step = self._steps.popleft() if self._steps else self.default
        while callable(step):
            step = step(req.json)
        return step

    async def _respond(self, conn: _Conn, req: RecordedRequest) -> bool:
        """Answer one request; returns whether the connection may be reused."""
        path = req.path.split("?")[0].rstrip("/")
        if req.method == "GET" and path in ("/v1/models", "/models"):
            models = {
                "object": "list",
                "data": [{"id": "fake-model", "object": "model"}],
            }
            return await self._send_json(conn, 200, models)
        if req.method != "POST" or path not in (
            "/v1/chat/completions",
            "/chat/completions",
        ):
            conn.planned = "http_error"
            body = _error_body(
                f"fake server: no route {req.method} {req.path}",
                "invalid_request_error",
                None,
            )
            return await self._send_json(conn, 404, body)
        if not isinstance(req.json, dict):
            conn.planned = "http_error"
            body = _error_body(
                "fake server: body is not a JSON object", "invalid_request_error", None
            )
            return await self._send_json(conn, 400, body)

        step = self._next_step(req)
        if step is None:
            conn.planned = "exhausted"
            message = (
                f"fake OpenAI server: script exhausted (request #{req.index} had no "
                "scripted reply; add one with server.script(...) or set default=)"
            )
            body = _error_body(message, "fake_script_exhausted", "script_exhausted")
            return await self._send_json(conn, 500, body)
        while isinstance(step, Fault) and step.kind == "slow_first_byte":
            await conn.pause(step.seconds)
            assert step.then is not None
            step = step.then
        conn.planned = "ok" if isinstance(step, Reply) else f"fault:{step.kind}"
        return await (self._stream if req.stream else self._complete)(conn, req, step)

    def _render(self, r: Reply, req: RecordedRequest) -> _Render:
        include = r.include_usage
        if include is None:
            include = self.include_usage
        if include is None:
            options = req.get("stream_options") or {}
            include = bool(isinstance(options, dict) and options.get("include_usage"))
        return _Render(r, req, include)

    async def _send_json(
        self,
        conn: _Conn,
        status: int,
        payload: Any,
        headers: Iterable[tuple[str, str]] = (),
    ) -> bool:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        conn.settle()
        await conn.send(
            _head(status, [("Content-Type", "application/json"), *headers], len(data))
            + data
        )
        return True

    async def _complete(
        self, conn: _Conn, req: RecordedRequest, step: Reply | Fault
    ) -> bool:
        if isinstance(step, Reply):
            return await self._send_json(
                conn, 200, self._render(step, req).completion(), step.headers
            )
        if step.kind == "http":
            return await self._send_http_fault(conn, step)
        if step.kind == "stall":
            await conn.gone.wait()
            raise _ClientGone
        if step.kind == "malformed_chunk":
            return await self._send_json(conn, 200, step.line.encode())
        if step.kind == "inband_error":
            return await self._send_json(
                conn, 200, _error_body(step.message, step.error_type, step.code)
            )
        # no_done / drop: a truncated body, then a clean close or a reset
        full = json.dumps(
            self._render(step.after or reply(""), req).completion()
        ).encode()
        head = _head(200, [("Content-Type", "application/json")], len(full))
        conn.settle()
        await conn.send(head + full[: len(full) // 2])
        if step.kind == "drop":
            await conn.pause(step.seconds)
            conn.reset()
        return False

    async def _send_http_fault(self, conn: _Conn, step: Fault) -> bool:
        headers = list(step.headers)
        if step.retry_after is not None:
            headers.append(("Retry-After", f"{step.retry_after:g}"))
            headers.append(("Retry-After-Ms", f"{int(step.retry_after * 1000)}"))
        body = _error_body(step.message, step.error_type, step.code)
        return await self._send_json(conn, step.status, body, headers)

    async def _stream(
        self, conn: _Conn, req: RecordedRequest, step: Reply | Fault
    ) -> bool:
        if isinstance(step, Fault) and step.kind == "http":
            return await self._send_http_fault(conn, step)
        if (
            isinstance(step, Fault)
            and step.kind in ("stall", "drop")
            and step.after is None
        ):
            # before any byte of the response
            if step.kind == "drop":
                conn.settle()
                conn.reset()
                return False
            await conn.gone.wait()
            raise _ClientGone

        r = step if isinstance(step, Reply) else step.after
        assert r is not None
        render = self._render(r, req)
        delay = self.delay if r.delay is None else r.delay
        chunked = self.framing == "chunked"
        framing = (
            [("Transfer-Encoding", "chunked")] if chunked else [("Connection", "close")]
        )
        head = _head(
            200,
            [
                ("Content-Type", "text/event-stream; charset=utf-8"),
                ("Cache-Control", "no-cache"),
                *framing,
                *r.headers,
            ],
        )
        await conn.send(head)

        first = True

        async def event(payload: str) -> None:
            nonlocal first
            if not first:
                await conn.pause(delay)
            first = False
            data = f"data: {payload}\n\n".encode()
            await conn.send(
                f"{len(data):x}\r\n".encode() + data + b"\r\n" if chunked else data
            )

        gaps = dict(r.gaps)
        for index, chunk in enumerate(render.body_chunks()):
            if index in gaps:
                await conn.pause(gaps[index])
            await event(json.dumps(chunk))

        kind = step.kind if isinstance(step, Fault) else None
        if kind != "stall":
            conn.settle()
        if kind == "stall":
            await conn.gone.wait()
            raise _ClientGone
        if kind == "drop":
            await conn.pause(step.seconds)  # type: ignore[union-attr]
            conn.reset()
            return False
        if kind == "inband_error":
            assert isinstance(step, Fault)
            await event(
                json.dumps(_error_body(step.message, step.error_type, step.code))
            )
            if step.done:
                await event("[DONE]")
        elif kind == "no_done":
            pass
        else:
            if kind == "malformed_chunk":
                assert isinstance(step, Fault)
                await event(step.line)
            for chunk in render.tail_chunks():
                await event(json.dumps(chunk))
            await event("[DONE]")

        if chunked:
            await conn.send(b"0\r\n\r\n")
            return True
        return False


def _head(
    status: int, headers: Iterable[tuple[str, str]], content_length: int | None = None
) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
    lines += [f"{k}: {v}" for k, v in headers]
    lines.append("x-request-id: fake")
    if content_length is not None:
        lines.append(f"Content-Length: {content_length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
