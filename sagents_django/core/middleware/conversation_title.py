"""ConversationTitle: name a conversation after its opening request, in parallel.

Why two hooks: Sagents starts the title call in ``before_model`` so that it runs while
the main model answers (and its tools run), and the title shows early. Here the turn
is one coroutine rather than a resident process, so ``before_model`` starts an asyncio
task and ``after_model``, which runs once the main call is done, waits for it (up to
``timeout``) and stores the title in the state's metadata, then announces
``conversation_title_generated``. A title is only generated while the metadata has
none. A failing title model (an error, a timeout, an empty answer) is logged and
changes nothing: the turn goes on, and the next turn tries again.

Options: ``chat_model`` (a model string, a dict of ChatModel fields or a model; default
the agent's model, with the agent's fallbacks), ``fallbacks``, ``prompt_template`` (the
system prompt, replacing the default), ``examples`` (titles whose style to follow),
``metadata_key`` (default ``"conversation_title"``, so that several instances with
their own ``id`` can keep several titles), ``max_length`` and ``timeout``.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..callbacks import Callbacks
from ..events import emit
from ..llm import as_model, call_model
from .base import Middleware

if TYPE_CHECKING:
    from ..agent import Agent
    from ..state import State

logger = logging.getLogger(__name__)

METADATA_KEY = "conversation_title"
DEFAULT_EXAMPLES: tuple[str, ...] = (
    "Debug payment processing error",
    "Plan quarterly team objectives",
    "Analyze website traffic patterns",
)
DEFAULT_PROMPT = (
    "You expertly summarize the User Text into a short title or phrase to represent "
    "a conversation: at most 6 words, no quotes, no trailing punctuation."
)
USER_PROMPT = (
    "Generate and return the title and nothing else. User Text:\n"
    "<user_text>\n{text}\n</user_text>"
)
# The opening of a long request says what it is about; the rest only costs tokens.
MAX_INPUT_CHARS = 2000
_QUOTES = "\"'`\u201c\u201d\u2018\u2019\u00ab\u00bb"
_PREFIX = re.compile(r"^\s*(?:title|conversation title)\s*:\s*", re.IGNORECASE)


class ConversationTitle(Middleware):
    """Generates a title from the user's request while the model answers it."""

    def __init__(
        self,
        *,
        chat_model: Any = None,
        fallbacks: Sequence[Any] | None = None,
        prompt_template: str | None = None,
        examples: Sequence[str] = DEFAULT_EXAMPLES,
        metadata_key: str = METADATA_KEY,
        max_length: int = 80,
        timeout: float = 30.0,
    ) -> None:
        super().__init__(
            chat_model=chat_model,
            fallbacks=fallbacks,
            prompt_template=prompt_template,
            examples=examples,
            metadata_key=metadata_key,
            max_length=max_length,
            timeout=timeout,
        )
        self.models: list[Any] = []
        if chat_model is not None:
            self.models = [as_model(chat_model), *map(as_model, fallbacks or ())]
        self._fallbacks = fallbacks
        self.prompt_template = prompt_template
        self.examples = [str(e) for e in examples]
        self.metadata_key = metadata_key
        self.max_length = max_length
        self.timeout = timeout
        self._tasks: dict[str | None, asyncio.Task[str | None]] = {}
        """Title calls in flight, by agent id (one middleware may serve several)."""

    def attach(self, agent: Agent) -> None:
        if not self.models:
            fallbacks = (
                agent.fallback_models
                if self._fallbacks is None
                else [as_model(m) for m in self._fallbacks]
            )
            self.models = [agent.model, *fallbacks]

    def debug_summary(self) -> dict[str, Any]:
        return {
            "models": [getattr(m, "name", repr(m)) for m in self.models],
            "metadata_key": self.metadata_key,
            "timeout": self.timeout,
        }

    # Hooks ------------------------------------------------------------------------
    async def before_model(self, state: State) -> State:
        task = self._tasks.get(state.agent_id)
        if task is not None and not task.done():
            return state  # still running: the next after_model collects it
        if task is not None:
            # Left over from a turn that ended before its after_model (the main call
            # failed or was cancelled): use its title if it came.
            title = self._collect(state.agent_id)
            if title and not state.get_metadata(self.metadata_key):
                return self._store(state, title)
        if state.get_metadata(self.metadata_key):
            return state
        text = last_user_text(state)
        if not text:
            return state
        self._debug("title_generation_started", text[:100])
        self._tasks[state.agent_id] = asyncio.create_task(self.generate_title(text))
        return state

    async def after_model(self, state: State) -> State:
        task = self._tasks.get(state.agent_id)
        if task is None:
            return state
        try:
            await asyncio.wait_for(asyncio.shield(task), self.timeout)
        except TimeoutError:
            task.cancel()
            self._tasks.pop(state.agent_id, None)
            self._failed(f"no title after {self.timeout:g} seconds")
            return state
        return self._store(state, self._collect(state.agent_id))

    def handle_message(self, message: Any, state: State) -> State:
        """``("title_generated", title)`` stores a title; ``("title_generation_failed",
        reason)`` is logged. A dict ``{"type": ..., "title"|"reason": ...}`` works too
        (what a message looks like after a trip through JSON)."""
        kind, value = _read_message(message)
        if kind == "title_generated" and isinstance(value, str):
            return self._store(state, self.clean(value) or None)
        if kind == "title_generation_failed":
            self._failed(value)
        return state

    # Generation -------------------------------------------------------------------
    async def generate_title(self, text: str) -> str | None:
        """A cleaned title for ``text``, or None when the title model failed."""
        try:
            call = await call_model(
                self.models,
                self.title_messages(text),
                [],
                execution=None,
                callbacks=Callbacks(),
            )
        except Exception as exc:  # the turn must not fail for a title
            self._failed(exc)
            return None
        title = self.clean(call.message.text)
        if not title:
            self._failed("the title model returned no text")
            return None
        self._debug("title_generation_completed", title)
        return title

    def title_messages(self, text: str) -> list[dict[str, Any]]:
        """The title request, in OpenAI format."""
        system = self.prompt_template
        if system is None:
            system = DEFAULT_PROMPT
            if self.examples:
                listed = "\n".join(f"- {e}" for e in self.examples)
                system += (
                    "\n\nFollow the style, approximate length, and format of the "
                    f"following examples:\n{listed}"
                )
        return [
            {"role": "system", "content": system},
            {
                "role": "user",
                "content": USER_PROMPT.format(text=text[:MAX_INPUT_CHARS]),
            },
        ]

    def clean(self, raw: str) -> str:
        """The first line, without a "Title:" prefix, quotes or closing punctuation,
        cut at a word boundary to ``max_length``."""
        line = next((ln for ln in raw.strip().splitlines() if ln.strip()), "")
        title = _PREFIX.sub("", line).strip().strip(_QUOTES + "*#").strip()
        title = " ".join(title.split()).rstrip(".!?,;:").strip(_QUOTES).strip()
        if len(title) > self.max_length:
            head = title[: self.max_length + 1]
            cut = head.rsplit(" ", 1)[0] if " " in head else ""
            title = (cut or title[: self.max_length]).rstrip(" ,;:-")
        return title

    # Helpers ----------------------------------------------------------------------
    def _collect(self, agent_id: str | None) -> str | None:
        task = self._tasks.pop(agent_id, None)
        if task is None or task.cancelled():
            return None
        return task.result()  # generate_title catches everything: no exception

    def _store(self, state: State, title: str | None) -> State:
        if not title:
            return state
        state = state.put_metadata(self.metadata_key, title)
        data: dict[str, Any] = {"title": title, "agent_id": state.agent_id}
        if self.metadata_key != METADATA_KEY:
            data["metadata_key"] = self.metadata_key
        emit("conversation_title_generated", data)
        return state

    def _failed(self, reason: Any) -> None:
        logger.warning("Title generation failed (%s): %s", self._name, reason)
        self._debug("title_generation_failed", str(reason))

    def _debug(self, action: str, detail: str) -> None:
        emit(
            "debug",
            {
                "event": "middleware_action",
                "data": {"middleware": self._name, "action": action, "detail": detail},
            },
        )

    @property
    def _name(self) -> str:
        return getattr(self, "id", type(self).__name__)


def last_user_text(state: State) -> str:
    """The text of the latest user message (earlier ones may be preloaded examples)."""
    for message in reversed(state.messages):
        if message.role == "user":
            return message.text.strip()
    return ""


def _read_message(message: Any) -> tuple[str | None, Any]:
    if isinstance(message, dict):
        kind = message.get("type")
        return kind, message.get("title", message.get("reason"))
    if isinstance(message, (tuple, list)) and len(message) == 2:
        return str(message[0]), message[1]
    return None, None
