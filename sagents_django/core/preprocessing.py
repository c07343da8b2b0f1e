"""MessagePreprocessor: one user message, two versions (for people and for the model).

When a person sends a message, the transcript and the model may need different
versions of it: ``@ProjectBrief`` shows as a chip in the transcript (the display
message) while the model gets the brief's full text (the LLM message). A
preprocessor makes both. It runs only for messages a person submits (the runtime's
``add_message``), never for messages made during a turn (model replies, tool results).
Without one, the message goes unchanged to both.

A preprocessor is any object with ``preprocess(message, context)`` returning
``(display_message, llm_message)``, plain or ``async def``; to refuse a message it
raises, and the message is then neither stored nor sent. Both versions are ordinary
``Message`` objects: what goes inside (HTML for the transcript, XML-tagged context
for the model) is the implementation's choice.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from .messages import ContentPart, Message

__all__ = [
    "MentionExpander",
    "MessagePreprocessor",
    "PreprocessContext",
    "apreprocess",
    "preprocess",
]


@dataclass(kw_only=True, slots=True)
class PreprocessContext:
    """What a preprocessor knows about the conversation the message is for."""

    agent_id: str | None = None
    """The agent the message is sent to."""
    conversation_id: str | None = None
    """The conversation, when there is one."""
    tool_context: dict[str, Any] = field(default_factory=dict)
    """The caller-supplied context of the agent (a user id, a tenant...)."""


@runtime_checkable
class MessagePreprocessor(Protocol):
    """Turns a submitted user message into a display message and an LLM message."""

    def preprocess(
        self, message: Message, context: PreprocessContext
    ) -> tuple[Message, Message]: ...


def preprocess(
    preprocessor: MessagePreprocessor | None,
    message: str | Message,
    *,
    context: PreprocessContext | None = None,
) -> tuple[Message, Message]:
    """``(display_message, llm_message)`` for a text or a message.

    With no preprocessor both are the message itself. An ``async`` preprocessor needs
    ``apreprocess``.
    """
    message = _as_message(message)
    if preprocessor is None:
        return message, message
    result = preprocessor.preprocess(message, context or PreprocessContext())
    if inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()
        raise TypeError(
            f"{type(preprocessor).__name__}.preprocess is async; use apreprocess()"
        )
    return _checked(preprocessor, result)


async def apreprocess(
    preprocessor: MessagePreprocessor | None,
    message: str | Message,
    *,
    context: PreprocessContext | None = None,
) -> tuple[Message, Message]:
    """``preprocess`` for async callers; the preprocessor may be sync or async."""
    message = _as_message(message)
    if preprocessor is None:
        return message, message
    result = preprocessor.preprocess(message, context or PreprocessContext())
    if inspect.isawaitable(result):
        result = await result
    return _checked(preprocessor, result)


def _as_message(message: str | Message) -> Message:
    if isinstance(message, str):
        return Message.user(message)
    if not isinstance(message, Message):
        raise TypeError(f"Expected a text or a Message, got {message!r}")
    return message


def _checked(preprocessor: Any, result: object) -> tuple[Message, Message]:
    if isinstance(result, tuple) and len(result) == 2:
        display, llm = result
        if isinstance(display, Message) and isinstance(llm, Message):
            return display, llm
    raise TypeError(
        f"{type(preprocessor).__name__}.preprocess must return "
        f"(display_message, llm_message), not {result!r}"
    )


class MentionExpander:
    """Expands ``@name`` mentions for the model; the transcript keeps the short form.

    ``mentions`` maps a name to its text, or to a function ``(name, context)`` that
    returns the text (None when it does not know the name), e.g. a database lookup.
    The LLM message gets one ``<mention name="...">`` block per mentioned name, after
    the person's own words; the display message lists the names it recognised under
    ``metadata["mentions"]`` so the transcript can render them as links. Unknown
    names are left as typed. A message without known mentions is returned as is.
    """

    PATTERN = re.compile(r"(?<![\w@])@(\w(?:[\w.-]*\w)?)")

    def __init__(
        self,
        mentions: Mapping[str, str] | Callable[[str, PreprocessContext], str | None],
    ) -> None:
        self.mentions = mentions

    def resolve(self, name: str, context: PreprocessContext) -> str | None:
        if callable(self.mentions):
            return self.mentions(name, context)
        return self.mentions.get(name)

    def preprocess(
        self, message: Message, context: PreprocessContext
    ) -> tuple[Message, Message]:
        found: dict[str, str] = {}
        for name in self.PATTERN.findall(message.text):
            if name not in found:
                text = self.resolve(name, context)
                if text is not None:
                    found[name] = text
        if not found:
            return message, message
        display = replace(
            message,
            content=list(message.content),
            metadata={**message.metadata, "mentions": list(found)},
        )
        blocks = "\n\n".join(
            f'<mention name="{name}">\n{text}\n</mention>'
            for name, text in found.items()
        )
        if all(p.type == "text" for p in message.content):
            # Plain text stays one part: providers then get a plain string.
            content = [ContentPart.text(f"{message.text}\n\n{blocks}")]
        else:
            content = [*message.content, ContentPart.text(f"\n\n{blocks}")]
        llm = replace(message, content=content, metadata=dict(message.metadata))
        return display, llm
