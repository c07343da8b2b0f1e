"""A person's message on its way in: the site's ``MessagePreprocessor`` makes the
version people see and the version the model reads (Sagents' ``display:``).

Every way a message enters goes through ``admission.add_message`` (the chat page,
the socket, the API, a message queued during a turn), and it calls ``prepare``
before anything is written, so a site sets one preprocessor and every path obeys
it. The preprocessor is ``SAGENTS["MESSAGE_PREPROCESSOR"]`` or, when that is unset,
the ``message_preprocessor`` attribute of the site's factory (one per factory)::

    def build_agent(*, agent_id, scope, filesystem_scope=None): ...
    build_agent.message_preprocessor = MentionExpander({"brief": BRIEF_TEXT})

The display version becomes the transcript's row (its text, and its metadata merged
into the row's); the model version travels with the run (``QueuedMessage.llm``) and is
what the turn adds to the agent state. A preprocessor refuses a message by raising
``ValueError`` (or Django's ``ValidationError``): ``InvalidInput`` with its words,
and nothing is stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync
from django.core.exceptions import ValidationError
from django.utils.module_loading import import_string

from sagents_django import services
from sagents_django.conf import sagents_settings
from sagents_django.core import Message
from sagents_django.core.preprocessing import (
    MessagePreprocessor,
    PreprocessContext,
    apreprocess,
)
from sagents_django.exceptions import InvalidInput, NotFound
from sagents_django.scope import Scope
from sagents_django.services.validation import clean_json, message_text


@dataclass(frozen=True, slots=True)
class Prepared:
    """A message as the transcript shows it and as the model reads it."""

    text: str
    """The display row's text."""
    metadata: dict[str, Any]
    """The display row's metadata (the caller's, with the preprocessor's added)."""
    llm: dict[str, Any] | None = None
    """The model's message as ``Message.to_dict()``; None: the same as shown."""


def site_preprocessor() -> MessagePreprocessor | None:
    """The setting's preprocessor, else the factory's ``message_preprocessor``."""
    path = sagents_settings.MESSAGE_PREPROCESSOR
    if path is not None:
        found = import_string(path)
        return found() if isinstance(found, type) else found
    factory_path = sagents_settings.FACTORY
    if factory_path is None:
        return None
    found = getattr(import_string(factory_path), "message_preprocessor", None)
    return found() if isinstance(found, type) else found


def prepare(scope: Scope, pk: Any, text: str, metadata: dict[str, Any]) -> Prepared:
    """``text`` (already checked by ``message_text``) through the site's
    preprocessor. Runs outside any transaction: a preprocessor may read the
    database or call a service."""
    preprocessor = site_preprocessor()
    if preprocessor is None:
        return Prepared(text, metadata)
    conversation = services.get_conversation(scope, pk)
    if conversation is None:  # never run a site's code for another's conversation
        raise NotFound("conversation", str(pk))
    context = PreprocessContext(
        agent_id=conversation.agent_id,
        conversation_id=str(pk),
        tool_context={"scope": scope},
    )
    original = Message.user(text)
    try:
        display, llm = async_to_sync(apreprocess)(
            preprocessor, original, context=context
        )
    except ValidationError as exc:
        raise InvalidInput(" ".join(exc.messages)) from exc
    except InvalidInput:
        raise
    except ValueError as exc:
        raise InvalidInput(str(exc) or "The message was refused") from exc
    if llm.role != "user" or display.role != "user":
        raise TypeError(
            f"{type(preprocessor).__name__}.preprocess must return user messages"
        )
    shown = message_text(display.text, what="the preprocessed message")
    extra = {**metadata, **display.metadata} if display.metadata else metadata
    if llm == original:
        return Prepared(shown, extra)
    data, _ = clean_json(
        llm.to_dict(),
        what="the preprocessed message for the model",
        max_bytes=sagents_settings.MAX_STATE_BYTES,
    )
    return Prepared(shown, extra, llm=data)
