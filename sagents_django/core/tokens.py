"""Token counting: how much of a model's context a conversation fills.

Why two ways: an exact count needs the model's tokenizer. litellm bundles tiktoken's
encodings and Anthropic's tokenizer, so OpenAI and Claude model names are counted
exactly with no network; for any other name litellm would look for a tokenizer on a
model hub (a download, or ~23 s of retries offline), so those names get a fast
approximation instead (about four characters per token plus a per-message overhead).
litellm takes seconds to import, so it is imported on the first exact count only.

Counting runs before every model call, so results are cached per message object
(messages are treated as immutable): a ``TokenCache`` passed to ``count_tokens``
counts only the messages it has not seen in the previous call.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .messages import ContentPart, Message
from .openai_format import messages_from_openai
from .prefix import extends

logger = logging.getLogger(__name__)

MESSAGE_OVERHEAD = 4
"""Tokens of a message's framing (role, separators) in the approximation."""
TOOL_ITEM_OVERHEAD = 10
"""Tokens of one tool call's or tool result's framing in the approximation."""
MEDIA_PART_TOKENS = 1000
"""A flat estimate for one image or file part (both ways of counting)."""
REPLY_PRIMING = 3
"""Tokens OpenAI adds to every request to prime the reply; counted once."""

# Bare model names (provider prefix removed) whose tokenizer litellm bundles.
_OPENAI_NAME = re.compile(
    r"^(ft:)?(gpt-|gpt4|chatgpt-|o[1-9](-|$)|text-embedding-|davinci|babbage)"
)
# litellm's own tokenizer choice; only these kinds are bundled with it.
_BUNDLED_KINDS = frozenset((None, "anthropic"))

MessageLike = Message | dict[str, Any]


# Approximation ------------------------------------------------------------------------
def approximate_text_tokens(text: str) -> int:
    """About four characters per token; non-ASCII text (accents, CJK, emoji) counts
    a token per three UTF-8 bytes, which errs on the high side."""
    if not text:
        return 0
    if text.isascii():
        return (len(text) + 3) // 4
    return (len(text.encode("utf-8")) + 2) // 3


def approximate_message_tokens(message: Message) -> int:
    """The approximate tokens of one message, framing included."""
    tokens = MESSAGE_OVERHEAD + _approximate_parts(message.content)
    if message.name:
        tokens += approximate_text_tokens(message.name)
    for call in message.tool_calls:
        tokens += (
            TOOL_ITEM_OVERHEAD
            + approximate_text_tokens(call.name)
            + approximate_text_tokens(call.arguments_json())
        )
    for result in message.tool_results:
        content = result.content
        tokens += TOOL_ITEM_OVERHEAD + (
            approximate_text_tokens(content)
            if isinstance(content, str)
            else _approximate_parts(content)
        )
    return tokens


def approximate_tokens(messages: Iterable[MessageLike]) -> int:
    """The approximate tokens of a conversation: fast, no tokenizer, no import."""
    return sum(approximate_message_tokens(m) for m in _as_messages(messages))


def _approximate_parts(parts: Sequence[ContentPart]) -> int:
    tokens = 0
    for part in parts:
        if part.type in ("text", "thinking"):
            tokens += approximate_text_tokens(part.content)
        else:
            tokens += MEDIA_PART_TOKENS
    return tokens


# Exact counting -----------------------------------------------------------------------
def has_offline_tokenizer(model_name: str | None) -> bool:
    """Whether ``model_name`` (any litellm model string) is an OpenAI or Claude model,
    whose tokenizer ships with litellm. Decided from the name alone (no import)."""
    if not model_name:
        return False
    bare = _bare_name(model_name).lower()
    return "claude" in bare or bool(_OPENAI_NAME.match(bare))


def count_message_tokens(message: Message, model_name: str | None) -> int:
    """The tokens of one message for ``model_name``: exact when the tokenizer is
    available offline and litellm imports, approximate otherwise."""
    counter = _exact_counter(model_name)
    if counter is None:
        return approximate_message_tokens(message)
    return counter(message)


def count_tokens(
    messages: Iterable[MessageLike],
    model_name: str | None = None,
    *,
    cache: TokenCache | None = None,
) -> int:
    """The tokens ``messages`` fill in ``model_name``'s context (the system prompt and
    tool definitions, which the agent adds, are not included).

    Exact for OpenAI and Claude model names (litellm's ``token_counter``, offline),
    approximate for any other name or when litellm cannot be imported. With a
    ``cache``, only messages not seen in the cache's previous call are counted.
    """
    items = _as_messages(messages)
    if not items:
        return 0
    counter = _exact_counter(model_name)
    if counter is None:
        per_message: Callable[[Message], int] = approximate_message_tokens
        key = "approximate"
        priming = 0
    else:
        per_message = counter
        key = f"exact:{model_name}"
        priming = REPLY_PRIMING
    if cache is None:
        return priming + sum(per_message(m) for m in items)
    return priming + cache.count(items, per_message, key=key)


