"""Transports: how a model request becomes a stream of deltas.

Two paths produce the same events (``MessageDelta``, ``TokenUsage``, ``ResponseInfo``)
and raise the same errors (``LLMError`` before the stream starts, ``StreamError`` after,
with the texts of ``provider_errors``). Both tell the stop reason last, in a delta of
its own, once the stream has ended well:

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
import logging
import os
import sys
import threading
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .exceptions import LLMError, StreamError
from .messages import MessageDelta, StopReason, TokenUsage, ToolCallDelta
from .provider_errors import (
    MID_STREAM_ERROR,
    NO_FINISH_REASON,
    connection_error,
    litellm_error,
    malformed_chunk,
    status_error,
)

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    import httpx

    from .llm import ChatModel, ModelRequest

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
        # Its "Give Feedback / Get Help" banner goes to stdout on every failed call:
        # a library must not print; our errors say what failed.
        litellm.suppress_debug_info = True
        _demo_registered = True
    return litellm


_warming: threading.Thread | None = None


def warm_litellm() -> threading.Thread | None:
    """Import litellm on a daemon thread, once per process: the first turn of a
    freshly started server or worker then does not wait seconds for the import
    (called by the chat page and a Celery worker as they start serving). The
    importing thread; None when this process already has (or is importing) it."""
    global _warming
    with _litellm_lock:
        if _demo_registered or _warming is not None:
            return None
        _warming = threading.Thread(
            target=_warm, name="sagents-litellm-warm-up", daemon=True
        )
    _warming.start()
    return _warming


def _warm() -> None:
    try:
        import_litellm()
    except Exception:
        # The turn that needs litellm imports it again and says what failed.
        logger.warning(
            "Importing litellm ahead of the first turn failed", exc_info=True
        )


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
            raise litellm_error(exc, started=False) from exc
        headers = (getattr(response, "_hidden_params", None) or {}).get(
            "additional_headers"
        ) or {}
        if headers:
            yield ResponseInfo(
                headers={str(k).lower(): str(v) for k, v in headers.items()}
            )
        finish: StopReason | None = None
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
                if choice.finish_reason:
                    finish = stop_reason(choice.finish_reason)
                content = (delta.content or "") if delta is not None else ""
                thinking = (
                    (getattr(delta, "reasoning_content", None) or "")
                    if delta is not None
                    else ""
                )
                if content or thinking or tool_calls:
                    yield MessageDelta(
                        content=content, thinking=thinking, tool_calls=tool_calls
                    )
        except LLMError:
            raise
        except Exception as exc:
            raise litellm_error(exc, started=True) from exc
        finally:
            # Release the HTTP connection now when the caller stops early (cancel).
            close = getattr(response, "aclose", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()
        # litellm makes up finish_reason="stop" for a stream that just ended; only its
        # wrapper knows whether the provider really sent one. The stop reason is told
        # only now, so nobody hears "complete" from a stream that then fails.
        if finish is None or getattr(response, "received_finish_reason", "") is None:
            raise StreamError(NO_FINISH_REASON)
        yield MessageDelta(status=finish)


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
        reader = _SSEReader()
        try:
            async with client.stream(
                "POST", f"{api_base}/chat/completions", json=body, headers=headers
            ) as response:
                if response.status_code >= 400:
                    text = (await response.aread()).decode("utf-8", "replace")
                    raise _http_error(response.status_code, text, response.headers)
                reader.started = True
                yield ResponseInfo(headers=dict(response.headers))
                async for event in reader.read(response):
                    yield event
        except LLMError:
            raise
        except httpx.HTTPError as exc:
            if reader.finish is None:
                raise connection_error(exc, started=reader.started) from exc
            # The connection was lost after the finish reason: nothing of the reply
            # is missing (litellm's wrapper decides the same).
        if reader.finish is None:
            raise StreamError(NO_FINISH_REASON)
        yield MessageDelta(status=reader.finish)


class _SSEReader:
    """Reads one SSE response into events; remembers the finish reason it saw."""

    __slots__ = ("finish", "started")

    def __init__(self) -> None:
        self.started = False
        self.finish: StopReason | None = None

    async def read(self, response: httpx.Response) -> AsyncIterator[Any]:
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
                raise StreamError(malformed_chunk(payload)) from None
            if not isinstance(chunk, dict):
                raise StreamError(malformed_chunk(payload))
            if "error" in chunk:
                error = chunk["error"]
                message = (
                    error.get("message") if isinstance(error, dict) else str(error)
                )
                raise StreamError(f"{MID_STREAM_ERROR}: {message}")
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
                self.finish = stop_reason(finish)
            if content or thinking or tool_calls:
                yield MessageDelta(
                    content=content, thinking=thinking, tool_calls=tool_calls
                )


def _http_error(status: int, body: str, headers: Any) -> LLMError:
    try:
        detail = json.loads(body).get("error", {})
        message = detail.get("message") if isinstance(detail, dict) else str(detail)
    except (ValueError, AttributeError):
        message = body[:500]
    return status_error(status, message, headers)


def describe(exc: BaseException) -> str:
    """``Type: text`` of an exception, for logs."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
