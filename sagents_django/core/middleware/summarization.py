"""Summarization: compact a long history before it overflows the model's context.

Before every model call the history is counted (``tokens.count_tokens`` for the agent's
model, or the ``token_counter`` option). When it reaches ``max_tokens_before_summary``
the older messages are replaced by one system message, "Here is a summary of the
conversation so far: ...", written by the summary model; the last ``messages_to_keep``
messages stay as they are, and so does a leading system message. People still see the
whole conversation: the display history is kept apart (reference 002).

Why the cutoff moves: a provider rejects a tool result whose call is missing, and a
call whose result is missing, so the cut never falls inside a call/result pair. It
moves earlier until it does not (``find_safe_cutoff``); the kept part never starts
with a tool result that lost its call (the bug Sagents fixed in v0.12). When no safe
cut is left, nothing is summarized.

What survives: the todo list lives in ``state.todos``, not in the messages, and is not
touched. File paths named in the tool calls of the summarized part are listed in the
summary request and appended to the summary (and carried on by later summaries). A
summary that fails (the model errs, or answers nothing) keeps every message, logs a
warning, and the turn goes on.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from .. import events, tokens
from ..callbacks import Callbacks
from ..exceptions import ConfigurationError, LLMError
from ..llm import as_model, call_model
from ..messages import ContentPart, Message, ToolResult
from .base import Middleware, class_path

if TYPE_CHECKING:
    from ..agent import Agent
    from ..state import State

logger = logging.getLogger(__name__)

TokenCounter: TypeAlias = Callable[[list[Message]], "int | Awaitable[int]"]

DEFAULT_MAX_TOKENS_BEFORE_SUMMARY = 170_000
DEFAULT_MESSAGES_TO_KEEP = 6

SUMMARY_PREFIX = "Here is a summary of the conversation so far:"
FILES_PREFIX = "Files referenced earlier in the conversation:"
SUMMARY_METADATA_KEY = "summary"
"""Marks a summary message: ``{"messages": int, "paths": [str]}`` in its metadata."""
CONVERSATION_PLACEHOLDER = "{conversation}"

DEFAULT_SUMMARY_PROMPT = f"""\
You are compacting the history of a conversation between a user and an AI agent that \
uses tools. The messages below will be removed from the agent's context and replaced \
by what you write, so the agent must be able to carry on from your summary alone.

Keep:
- the user's goals, requests, constraints and preferences;
- decisions made and why, results obtained, and questions still open;
- the tools that were used and what they returned, so finished work is not repeated;
- every file path, identifier, name, number and date that may matter later, exactly.

Leave out small talk and repetition. Reply with the summary only, no preamble.

Conversation to summarize:
{CONVERSATION_PLACEHOLDER}
"""

MAX_TOOL_TEXT = 2000
"""Characters of one tool call's arguments or one result kept in the transcript."""
EXACT_COUNT_FRACTION = 0.25
"""Below this share of the threshold by the approximation, no tokenizer is used at
all. The approximation reads dense text (base64, hex ids, random numbers) at about a
third of its real tokens and prose within 15%, so such a history cannot be at the
threshold yet."""

_PATH_KEYS = frozenset(
    (
        *("path", "paths", "file", "files", "filename", "file_name", "filepath"),
        *("source", "destination", "src", "dst", "directory", "dir", "folder"),
    )
)


# The safe cutoff ----------------------------------------------------------------------
def tool_spans(messages: Sequence[Message]) -> list[tuple[int, int]]:
    """``(call_index, result_index)`` for every tool message: the index of the
    assistant message whose calls it answers (by call id, else the nearest earlier
    assistant message with calls) and its own index."""
    owners: dict[str, int] = {}
    last_caller: int | None = None
    spans: list[tuple[int, int]] = []
    for index, message in enumerate(messages):
        if message.role == "assistant" and message.tool_calls:
            for call in message.tool_calls:
                owners[call.call_id] = index
            last_caller = index
        elif message.role == "tool":
            starts = {
                owners[r.tool_call_id]
                for r in message.tool_results
                if r.tool_call_id in owners
            }
            if not starts and last_caller is not None:
                starts = {last_caller}
            spans.extend((start, index) for start in sorted(starts))
    return spans


