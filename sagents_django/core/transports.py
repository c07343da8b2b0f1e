"""Transports: how a model request becomes a stream of deltas.

Two paths produce the same events (``MessageDelta``, ``TokenUsage``, ``ResponseInfo``)
and raise the same errors (``LLMError`` before the stream starts, ``StreamError`` after):

- ``LiteLLMTransport``: ``litellm.acompletion(stream=True)``, for every provider litellm
  knows (and the offline demo model).
- ``OpenAITransport``: a lean httpx + SSE reader for OpenAI-compatible endpoints.
  litellm's stream wrapper costs about 1 ms per chunk, which at ~50 chunks/s per stream
  saturates a core near 20 concurrent streams; reading the SSE directly costs a tenth of
  that, and it sees what litellm hides (an in-band ``{"error": ...}`` chunk, a missing
  finish reason). ``ChatModel(transport="auto")`` picks it for ``openai/...`` models
  with an ``api_base``; litellm stays in charge of everything else.

litellm is imported lazily: importing it takes seconds and reaches for the network
unless ``LITELLM_LOCAL_MODEL_COST_MAP`` is set, which ``import_litellm`` ensures.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import threading
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .exceptions import LLMError, StreamError
from .messages import MessageDelta, StopReason, TokenUsage, ToolCallDelta

if TYPE_CHECKING:
    import httpx

    from .llm import ChatModel, ModelRequest

RETRYABLE_STATUS = frozenset((408, 409, 425, 429, 500, 502, 503, 504, 529))

FINISH_REASONS: dict[str, StopReason] = {
    "stop": "complete",
    "end_turn": "complete",
    "tool_calls": "complete",
    "function_call": "complete",
    "tool_use": "complete",
    "length": "length",
    "max_tokens": "length",
    "content_filter": "content_filtered",
}


@dataclass(kw_only=True, slots=True)
class ResponseInfo:
    """The provider's response headers, reported once per call."""

    headers: dict[str, str] = field(default_factory=dict)

    @property
    def ratelimit(self) -> dict[str, str]:
        return {
            k: v
            for k, v in self.headers.items()
            if k.startswith(("x-ratelimit-", "ratelimit-", "retry-after"))
        }


_litellm_lock = threading.Lock()
_demo_registered = False


def import_litellm() -> Any:
    """Import litellm offline-safe, with the demo provider registered."""
    global _demo_registered
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with _litellm_lock:
        import litellm

        from .providers.demo import register_demo_provider

        register_demo_provider()
        _demo_registered = True
    return litellm


def stop_reason(finish_reason: str | None) -> StopReason:
    return FINISH_REASONS.get(finish_reason or "", "complete")


class LiteLLMTransport:
    """Streams through ``litellm.acompletion``."""

    async def stream(
        self, model: ChatModel, request: ModelRequest
    ) -> AsyncIterator[Any]:
        # The first import takes seconds: never block the loop (and the other
        # conversations it serves) for it.
        litellm = (
            sys.modules["litellm"]
            if _demo_registered
            else await asyncio.to_thread(import_litellm)
        )
        kwargs: dict[str, Any] = {
            "model": request.model_name,
            "messages": request.messages,
            "stream": True,
            "stream_options": {"include_usage": True},
            "timeout": model.request_timeout,
            # Retries live in one layer, the chain: litellm and the SDKs under it
            # must not retry on their own.
            "num_retries": 0,
            "max_retries": 0,
            **request.params,
        }
        if request.tools:
            kwargs["tools"] = request.tools
        try:
            response = await litellm.acompletion(**kwargs)
        except Exception as exc:
            raise _litellm_error(exc) from exc
        headers = (getattr(response, "_hidden_params", None) or {}).get(
            "additional_headers"
        ) or {}
        if headers:
            yield ResponseInfo(
                headers={str(k).lower(): str(v) for k, v in headers.items()}
            )
        finished = False
        try:
            async for chunk in response:
                usage = getattr(chunk, "usage", None)
                if usage:
                    yield TokenUsage.from_openai(usage)
                if not chunk.choices:
                    continue
                choice = chunk.choices[0]
                delta = choice.delta
                tool_calls = None
                if delta is not None and delta.tool_calls:
                    tool_calls = [
                        ToolCallDelta(
                            index=c.index or 0,
                            call_id=c.id,
                            name=c.function.name if c.function else None,
                            arguments=(c.function.arguments or "")
                            if c.function
                            else "",
                        )
                        for c in delta.tool_calls
                    ]
                status = None
                if choice.finish_reason:
                    finished = True
                    status = stop_reason(choice.finish_reason)
                content = (delta.content or "") if delta is not None else ""
                thinking = (
                    (getattr(delta, "reasoning_content", None) or "")
                    if delta is not None
                    else ""
                )
                if content or thinking or tool_calls or status:
                    yield MessageDelta(
                        content=content,
                        thinking=thinking,
                        tool_calls=tool_calls,
                        status=status,
                    )
        except LLMError:
            raise
        except Exception as exc:
            raise StreamError(f"The model's stream broke: {_describe(exc)}") from exc
        finally:
            # Release the HTTP connection now when the caller stops early (cancel).
            close = getattr(response, "aclose", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()
        # litellm makes up finish_reason="stop" for a stream that just ended; only its
        # wrapper knows whether the provider really sent one.
        if not finished or getattr(response, "received_finish_reason", "") is None:
            raise StreamError("The model's stream ended without a finish reason")


class OpenAITransport:
    """Streams an OpenAI-compatible ``/chat/completions`` endpoint over httpx."""

    _clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient]

    def __init__(self) -> None:
        self._clients = weakref.WeakKeyDictionary()

    def _client(self) -> httpx.AsyncClient:
        import httpx

        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None or client.is_closed:
            client = httpx.AsyncClient(
                timeout=httpx.Timeout(None, connect=30.0),
                limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
            )
            self._clients[loop] = client
        return client

    async def stream(
        self, model: ChatModel, request: ModelRequest
    ) -> AsyncIterator[Any]:
        import httpx

        params = dict(request.params)
        api_base = str(
            params.pop("api_base", None) or params.pop("base_url", "")
        ).rstrip("/")
        api_key = params.pop("api_key", None) or os.environ.get("OPENAI_API_KEY", "")
        extra_headers = params.pop("extra_headers", None) or {}
        for litellm_only in ("num_retries", "max_retries", "custom_llm_provider"):
            params.pop(litellm_only, None)
        name = (
            request.model_name.split("/", 1)[1]
            if "/" in request.model_name
            else request.model_name
        )
        body: dict[str, Any] = {
            "model": name,
            "messages": request.messages,
            "stream": True,
            "stream_options": {"include_usage": True},
            **params,
        }
        if request.tools:
            body["tools"] = request.tools
        headers = {"Authorization": f"Bearer {api_key}", **extra_headers}
        client = self._client()
        try:
            async with client.stream(
                "POST", f"{api_base}/chat/completions", json=body, headers=headers
            ) as response:
                if response.status_code >= 400:
                    text = (await response.aread()).decode("utf-8", "replace")
                    raise _http_error(response.status_code, text, response.headers)
                yield ResponseInfo(headers=dict(response.headers))
                async for event in _read_sse(response):
                    yield event
        except LLMError:
            raise
        except httpx.TimeoutException as exc:
            raise LLMError(
                f"The model request timed out: {_describe(exc)}", retryable=True
            ) from exc
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise LLMError(
                f"Could not connect to the model: {_describe(exc)}", retryable=True
            ) from exc
        except httpx.HTTPError as exc:
            raise StreamError(f"The model's stream broke: {_describe(exc)}") from exc


