"""What a failed model call says, the same whichever transport carried it.

Why a module of its own: the two transports meet the same faults through different
stacks (litellm over aiohttp and the openai SDK; httpx directly), and each stack names
them its own way ("litellm.InternalServerError: ... Connection error." is a connection
reset; "MidStreamFallbackError: ... Expecting property name" is a malformed chunk).
A person, a log reader and the retry logic should see one text per fault, so both
transports map what they caught to the sentences below, keeping the original
exception as ``__cause__`` (the chain logs it beside the attempt's failure).

Before the stream started a failure is an ``LLMError``; once it started, a
``StreamError``. Whether it is retried is decided here for a status code or a lost
connection, and by the chain for a stream (only while nothing reached a person).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from .exceptions import LLMError, StreamError

RETRYABLE_STATUS = frozenset((408, 409, 425, 429, 500, 502, 503, 504, 529))

NO_FINISH_REASON = "The model's stream ended without a finish reason"
MID_STREAM_ERROR = "The model reported an error mid-stream"
CONNECTION_FAILED = "The connection to the model failed before it answered"
STREAM_BROKE = "The model's stream broke: the connection was lost"
TIMED_OUT = "The model request timed out"

# "litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached":
# the provider's own words are after the last of these prefixes.
_LITELLM_PREFIX = re.compile(r"^(?:litellm\.\w+:\s*)?(?:\w+Error:\s*)?(?:\w+ - )?")


def malformed_chunk(payload: str) -> str:
    return f"The model sent a malformed chunk: {payload[:200]!r}"


def status_error(status: int, message: str | None, headers: Any = None) -> LLMError:
    """An HTTP error answer: ``The model returned HTTP 429: <provider's message>``."""
    retry_after = headers.get("retry-after") if headers else None
    return LLMError(
        f"The model returned HTTP {status}: {message or 'no detail'}",
        retryable=status in RETRYABLE_STATUS,
        status_code=status,
        retry_after=_seconds(retry_after),
    )


def connection_error(exc: BaseException, *, started: bool) -> LLMError:
    """A transport failure: lost mid-stream, or before any answer (retryable)."""
    if started:
        return StreamError(STREAM_BROKE)
    if _is_timeout(exc):
        return LLMError(TIMED_OUT, retryable=True)
    return LLMError(CONNECTION_FAILED, retryable=True)


def litellm_error(exc: BaseException, *, started: bool) -> LLMError:
    """Read what litellm raised (the whole exception chain) as one of our errors."""
    import httpx
    import openai

    chain = list(_chain(exc))
    for item in chain:
        if isinstance(item, json.JSONDecodeError):
            return StreamError(malformed_chunk(item.doc))
    for item in chain:
        # The SDK raises a bare APIError for an {"error": ...} event in the stream.
        if type(item) is openai.APIError:
            return StreamError(f"{MID_STREAM_ERROR}: {item.message}")
    # Before status codes: litellm reports a lost connection as an HTTP 500.
    lost = (openai.APIConnectionError, httpx.TransportError, OSError)
    if any(
        _is_timeout(item) or isinstance(item, lost) or _is_aiohttp_error(item)
        for item in chain
    ):
        return connection_error(exc, started=started)
    answers = [item for item in chain if isinstance(item, openai.APIStatusError)]
    # The SDK's own error (deepest) holds the provider's body; litellm's wraps it.
    answers.sort(key=lambda item: type(item).__module__.startswith("litellm"))
    # litellm keeps the provider's headers on its exception; its own ``response``
    # is often one it made up, without them.
    headers = getattr(exc, "litellm_response_headers", None)
    if answers:
        answer = answers[0]
        return status_error(
            answer.status_code,
            _openai_message(answer),
            headers or answer.response.headers,
        )
    # Providers litellm maps itself (Anthropic, Vertex...): its status and message.
    status = getattr(exc, "status_code", None)
    message = _LITELLM_PREFIX.sub("", getattr(exc, "message", None) or str(exc), 1)
    if isinstance(status, int) and status >= 400:
        response = getattr(exc, "response", None)
        return status_error(
            status, message, headers or getattr(response, "headers", None)
        )
    name = type(exc).__name__
    retryable = name in ("APIConnectionError", "Timeout", "ServiceUnavailableError")
    error_type = StreamError if started else LLMError
    return error_type(f"The model call failed: {message}", retryable=retryable)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what it wraps: litellm's ``original_exception``, causes, contexts."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo and len(seen) < 32:
        item = todo.pop(0)
        if id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        for inner in (
            getattr(item, "original_exception", None),
            item.__cause__,
            item.__context__,
        ):
            if isinstance(inner, BaseException):
                todo.append(inner)


def _openai_message(error: Any) -> str:
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else None
        if isinstance(message, str):
            return message
    text = str(getattr(error, "message", "") or error)
    return _LITELLM_PREFIX.sub("", text, 1)


def _is_timeout(exc: BaseException) -> bool:
    import httpx

    return isinstance(exc, TimeoutError | httpx.TimeoutException) or (
        type(exc).__name__ in ("APITimeoutError", "Timeout")
    )


def _is_aiohttp_error(exc: BaseException) -> bool:
    # litellm's default async transport; matched by module to avoid importing it.
    return type(exc).__module__.startswith("aiohttp")


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