def is_safe_cutoff(messages: Sequence[Message], index: int) -> bool:
    """Whether summarizing ``messages[:index]`` and keeping ``messages[index:]``
    separates no tool call from its result and keeps no result without its call."""
    if index <= 0 or index >= len(messages):
        return True
    if messages[index].role == "tool":
        return False
    return not any(start < index <= end for start, end in tool_spans(messages))


def find_safe_cutoff(messages: Sequence[Message], messages_to_keep: int) -> int:
    """How many leading messages to summarize: ``len - messages_to_keep``, moved
    earlier until the cut is safe (``is_safe_cutoff``); 0 when no cut is safe."""
    target = len(messages) - max(0, messages_to_keep)
    if target <= 0:
        return 0
    # Cuts inside a span (start, end] are blocked: count open spans per cut.
    opened = [0] * (len(messages) + 2)
    for start, end in tool_spans(messages):
        opened[start + 1] += 1
        opened[end + 1] -= 1
    blocked = list(itertools.accumulate(opened))
    for cut in range(min(target, len(messages)), 0, -1):
        if cut == len(messages) or (not blocked[cut] and messages[cut].role != "tool"):
            return cut
    return 0


def is_summary_message(message: Message) -> bool:
    """Whether ``message`` is a summary this middleware wrote."""
    return message.role == "system" and isinstance(
        message.metadata.get(SUMMARY_METADATA_KEY), dict
    )


def partition(
    messages: Sequence[Message], messages_to_keep: int
) -> tuple[list[Message], list[Message], list[Message]]:
    """``(head, old, kept)``: leading system messages that are not summaries (kept
    first), the part to summarize, and the part kept as it is. ``old`` is empty when
    there is nothing new to summarize (no safe cut, or only an earlier summary)."""
    split = 0
    while split < len(messages) and (
        messages[split].role == "system" and not is_summary_message(messages[split])
    ):
        split += 1
    head, rest = list(messages[:split]), list(messages[split:])
    cutoff = find_safe_cutoff(rest, messages_to_keep)
    old, kept = rest[:cutoff], rest[cutoff:]
    if all(is_summary_message(m) for m in old):
        return list(messages), [], []
    return head, old, kept


# The summary --------------------------------------------------------------------------
def referenced_paths(messages: Sequence[Message]) -> list[str]:
    """File paths named in the messages' tool call arguments (keys such as ``path``,
    ``file_path``, ``source``), and those earlier summaries carried, in order."""
    paths: dict[str, None] = {}
    for message in messages:
        if is_summary_message(message):
            for path in message.metadata[SUMMARY_METADATA_KEY].get("paths") or ():
                _add_path(paths, path)
        for call in message.tool_calls:
            _collect_paths(call.arguments, paths, depth=0)
    return list(paths)


def _collect_paths(value: Any, paths: dict[str, None], *, depth: int) -> None:
    if depth > 4:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            name = str(key).lower()
            if name in _PATH_KEYS or name.endswith(("_path", "_paths", "_file")):
                for path in item if isinstance(item, list) else [item]:
                    _add_path(paths, path)
            elif isinstance(item, dict | list):
                _collect_paths(item, paths, depth=depth + 1)
    elif isinstance(value, list):
        for item in value:
            _collect_paths(item, paths, depth=depth + 1)


def _add_path(paths: dict[str, None], path: Any) -> None:
    if isinstance(path, str) and path.strip() and len(path) < 500 and "\n" not in path:
        paths[path.strip()] = None


def render_transcript(messages: Sequence[Message]) -> str:
    """The messages as plain text for the summary model, one block per message.
    Tool arguments and results are clipped to ``MAX_TOOL_TEXT`` characters."""
    blocks: list[str] = []
    for message in messages:
        if message.role == "tool":
            blocks.extend(_render_result(r) for r in message.tool_results)
            continue
        text = _render_parts(message.content)
        if text:
            blocks.append(f"{message.role.capitalize()}: {text}")
        blocks.extend(
            f"Assistant called {c.name}({_clip(c.arguments_json())})"
            for c in message.tool_calls
        )
    return "\n\n".join(blocks)


def _render_result(result: ToolResult) -> str:
    label = "Tool error" if result.is_error else "Tool result"
    content = result.content
    text = content if isinstance(content, str) else _render_parts(content)
    return f"{label} ({result.name}): {_clip(text)}"