class TokenCache:
    """Per-message counts from the last call.

    A history that still starts with the last call's (``core.prefix``) costs only its
    new messages; one rewritten (a summary) reads the counts the messages it kept
    remember (``Message._tokens``). Each call keeps only the messages it was given, so the cache never
    holds more than one conversation. Safe to share between tasks: a lost update only
    costs a recount.
    """

    __slots__ = ("_key", "_seen", "_total")

    def __init__(self) -> None:
        self._key: str | None = None
        self._seen: list[Message] = []
        self._total = 0

    def count(
        self,
        messages: Sequence[Message],
        per_message: Callable[[Message], int],
        *,
        key: str = "",
    ) -> int:
        """The sum of ``per_message`` over ``messages``, reusing remembered counts
        when ``key`` (which names the counting method) is the previous call's."""
        seen = self._seen if key == self._key else []

        def counted(message: Message) -> int:
            # A message remembers its count (a history kept in memory between
            # turns, each with a fresh agent, is counted once).
            hit = message._tokens
            if hit is not None and hit[0] == key:
                return hit[1]
            tokens = per_message(message)
            message._tokens = (key, tokens)
            return tokens

        if extends(seen, messages):
            start = len(seen)
            total = (self._total if seen else 0) + sum(map(counted, messages[start:]))
        else:  # rewritten (a summary): the messages it kept know their counts
            total = sum(map(counted, messages))
        self._key, self._seen, self._total = key, list(messages), total
        return total

    def __len__(self) -> int:
        return len(self._seen)


# litellm ------------------------------------------------------------------------------
_litellm_module: Any = None
_litellm_failed = False
_litellm_lock = threading.Lock()


def _litellm() -> Any:
    """litellm, imported offline-safe once; None when it cannot be imported."""
    global _litellm_module, _litellm_failed
    if _litellm_module is not None or _litellm_failed:
        return _litellm_module
    with _litellm_lock:
        if _litellm_module is None and not _litellm_failed:
            try:
                from .transports import import_litellm

                _litellm_module = import_litellm()
            except Exception:
                _litellm_failed = True
                logger.warning(
                    "litellm could not be imported; token counts are approximate",
                    exc_info=True,
                )
    return _litellm_module


def _exact_counter(model_name: str | None) -> Callable[[Message], int] | None:
    if not has_offline_tokenizer(model_name):
        return None
    litellm = _litellm()
    if litellm is None:
        return None
    bare = _bare_name(str(model_name))
    kind_of = getattr(litellm.utils, "huggingface_tokenizer_kind", None)
    # Trust the name check only if litellm agrees that its tokenizer is bundled.
    if kind_of is not None and kind_of(bare) not in _BUNDLED_KINDS:
        return None

    def count(message: Message) -> int:
        items, media = _countable_openai(message)
        try:
            tokens = litellm.token_counter(
                model=bare, messages=items, count_response_tokens=True
            )
        except Exception:
            logger.debug("token_counter failed for %r", bare, exc_info=True)
            return approximate_message_tokens(message)
        return int(tokens) + media * MEDIA_PART_TOKENS

    return count


def _countable_openai(message: Message) -> tuple[list[dict[str, Any]], int]:
    """The message in OpenAI format with text-only content, and how many media parts
    were left out. litellm would size images itself, fetching URLs over the network."""
    items: list[dict[str, Any]] = []
    media = 0
    for item in message.to_openai():
        content = item.get("content")
        if isinstance(content, list):
            texts = [p.get("text", "") for p in content if p.get("type") == "text"]
            media += len(content) - len(texts)
            item = {**item, "content": "\n".join(texts)}
        item.pop("thinking_blocks", None)
        items.append(item)
    return items, media


def _bare_name(model_name: str) -> str:
    """``"openrouter/anthropic/claude-x"`` -> ``"claude-x"``."""
    return model_name.rsplit("/", 1)[-1]


def _as_messages(messages: Iterable[MessageLike]) -> list[Message]:
    out: list[Message] = []
    for item in messages:
        if isinstance(item, Message):
            out.append(item)
        elif isinstance(item, dict):
            out.extend(messages_from_openai([item]))
        else:
            raise TypeError(f"Cannot count tokens of {item!r}")
    return out