async def _read_sse(response: httpx.Response) -> AsyncIterator[Any]:
    finished = False
    loads = json.loads
    async for line in response.aiter_lines():
        if not line.startswith("data:"):
            continue  # blank separators, comments and event: lines
        payload = line[5:].strip()
        if payload == "[DONE]":
            break
        try:
            chunk = loads(payload)
        except ValueError:
            raise StreamError(
                f"The model sent a malformed chunk: {payload[:200]!r}"
            ) from None
        if not isinstance(chunk, dict):
            raise StreamError(f"The model sent a malformed chunk: {payload[:200]!r}")
        if "error" in chunk:
            error = chunk["error"]
            message = error.get("message") if isinstance(error, dict) else str(error)
            raise StreamError(f"The model reported an error mid-stream: {message}")
        usage = chunk.get("usage")
        if usage:
            yield TokenUsage.from_openai(usage)
        choices = chunk.get("choices")
        if not choices:
            continue
        choice = choices[0]
        delta = choice.get("delta") or {}
        finish = choice.get("finish_reason")
        raw_calls = delta.get("tool_calls")
        tool_calls = None
        if raw_calls:
            tool_calls = []
            for call in raw_calls:
                function = call.get("function") or {}
                tool_calls.append(
                    ToolCallDelta(
                        index=call.get("index") or 0,
                        call_id=call.get("id"),
                        name=function.get("name"),
                        arguments=function.get("arguments") or "",
                    )
                )
        content = delta.get("content") or ""
        thinking = delta.get("reasoning_content") or delta.get("reasoning") or ""
        if finish:
            finished = True
        if content or thinking or tool_calls or finish:
            yield MessageDelta(
                content=content,
                thinking=thinking,
                tool_calls=tool_calls,
                status=stop_reason(finish) if finish else None,
            )
    if not finished:
        raise StreamError("The model's stream ended without a finish reason")


def _http_error(status: int, body: str, headers: Any) -> LLMError:
    try:
        detail = json.loads(body).get("error", {})
        message = detail.get("message") if isinstance(detail, dict) else str(detail)
    except (ValueError, AttributeError):
        message = body[:500]
    retry_after = headers.get("retry-after") if headers is not None else None
    return LLMError(
        f"The model returned HTTP {status}: {message or 'no detail'}",
        retryable=status in RETRYABLE_STATUS,
        status_code=status,
        retry_after=_seconds(retry_after),
    )


def _litellm_error(exc: Exception) -> LLMError:
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    retryable = (status in RETRYABLE_STATUS) or name in (
        "APIConnectionError",
        "Timeout",
        "RateLimitError",
        "ServiceUnavailableError",
        "InternalServerError",
    )
    message = getattr(exc, "message", None) or str(exc)
    where = f"HTTP {status}, {name}" if status else name
    # litellm keeps the provider's headers on the exception; its ``response`` is
    # often one it made up, without them.
    headers = getattr(exc, "litellm_response_headers", None) or getattr(
        getattr(exc, "response", None), "headers", None
    )
    return LLMError(
        f"The model call failed ({where}): {message}",
        retryable=retryable,
        status_code=status,
        retry_after=_seconds(headers.get("retry-after") if headers else None),
    )


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
