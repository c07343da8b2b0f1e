"""The chain: one model call, streamed and assembled, with retries and fallbacks.

Retries live here and nowhere else (not in litellm, not in Celery). A call is retried
only while nothing has reached the callbacks: once text has streamed to a person, a
broken stream ends the turn with the partial text kept (status ``stream_error``)
instead of being replayed. After its retries a model gives way to the next of
``fallback_models``; ``before_fallback`` may adjust each attempt's request.

A ``CancelToken`` passed as ``cancel`` interrupts the call wherever it waits (the
first byte, a silent gap, a backoff sleep); the call then returns what had arrived,
marked ``cancelled``, instead of raising.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from . import tracing
from .cancellation import Cancelled, CancelToken
from .exceptions import ConfigurationError, LLMError, StreamError
from .messages import (
    ContentPart,
    Message,
    MessageDelta,
    StopReason,
    TokenUsage,
    ToolCall,
)
from .openai_format import parse_tool_arguments
from .provider_errors import NO_FINISH_REASON
from .transports import LiteLLMTransport, OpenAITransport, ResponseInfo, describe

if TYPE_CHECKING:
    from .callbacks import Callbacks

logger = logging.getLogger(__name__)

_NO_SCOPE = contextlib.nullcontext()
_LITELLM = LiteLLMTransport()
_OPENAI = OpenAITransport()


@dataclass(kw_only=True, slots=True)
class ModelRequest:
    """What one attempt sends: ``before_fallback`` may return a changed copy."""

    model_name: str
    messages: list[dict[str, Any]]
    """OpenAI chat-format messages, system prompt first."""
    tools: list[dict[str, Any]]
    params: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class StreamingModel(Protocol):
    """Anything that can stream a reply: ``ChatModel`` or a test model."""

    name: str
    max_retries: int

    def stream(self, request: ModelRequest) -> AsyncIterator[Any]: ...

    def request(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> ModelRequest: ...


@dataclass(kw_only=True, slots=True)
class ChatModel:
    """A litellm model string plus its parameters."""

    model: str
    """Any litellm model string: ``"openai/gpt-4o"``, ``"anthropic/claude-..."``,
    ``"sagents/demo"`` (the offline demo model)."""
    params: dict[str, Any] = field(default_factory=dict)
    """Passed to the provider: ``api_base``, ``api_key``, ``temperature``..."""
    max_retries: int = 2
    """Extra attempts after a retryable failure (429, 5xx, connection error)."""
    retry_delay: float = 0.5
    """First backoff in seconds; doubles each retry (a Retry-After header wins)."""
    request_timeout: float = 600.0
    stream_idle_timeout: float = 120.0
    """Seconds without a byte before a stream counts as stalled."""
    transport: Literal["auto", "litellm", "openai"] = "auto"
    """``auto`` uses the lean httpx path for ``openai/...`` models with an api_base."""

    @property
    def name(self) -> str:
        return self.model

    def request(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> ModelRequest:
        return ModelRequest(
            model_name=self.model,
            messages=messages,
            tools=tools,
            params=dict(self.params),
        )

    def uses_openai_transport(self) -> bool:
        if self.transport == "auto":
            return self.model.startswith("openai/") and bool(
                self.params.get("api_base") or self.params.get("base_url")
            )
        return self.transport == "openai"

    def stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        transport = _OPENAI if self.uses_openai_transport() else _LITELLM
        return transport.stream(self, request)


def as_model(value: Any) -> Any:
    """Accept a model string, a dict of ChatModel fields or a model object."""
    if isinstance(value, str):
        if not value.strip():
            raise ConfigurationError("A model string must not be empty")
        return ChatModel(model=value)
    if isinstance(value, dict):
        try:
            return ChatModel(**value)
        except TypeError as exc:
            raise ConfigurationError(
                f"Bad ChatModel fields {sorted(value)}: {exc}"
            ) from exc
    if isinstance(value, StreamingModel):
        return value
    raise ConfigurationError(
        f"A model must be a litellm model string, a dict of ChatModel fields or a "
        f"ChatModel, not {value!r}"
    )


@dataclass(kw_only=True, slots=True)
class ModelCall:
    """The outcome of ``call_model``: the message, its usage and which model answered."""

    message: Message
    usage: TokenUsage | None
    model_name: str


class _Assembler:
    """Folds deltas into one assistant message."""

    __slots__ = ("calls", "emitted", "status", "text", "thinking")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.thinking: list[str] = []
        self.calls: dict[int, list[Any]] = {}  # index -> [id, name, [argument pieces]]
        self.status: StopReason | None = None
        self.emitted = False

    def add(self, delta: MessageDelta) -> list[ToolCall]:
        """Take a delta; return calls whose name appeared for the first time."""
        if delta.content:
            self.text.append(delta.content)
        if delta.thinking:
            self.thinking.append(delta.thinking)
        identified: list[ToolCall] = []
        if delta.tool_calls:
            for piece in delta.tool_calls:
                slot = self.calls.get(piece.index)
                if slot is None:
                    slot = self.calls[piece.index] = [None, None, []]
                if piece.call_id:
                    slot[0] = piece.call_id
                if piece.name and not slot[1]:
                    slot[1] = piece.name
                    identified.append(
                        ToolCall(call_id=slot[0] or "", name=piece.name, arguments={})
                    )
                if piece.arguments:
                    slot[2].append(piece.arguments)
        if delta.status is not None:
            self.status = delta.status
        return identified

    def build(self, status: StopReason) -> Message:
        parts: list[ContentPart] = []
        if self.thinking:
            parts.append(ContentPart.thinking("".join(self.thinking)))
        if self.text:
            parts.append(ContentPart.text("".join(self.text)))
        calls = []
        # A stream that broke may leave a half-sent call; keep only finished ones.
        if status in ("complete", "length"):
            for index in sorted(self.calls):
                call_id, name, pieces = self.calls[index]
                arguments, raw = parse_tool_arguments("".join(pieces))
                calls.append(
                    ToolCall(
                        call_id=call_id or f"call_{index}",
                        name=name or "",
                        arguments=arguments,
                        raw_arguments=raw,
                    )
                )
        return Message(role="assistant", content=parts, tool_calls=calls, status=status)


async def stream_once(
    model: Any,
    request: ModelRequest,
    *,
    execution: Any,
    callbacks: Callbacks,
    cancel: CancelToken | None = None,
) -> ModelCall:
    """One attempt: stream, assemble, report. Raises LLMError before any delta was
    emitted; after that, a broken stream raises StreamError carrying the partial
    message (``error.partial``). When ``cancel`` fires, returns what had arrived with
    the stop reason ``cancelled`` (possibly an empty message)."""
    assembler = _Assembler()
    usage: TokenUsage | None = None
    idle = getattr(model, "stream_idle_timeout", None)
    loop = asyncio.get_running_loop()
    fire = callbacks.fire
    wants_deltas = callbacks.has("on_llm_new_delta")
    wants_calls = callbacks.has("on_tool_call_identified")
    try:
        # The scope is the cancel race: waiting for the first byte, a gap, a chunk,
        # all of it is interrupted when the token fires, at no cost per chunk.
        async with (
            cancel.scope() if cancel is not None else _NO_SCOPE,
            contextlib.aclosing(model.stream(request)) as stream,
            asyncio.timeout_at(loop.time() + idle if idle else None) as timer,
        ):
            async for event in stream:
                if idle:
                    timer.reschedule(loop.time() + idle)
                if type(event) is MessageDelta:
                    identified = assembler.add(event)
                    assembler.emitted = True
                    if wants_deltas:
                        await fire("on_llm_new_delta", execution, [event])
                    if identified and wants_calls:
                        for call in identified:
                            await fire("on_tool_call_identified", execution, call, None)
                    # Set by a handler just now: stop before the next chunk.
                    if cancel is not None and cancel.cancelled:
                        raise Cancelled(cancel.reason)
                elif type(event) is TokenUsage:
                    usage = event
                elif type(event) is ResponseInfo:
                    await fire("on_llm_response_headers", execution, event.headers)
                    if event.ratelimit:
                        await fire("on_llm_ratelimit_info", execution, event.ratelimit)
    except Cancelled:
        # A finish reason that already arrived stands: the reply was complete.
        return ModelCall(
            message=assembler.build(assembler.status or "cancelled"),
            usage=usage,
            model_name=request.model_name,
        )
    except TimeoutError:
        error = StreamError(f"The model's stream stalled: no data for {idle:g} seconds")
        raise _with_partial(error, assembler, retryable=not assembler.emitted) from None
    except StreamError as error:
        raise _with_partial(
            error, assembler, retryable=not assembler.emitted
        ) from error
    except LLMError as error:
        if assembler.emitted:
            raise _with_partial(
                StreamError(str(error)), assembler, retryable=False
            ) from error
        raise
    if assembler.status is None:
        unfinished = StreamError(NO_FINISH_REASON)
        raise _with_partial(unfinished, assembler, retryable=not assembler.emitted)
    message = assembler.build(assembler.status)
    if usage is not None:
        message.metadata["usage"] = usage.to_dict()
        await fire("on_llm_token_usage", execution, usage)
    return ModelCall(message=message, usage=usage, model_name=request.model_name)


def _with_partial(
    error: StreamError, assembler: _Assembler, *, retryable: bool
) -> StreamError:
    error.retryable = retryable
    error.partial = assembler.build("stream_error") if assembler.emitted else None
    if error.partial is not None and str(error):
        # What the transcript's "cut off" note can say (upstream v0.12.1).
        error.partial.metadata["stop_details"] = str(error)
    return error


async def call_model(
    models: list[Any],
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    *,
    execution: Any,
    callbacks: Callbacks,
    before_fallback: Callable[[ModelRequest], ModelRequest] | None = None,
    cancel: CancelToken | None = None,
    sleep: Callable[[float], Any] = asyncio.sleep,
) -> ModelCall:
    """Call ``models[0]``, retrying, then each fallback; raise the last LLMError.

    When ``cancel`` fires (mid-stream or during a backoff sleep) the call returns
    at once with a message whose status is ``cancelled``. One ``sagents.model_call``
    span when the process traces (``core.tracing``)."""
    first = getattr(models[0], "name", None) if models else None
    with tracing.span(
        "sagents.model_call",
        {"gen_ai.operation.name": "chat", "gen_ai.request.model": first},
    ) as span:
        call = await _call_model(
            models,
            messages,
            tools,
            execution=execution,
            callbacks=callbacks,
            before_fallback=before_fallback,
            cancel=cancel,
            sleep=sleep,
        )
        usage = call.usage
        tracing.set_attributes(
            span,
            {
                "gen_ai.response.model": call.model_name,
                "gen_ai.usage.input_tokens": usage.input if usage else None,
                "gen_ai.usage.output_tokens": usage.output if usage else None,
                "sagents.stop_reason": call.message.status,
            },
        )
        return call


async def _call_model(
    models: list[Any],
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    *,
    execution: Any,
    callbacks: Callbacks,
    before_fallback: Callable[[ModelRequest], ModelRequest] | None,
    cancel: CancelToken | None,
    sleep: Callable[[float], Any],
) -> ModelCall:
    last_error: LLMError | None = None
    for model in models:
        request = model.request(messages, tools)
        if before_fallback is not None:
            request = before_fallback(request)
        attempts = 1 + max(0, int(getattr(model, "max_retries", 0)))
        delay = float(getattr(model, "retry_delay", 0.5))
        for attempt in range(attempts):
            try:
                return await stream_once(
                    model,
                    request,
                    execution=execution,
                    callbacks=callbacks,
                    cancel=cancel,
                )
            except LLMError as error:
                last_error = error
                if error.partial is not None:
                    raise  # text already reached people: never replay it
                logger.warning(
                    "Model %s attempt %d/%d failed: %s%s",
                    request.model_name,
                    attempt + 1,
                    attempts,
                    error,
                    f" ({describe(error.__cause__)})" if error.__cause__ else "",
                )
                if not error.retryable or attempt + 1 == attempts:
                    break
                wait = error.retry_after
                pause = min(wait, 30.0) if wait is not None else delay * (2**attempt)
                if cancel is None:
                    await sleep(pause)
                    continue
                try:
                    async with cancel.scope():
                        await sleep(pause)
                except Cancelled:
                    return ModelCall(
                        message=Message(role="assistant", status="cancelled"),
                        usage=None,
                        model_name=request.model_name,
                    )
        if last_error is not None and last_error.retryable:
            await callbacks.fire("on_retries_exceeded", execution, str(last_error))
    assert last_error is not None
    raise last_error