def _render_parts(parts: Sequence[ContentPart]) -> str:
    pieces: list[str] = []
    for part in parts:
        if part.type == "text":
            pieces.append(part.content)
        elif part.type == "image":
            pieces.append("[image]")
        elif part.type == "file":
            name = part.options.get("filename")
            pieces.append(f"[file: {name}]" if name else "[file]")
        # Thinking is the model's scratchpad, not part of the conversation.
    return "\n".join(p for p in pieces if p)


def _clip(text: str) -> str:
    if len(text) <= MAX_TOOL_TEXT:
        return text
    return f"{text[:MAX_TOOL_TEXT]}... [{len(text) - MAX_TOOL_TEXT} characters cut]"


def summary_request(
    messages: Sequence[Message], *, prompt: str = DEFAULT_SUMMARY_PROMPT
) -> list[dict[str, Any]]:
    """The OpenAI-format messages asking for a summary of ``messages``.

    A prompt containing ``{conversation}`` becomes one user message with the
    transcript in its place; any other prompt is the system message and the
    transcript the user message.
    """
    conversation = render_transcript(messages)
    paths = referenced_paths(messages)
    if paths:
        conversation += (
            "\n\nFiles referenced in these messages (keep every path in the "
            f"summary): {', '.join(paths)}"
        )
    if CONVERSATION_PLACEHOLDER in prompt:
        return [
            {
                "role": "user",
                "content": prompt.replace(CONVERSATION_PLACEHOLDER, conversation),
            }
        ]
    return [
        {"role": "system", "content": prompt},
        {"role": "user", "content": conversation},
    ]


def summary_message(summary: str, *, summarized: Sequence[Message]) -> Message:
    """The system message that replaces ``summarized``."""
    paths = referenced_paths(summarized)
    body = f"{SUMMARY_PREFIX}\n\n{summary.strip()}"
    if paths:
        body += f"\n\n{FILES_PREFIX} {', '.join(paths)}"
    count = sum(
        int(m.metadata[SUMMARY_METADATA_KEY].get("messages") or 0)
        if is_summary_message(m)
        else 1
        for m in summarized
    )
    return Message(
        role="system",
        content=[ContentPart.text(body)],
        metadata={SUMMARY_METADATA_KEY: {"messages": count, "paths": paths}},
    )


