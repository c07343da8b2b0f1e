"""Reading a ``RunAgentInput``: what of it we take, and what we refuse.

The server's copy of the conversation is authoritative. An AG-UI client sends the
whole history it holds (``messages``), its ``state``, its ``tools`` and
``context`` with every run; all of it is validated against the SDK's types, and
then only two things are taken: the new user message (the last message, a
``user`` one whose id the conversation does not know yet) or the ``resume``
answers to a pending approval. The history, state, tools and context a client
sends change nothing: the agent runs on the stored state with the tools its
factory gives it (docs/agui.md).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Final

from sagents_django.core.limits import MAX_STATE_DEPTH, json_text_too_deep
from sagents_django.exceptions import InvalidInput

MAX_INPUT_BYTES: Final = 4 * 1024 * 1024
"""A ``RunAgentInput`` is at most this long (it carries the client's whole
history; the one message we take is bounded again by ``add_message``)."""
MAX_ID_CHARS: Final = 200
_MALFORMED: Final[dict[str, Any]] = {"status": 400, "code": "bad_request"}


class Rejected(InvalidInput):
    """A request body refused before it is read as a run (``status``: the HTTP
    status that says why)."""

    def __init__(self, message: str, *, status: int, code: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code


@dataclass(kw_only=True, slots=True)
class RunInput:
    """What a ``RunAgentInput`` asks of us."""

    thread_id: str
    """Our conversation's id (a UUID)."""
    run_id: str
    """The client's id for this AG-UI run (echoed in RUN_STARTED/RUN_FINISHED)."""
    message_id: str | None = None
    """The new user message's id (the client's), when the input carries one."""
    text: str | None = None
    """The new user message's text (text parts joined)."""
    resume: list[dict[str, Any]] = field(default_factory=list)
    """The resume entries (``interruptId``, ``status``, ``payload``), when any."""


def parse(body: bytes) -> RunInput:
    """The run input in ``body``; ``InvalidInput`` names what is wrong."""
    if len(body) > MAX_INPUT_BYTES:
        raise Rejected(
            f"RunAgentInput is over {MAX_INPUT_BYTES} bytes",
            status=413,
            code="too_large",
        )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise Rejected("RunAgentInput is not UTF-8", **_MALFORMED) from None
    if json_text_too_deep(text, MAX_STATE_DEPTH):
        raise InvalidInput(f"RunAgentInput nests deeper than {MAX_STATE_DEPTH} levels")
    try:
        raw = json.loads(text)
    except ValueError:
        raise Rejected("RunAgentInput is not JSON", **_MALFORMED) from None
    return from_object(raw)


def from_object(raw: Any) -> RunInput:
    """``parse`` for a body already read as JSON (a socket frame's ``input``)."""
    if not isinstance(raw, dict):
        raise Rejected("RunAgentInput must be a JSON object", **_MALFORMED)
    try:
        from ag_ui.core import RunAgentInput
    except ImportError:  # the [agui] extra
        raise Rejected(
            "The AG-UI endpoint needs pip install 'sagents-django[agui]'",
            status=501,
            code="not_installed",
        ) from None
    try:
        model = RunAgentInput.model_validate(raw)
    except ValueError as exc:  # pydantic's ValidationError
        first = exc.errors()[0]  # type: ignore[attr-defined]
        where = ".".join(str(p) for p in first["loc"])
        raise InvalidInput(f"RunAgentInput.{where}: {first['msg']}") from None
    thread = thread_id(model.thread_id)
    if not model.run_id or len(model.run_id) > MAX_ID_CHARS:
        raise InvalidInput(f"runId must be 1 to {MAX_ID_CHARS} characters")
    run = RunInput(thread_id=thread, run_id=model.run_id)
    if model.resume:
        run.resume = [
            {
                "interruptId": entry.interrupt_id,
                "status": entry.status,
                "payload": entry.payload,
                "metadata": entry.metadata,
            }
            for entry in model.resume
        ]
        return run
    last = model.messages[-1] if model.messages else None
    if last is not None and last.role == "user":
        if len(last.id) > MAX_ID_CHARS:
            raise InvalidInput(f"A message id is at most {MAX_ID_CHARS} characters")
        run.message_id = last.id
        run.text = _text(last.content)
    return run


def thread_id(value: Any) -> str:
    """A conversation id from a ``threadId`` (a UUID), else ``InvalidInput``."""
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise InvalidInput(f"threadId {value!r} is not a conversation id") from None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if getattr(part, "type", None) != "text":
            raise InvalidInput(
                f"Only text parts are taken in a message; got {part.type!r}"
            )
        parts.append(part.text)
    return "\n".join(parts)
