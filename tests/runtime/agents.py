"""The factory the runtime tests name in SAGENTS["FACTORY"] (also in worker processes).

The site's default stack without conversation titles (a title request would take a
reply scripted for the turn), with ``write_file`` waiting for approval, a ``Notes``
middleware that keeps what ``notify_middleware`` tells it, and ``count_users``,
offered only to users who hold ``auth.view_user`` (test_tool_access.py).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from project.agents import factory
from sagents_django.conf import sagents_settings
from sagents_django.core import (
    Agent,
    ChatModel,
    ContentPart,
    MentionExpander,
    Message,
    Middleware,
    State,
    Tool,
    ToolContext,
    build_default_middleware,
)
from sagents_django.tool_access import ScopeToolAccess

STALL_SECONDS = 1.0
"""A provider silent this long has stalled (the site default is two minutes)."""


def queue_playbook(args: dict[str, Any], context: ToolContext) -> str:
    context.queue_message(str(args.get("text")), display=bool(args.get("display")))
    return "Queued."


PLAYBOOK = Tool(
    name="playbook",
    description="Queue a message for the next turn.",
    function=queue_playbook,
    parameters={
        "type": "object",
        "properties": {"text": {"type": "string"}, "display": {"type": "boolean"}},
        "required": ["text"],
    },
)
"""A tool that queues a message for the turn after this one (``core.outbox``)."""


class Redact(Middleware):
    """The transcript shows ``SECRET-...`` words as ``[redacted]``; the state (what
    the model reads next) keeps them (``transform_display_message``)."""

    def transform_display_message(self, message: Message) -> Message:
        if "SECRET-" not in message.text:
            return message
        text = " ".join(
            "[redacted]" if w.startswith("SECRET-") else w
            for w in message.text.split(" ")
        )
        return replace(
            message,
            content=[ContentPart.text(text)],
            metadata={**message.metadata, "redacted": True},
        )


class Notes(Middleware):
    def handle_message(self, message: Any, state: State) -> State:
        return state.put_metadata("notes", [*state.get_metadata("notes", []), message])


COUNT_USERS = Tool(
    name="count_users",
    description="How many users the site has.",
    function=lambda args, context: "42 users",
    permission="auth.view_user",
)


def build_agent(
    *, agent_id: str, scope: Any, filesystem_scope: Any = None, tools: Any = ()
) -> Agent:
    middleware = build_default_middleware(
        filesystem_opts={"configs": factory.build_file_storage()},
        interrupt_on={"write_file": True},
    )
    middleware.append((Notes, {"id": "notes"}))
    middleware.append(Redact)
    return Agent(
        agent_id=agent_id,
        model=ChatModel(
            model=sagents_settings.MODEL,
            params=sagents_settings.MODEL_PARAMS,
            max_retries=0,  # a failure ends the turn at once (tests of failures)
            stream_idle_timeout=STALL_SECONDS,
        ),
        base_system_prompt=factory.SYSTEM_PROMPT,
        tools=[*tools, PLAYBOOK, COUNT_USERS],
        middleware=middleware,
        replace_default_middleware=True,
        filesystem_scope=filesystem_scope,
        tool_context={"scope": scope},
        tool_access=ScopeToolAccess(scope),
    )


BRIEF = "The brief: ship the release on Friday."


class Mentions(MentionExpander):
    """The preprocessor the runtime tests name: ``@brief`` reaches the model as the
    brief's text; a message saying "forbidden" is refused. It counts its calls."""

    calls = 0

    def __init__(self) -> None:
        super().__init__({"brief": BRIEF})

    def preprocess(self, message: Message, context: Any) -> tuple[Message, Message]:
        type(self).calls += 1
        if "forbidden" in message.text:
            raise ValueError("That message is not allowed here.")
        return super().preprocess(message, context)


def build_agent_with_mentions(**options: Any) -> Agent:
    return build_agent(**options)


# A factory may carry its preprocessor (when SAGENTS["MESSAGE_PREPROCESSOR"] is unset).
build_agent_with_mentions.message_preprocessor = Mentions  # type: ignore[attr-defined]