# The middleware -----------------------------------------------------------------------
class Summarization(Middleware):
    """Summarizes older messages when the history reaches a token threshold.

    Options (all keyword-only):

    - ``model``: the model that writes summaries (a litellm string, a dict of
      ``ChatModel`` fields or a model object). Default: the agent's model and its
      fallbacks.
    - ``max_tokens_before_summary``: summarize when the history holds at least this
      many tokens. Default 170,000.
    - ``messages_to_keep``: recent messages kept as they are; more are kept when the
      cut moves earlier to keep a tool call with its result. Default 6.
    - ``summary_prompt``: the instructions for the summary model; ``{conversation}``
      marks where the transcript goes. Default ``DEFAULT_SUMMARY_PROMPT``.
    - ``token_counter``: ``f(messages) -> int`` (may be async), replacing the default
      count (exact for OpenAI and Claude model names, approximate otherwise).
    """

    def __init__(
        self,
        *,
        model: Any = None,
        max_tokens_before_summary: int = DEFAULT_MAX_TOKENS_BEFORE_SUMMARY,
        messages_to_keep: int = DEFAULT_MESSAGES_TO_KEEP,
        summary_prompt: str = DEFAULT_SUMMARY_PROMPT,
        token_counter: TokenCounter | None = None,
    ) -> None:
        super().__init__(
            model=model,
            max_tokens_before_summary=max_tokens_before_summary,
            messages_to_keep=messages_to_keep,
            summary_prompt=summary_prompt,
            token_counter=token_counter,
        )
        if not _is_int(max_tokens_before_summary) or max_tokens_before_summary < 1:
            raise ConfigurationError(
                "max_tokens_before_summary must be a positive integer, not "
                f"{max_tokens_before_summary!r}"
            )
        if not _is_int(messages_to_keep) or messages_to_keep < 0:
            raise ConfigurationError(
                f"messages_to_keep must be an integer >= 0, not {messages_to_keep!r}"
            )
        if not isinstance(summary_prompt, str) or not summary_prompt.strip():
            raise ConfigurationError(
                f"summary_prompt must be a non-empty string, not {summary_prompt!r}"
            )
        if token_counter is not None and not callable(token_counter):
            raise ConfigurationError(
                f"token_counter must be callable, not {token_counter!r}"
            )
        try:
            self.model = as_model(model) if model is not None else None
        except TypeError as exc:
            raise ConfigurationError(f"Summarization model: {exc}") from exc
        self.max_tokens_before_summary = max_tokens_before_summary
        self.messages_to_keep = messages_to_keep
        self.summary_prompt = summary_prompt
        self.token_counter = token_counter
        self.agent_models: list[Any] = []
        self.model_name: str | None = self.model.name if self.model else None
        """Whose context is counted: the agent's model once attached."""
        self._approximate_cache = tokens.TokenCache()
        self._exact_cache = tokens.TokenCache()

    def attach(self, agent: Agent) -> None:
        self.agent_models = list(agent.models)
        self.model_name = agent.model.name

    @property
    def summary_models(self) -> list[Any]:
        if self.model is not None:
            return [self.model]
        if self.agent_models:
            return self.agent_models
        raise ConfigurationError(
            "Summarization has no model: pass model= or add it to an Agent"
        )

    async def before_model(self, state: State) -> State:
        messages = state.messages
        if len(messages) <= self.messages_to_keep:
            return state  # nothing could be summarized: skip counting
        total = await self.acount_tokens(messages)
        if total < self.max_tokens_before_summary:
            return state
        head, old, kept = partition(messages, self.messages_to_keep)
        if not old:
            logger.info(
                "Summarization: %d tokens but no safe cutoff; keeping all messages",
                total,
            )
            return state
        self._debug(
            "summarization_started",
            tokens=total,
            threshold=self.max_tokens_before_summary,
        )
        try:
            summary = await self.summarize(old)
        except Exception as exc:  # a failed summary must never end the turn
            logger.warning(
                "Summarization failed; keeping all %d messages: %s", len(messages), exc
            )
            self._debug("summarization_failed", error=str(exc))
            return state
        compacted = [*head, summary_message(summary, summarized=old), *kept]
        logger.info(
            "Summarization: %d messages became %d", len(messages), len(compacted)
        )
        self._debug(
            "summarization_completed", before=len(messages), after=len(compacted)
        )
        return state.set_messages(compacted)

    async def acount_tokens(self, messages: Sequence[Message]) -> int:
        """The history's size in tokens, as the threshold is checked against."""
        if self.token_counter is not None:
            result = self.token_counter(list(messages))
            if inspect.isawaitable(result):
                result = await result
            return int(result)
        approximate = self._approximate_cache.count(
            messages, tokens.approximate_message_tokens, key="approximate"
        )
        if approximate < self.max_tokens_before_summary * EXACT_COUNT_FRACTION or (
            not tokens.has_offline_tokenizer(self.model_name)
        ):
            return approximate
        # A tokenizer (and on first use, litellm's import) must not block the loop.
        return await asyncio.to_thread(
            tokens.count_tokens, messages, self.model_name, cache=self._exact_cache
        )

    async def summarize(self, messages: Sequence[Message]) -> str:
        """The summary model's text for ``messages``; raises when there is none."""
        call = await call_model(
            self.summary_models,
            summary_request(messages, prompt=self.summary_prompt),
            [],
            execution=None,
            # No handlers: the summary must not stream into the conversation's UI.
            callbacks=Callbacks(),
        )
        reply = call.message
        if reply.status not in ("complete", "length"):
            raise LLMError(f"The summary ended with status {reply.status!r}")
        text = reply.text.strip()
        if not text:
            raise LLMError("The summary model answered with no text")
        return text

    def debug_summary(self) -> dict[str, Any]:
        return {
            "max_tokens_before_summary": self.max_tokens_before_summary,
            "messages_to_keep": self.messages_to_keep,
            "model": self.model.name if self.model is not None else None,
            "counted_for": self.model_name,
            "custom_token_counter": self.token_counter is not None,
            "custom_prompt": self.summary_prompt != DEFAULT_SUMMARY_PROMPT,
        }

    def _debug(self, action: str, **data: Any) -> None:
        middleware = getattr(self, "id", None) or class_path(type(self))
        events.emit(
            "debug", {"event": action, "data": {"middleware": middleware, **data}}
        )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
