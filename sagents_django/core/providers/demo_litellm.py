"""The litellm adapter of the offline demo model: ``sagents/demo`` as a custom provider.

Why apart from ``demo``: the decision (``plan_reply``) is pure and tested without
litellm; this module is only the glue that turns a decision into what litellm expects.
A ``litellm.CustomLLM`` handler answers with a ``ModelResponse``, or streams the reply as
``GenericStreamingChunk`` dicts (words, then tool-call argument pieces, then a final
chunk with the usage), paced by ``SAGENTS_DEMO_DELAY_MS`` so the UI shows streaming.

Import time is inert: litellm is imported by ``register_demo_provider``, and the handler
class is built after that import.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from .demo import DEMO_MODEL, DEMO_PROVIDER, DemoReply, _field, _text, plan_reply

__all__ = ["register_demo_provider"]

DELAY_ENV = "SAGENTS_DEMO_DELAY_MS"
DEFAULT_DELAY_MS = 15.0
# Tool-call arguments stream in pieces this long, like a real provider's deltas.
ARGUMENT_PIECE_CHARS = 24

# Free and able to call tools: cost tracking then reports 0 instead of an
# unknown-model error, and litellm's capability checks say yes.
MODEL_INFO = {
    "litellm_provider": DEMO_PROVIDER,
    "mode": "chat",
    "max_tokens": 8192,
    "max_input_tokens": 128000,
    "max_output_tokens": 8192,
    "input_cost_per_token": 0.0,
    "output_cost_per_token": 0.0,
    "cache_creation_input_token_cost": 0.0,
    "cache_read_input_token_cost": 0.0,
    "supports_function_calling": True,
    "supports_parallel_function_calling": True,
    "supports_tool_choice": True,
}


# --- streaming ----------------------------------------------------------------------


def _delay_seconds() -> float:
    """Pause between chunks, read per call so tests and the UI can each choose."""
    try:
        milliseconds = float(os.environ.get(DELAY_ENV, DEFAULT_DELAY_MS))
    except ValueError:
        milliseconds = DEFAULT_DELAY_MS
    return max(milliseconds, 0.0) / 1000


def _usage(messages: Sequence[Any], reply: DemoReply) -> dict[str, int]:
    """A rough token count (words), so usage tracking has numbers to show."""
    prompt = sum(len(_text(_field(m, "content")).split()) for m in messages)
    completion = len(reply.text.split()) + sum(
        len(c.arguments_json().split()) for c in reply.tool_calls
    )
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _chunks(reply: DemoReply, usage: dict[str, int]) -> Iterator[dict[str, Any]]:
    """The reply as litellm GenericStreamingChunk dicts: words, then tool calls."""
    for word in re.findall(r"\s*\S+\s*", reply.text):
        yield _chunk(text=word)
    for index, call in enumerate(reply.tool_calls):
        arguments = call.arguments_json()
        pieces = [
            arguments[i : i + ARGUMENT_PIECE_CHARS]
            for i in range(0, len(arguments), ARGUMENT_PIECE_CHARS)
        ]
        for n, piece in enumerate(pieces):
            # Like OpenAI: the first delta names the call, the rest only add arguments.
            yield _chunk(
                tool_use={
                    "id": call.id if n == 0 else None,
                    "type": "function",
                    "function": {
                        "name": call.name if n == 0 else None,
                        "arguments": piece,
                    },
                    "index": index,
                }
            )
    # litellm stops reading after the finished chunk, so it comes last, with the usage.
    yield _chunk(finish_reason=reply.finish_reason, usage=usage)


def _chunk(
    *,
    text: str = "",
    tool_use: dict[str, Any] | None = None,
    finish_reason: str | None = None,
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    return {
        "text": text,
        "tool_use": tool_use,
        "is_finished": finish_reason is not None,
        "finish_reason": finish_reason or "",
        "usage": usage,
        "index": 0,
    }


def _paced(chunks: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    delay = _delay_seconds()
    for n, chunk in enumerate(chunks):
        if n and delay:
            time.sleep(delay)
        yield chunk


async def _apaced(chunks: Iterator[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    delay = _delay_seconds()
    for n, chunk in enumerate(chunks):
        if n and delay:
            await asyncio.sleep(delay)
        yield chunk


def _request(kwargs: dict[str, Any]) -> tuple[list[Any], DemoReply]:
    messages = list(kwargs.get("messages") or ())
    tools = (kwargs.get("optional_params") or {}).get("tools")
    return messages, plan_reply(messages, tools)


# --- litellm registration ------------------------------------------------------------

_register_lock = threading.Lock()


def register_demo_provider() -> None:
    """Make ``sagents/demo`` callable through litellm. Idempotent and thread-safe."""
    # Set before litellm's first import: it would otherwise fetch a cost map and try
    # to reach the Hugging Face hub (no-ops when litellm is already imported).
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import litellm
    from litellm.utils import custom_llm_setup

    with _register_lock:
        # Checked on every call, not cached: a test may have reset the map.
        if not any(
            item.get("provider") == DEMO_PROVIDER
            for item in litellm.custom_provider_map
        ):
            litellm.custom_provider_map.append(
                {"provider": DEMO_PROVIDER, "custom_handler": _make_handler(litellm)}
            )
        custom_llm_setup()
        if DEMO_MODEL not in litellm.model_cost:
            litellm.register_model({DEMO_MODEL: MODEL_INFO})


def _make_handler(litellm: Any) -> Any:
    """A ``litellm.CustomLLM`` instance; the class is built here, after the import."""

    # Built on the module attribute (typed Any): litellm declares ``astreaming`` a
    # coroutine returning an iterator, but it calls an async generator, as here.
    class DemoLLM(litellm.CustomLLM):  # type: ignore[misc]  # subclasses Any, see above
        def completion(self, *args: Any, **kwargs: Any) -> Any:
            messages, reply = _request(kwargs)
            return _model_response(litellm, reply, _usage(messages, reply))

        async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
            return self.completion(*args, **kwargs)

        def streaming(self, *args: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
            messages, reply = _request(kwargs)
            yield from _paced(_chunks(reply, _usage(messages, reply)))

        async def astreaming(
            self, *args: Any, **kwargs: Any
        ) -> AsyncIterator[dict[str, Any]]:
            messages, reply = _request(kwargs)
            async for chunk in _apaced(_chunks(reply, _usage(messages, reply))):
                yield chunk

    return DemoLLM()


def _model_response(litellm: Any, reply: DemoReply, usage: dict[str, int]) -> Any:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [c.to_openai() for c in reply.tool_calls]
    return litellm.ModelResponse(
        # The full name, so litellm's cost lookup finds the zero-cost entry.
        model=DEMO_MODEL,
        choices=[
            {"index": 0, "message": message, "finish_reason": reply.finish_reason}
        ],
        usage=litellm.Usage(**usage),
    )
