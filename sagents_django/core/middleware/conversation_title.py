"""ConversationTitle: name a conversation after its opening request, in parallel.

Sagents starts the title call from ``before_model`` in a task that sends its result to
the resident agent process whenever it comes, so a title never holds up a reply. Here
the turn is one coroutine, not a resident process, so the title task belongs to the
turn: ``before_model`` starts it, ``conversation_title_generated`` is announced the
moment the title comes (even while tools run), and the title is stored in the
state's metadata by the next hook that finds it done, at the latest ``on_turn_end``.

A title still pending when the turn ends (the reply is complete) is awaited for at
most ``turn_end_grace`` seconds, then **cancelled**: a title call that started with
the reply usually lands within that grace, and a slow or stalled title model keeps
the run open (Stop showing, the next message queued) for that long at most, not for
its ``timeout``. It is cancelled rather than left running because an event after
``run_finished`` would reach no one and its title could not be stored. Nothing is
lost: the metadata still has no title, so the next turn asks again. A failing title
model (an error, a timeout, an empty answer) is logged and changes nothing either.

Only the conversation's own agent names it: in a sub-agent (the general-purpose one
inherits the parent's middleware; a configured one may list this middleware) the
hooks do nothing, since a sub-agent's conversation is thrown away.

Options: ``chat_model`` (a model string, a dict of ChatModel fields or a model; default
the agent's model, with the agent's fallbacks), ``fallbacks``, ``prompt_template`` (the
system prompt, replacing the default), ``examples`` (titles whose style to follow),
``metadata_key`` (default ``"conversation_title"``, so that several instances with
their own ``id`` can keep several titles), ``max_length``, ``timeout`` (seconds
before the title call is given up) and ``turn_end_grace`` (default 2 seconds; 0
cancels a pending title as soon as the turn ends).
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
from ..subagents import subagent_nesting
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
        turn_end_grace: float = 2.0,
    ) -> None:
        super().__init__(
            chat_model=chat_model,
            fallbacks=fallbacks,
            prompt_template=prompt_template,
            examples=examples,
            metadata_key=metadata_key,
            max_length=max_length,
            timeout=timeout,
            turn_end_grace=turn_end_grace,
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
        self.turn_end_grace = turn_end_grace
        self._tasks: dict[str | None, asyncio.Task[str | None]] = {}
        """Title tasks not yet stored, by agent id (one middleware may serve several)."""

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
            "turn_end_grace": self.turn_end_grace,
        }

    # Hooks ------------------------------------------------------------------------
    async def before_model(self, state: State) -> State:
        if state.agent_id in self._tasks:  # asked once per turn, even if it failed
            return self._land(state)
        if state.get_metadata(self.metadata_key) or subagent_nesting():
            return state
        text = last_user_text(state)
        if not text:
            return state
        self._debug("title_generation_started", text[:100])
        self._tasks[state.agent_id] = asyncio.create_task(
            self._generate(text, state.agent_id)
        )
        return state

    async def after_model(self, state: State) -> State:
        return self._land(state)  # never waits: the turn goes on

    async def on_turn_end(self, state: State) -> State:
        task = self._tasks.get(state.agent_id)
        if task is None:
            return state
        try:
            if not task.done() and self.turn_end_grace > 0:
                await asyncio.wait([task], timeout=self.turn_end_grace)
            state = self._land(state)
        finally:
            # Also when this wait is itself cancelled: nothing of the turn outlives
            # it, and the next turn asks again.
            del self._tasks[state.agent_id]
            pending = not task.done()
            if pending:
                task.cancel()
                self._debug("title_generation_cancelled", "the turn ended first")
        if pending:
            await asyncio.wait([task])  # the cancel lands at the call's next await
        return state

    def handle_message(self, message: Any, state: State) -> State:
        """``("title_generated", title)`` stores a title; ``("title_generation_failed",
        reason)`` is logged. A dict ``{"type": ..., "title"|"reason": ...}`` works too
        (what a message looks like after a trip through JSON)."""
        kind, value = _read_message(message)
        if kind == "title_generated" and isinstance(value, str):
            title = self.clean(value)
            if title:
                self._announce(title, state.agent_id)
            return self._store(state, title)
        if kind == "title_generation_failed":
            self._failed(value)
        return state

    # Generation -------------------------------------------------------------------
    async def _generate(self, text: str, agent_id: str | None) -> str | None:
        """The title task: the title, announced as soon as it comes."""
        title = await self.generate_title(text)
        if title:
            self._announce(title, agent_id)
        return title

    async def generate_title(self, text: str) -> str | None:
        """A cleaned title for ``text``, or None when the title model failed."""
        try:
            call = await asyncio.wait_for(
                call_model(
                    self.models,
                    self.title_messages(text),
                    [],
                    execution=None,
                    callbacks=Callbacks(),
                ),
                self.timeout,
            )
        except TimeoutError:
            self._failed(f"no title after {self.timeout:g} seconds")
            return None
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
    def _land(self, state: State) -> State:
        """Store the title of this agent's finished task (announced already)."""
        task = self._tasks.get(state.agent_id)
        if task is None or not task.done() or task.cancelled():
            return state
        title = task.result()  # generate_title catches everything: no exception
        if state.get_metadata(self.metadata_key) == title:
            return state
        return self._store(state, title)

    def _store(self, state: State, title: str | None) -> State:
        if not title:
            return state
        return state.put_metadata(self.metadata_key, title)

    def _announce(self, title: str, agent_id: str | None) -> None:
        data: dict[str, Any] = {"title": title, "agent_id": agent_id}
        if self.metadata_key != METADATA_KEY:
            data["metadata_key"] = self.metadata_key
        emit("conversation_title_generated", data)

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
