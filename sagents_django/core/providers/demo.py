"""The offline demo model: ``sagents/demo``, a litellm custom provider.

Why: a fresh site must run with no API key and no network, and still show every feature
of the framework (TODOs, files, a sub-agent, an approval). This model is deterministic:
its reply depends only on the request's messages and tools, so a conversation replays
the same way every time. The decision is the pure function ``plan_reply``; the litellm
handler only streams that decision as chunks.

With tools, one turn walks through the features, one model call per step, choosing the
next step from the tool calls already made after the last user message:

1. ``write_todos``: plan three TODOs;
2. ``write_file``: write ``/notes/demo.md`` (the framework may ask for approval);
3. ``task``: ask a general-purpose sub-agent to review the notes;
4. ``write_todos`` again to close the TODOs, then a final text summary.

A tool that is not offered is skipped. Without tools it echoes the user and explains how
to configure a real model; asked for a conversation title, it derives one. Given the
review instructions of step 3 (as the sub-agent), it answers in one sentence.

This module is the pure decision and never imports litellm (about 5 s to import); the
litellm adapter that streams it lives in ``demo_litellm``, which
``register_demo_provider`` imports on its first call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEMO_MODEL",
    "DEMO_PROVIDER",
    "SUBAGENT_INSTRUCTIONS",
    "DemoReply",
    "DemoToolCall",
    "plan_reply",
    "register_demo_provider",
]

DEMO_PROVIDER = "sagents"
DEMO_MODEL = f"{DEMO_PROVIDER}/demo"
SUBAGENT_INSTRUCTIONS = "Review /notes/demo.md and reply with one sentence."
NOTES_PATH = "/notes/demo.md"

IDENTITY = "(I am the offline demo model: no API key needed.)"
HOW_TO_CONFIGURE = (
    'To talk to a real model, set SAGENTS["MODEL"] in your settings to any '
    "litellm model string "
    "(for example `openai/gpt-4o-mini`) and provide that provider's API key."
)
PLAN = (
    ("1", "Outline the answer"),
    ("2", "Write it to a file"),
    ("3", "Ask a sub-agent to review it"),
)
# Words in a tool result that mean the call did not do its job (a human rejected it, or
# the tool failed): the summary then says so instead of claiming success.
FAILURE_WORDS = ("reject", "denied", "error", "fail", "cancel", "not allowed")
SUBAGENT_ANSWER = (
    "Acting as a sub-agent, the offline demo model finds the notes short, clear "
    "and ready to share."
)


@dataclass(frozen=True, kw_only=True)
class DemoToolCall:
    """One tool call the demo model makes."""

    id: str
    """Deterministic: ``demo_call_<n>``, n counting the calls already in the history."""
    name: str
    arguments: dict[str, Any]

    def arguments_json(self) -> str:
        return json.dumps(self.arguments, ensure_ascii=False)

    def to_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments_json()},
        }


@dataclass(frozen=True, kw_only=True)
class DemoReply:
    """What the demo model answers to one request."""

    text: str
    tool_calls: tuple[DemoToolCall, ...] = ()

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool_calls else "stop"


@dataclass(frozen=True, kw_only=True)
class _Turn:
    """The conversation read from the last user message on."""

    request: str
    first_request: str
    system: str
    calls: tuple[tuple[str, str], ...]
    """(id, name) of each tool call made since the last user message."""
    results: dict[str, str]
    """Tool results since the last user message, by tool-call id."""
    calls_so_far: int
    """Tool calls in the whole history, so new ids never repeat an earlier one."""

    def called(self, name: str) -> int:
        return sum(1 for _, n in self.calls if n == name)

    def result_of(self, name: str) -> str | None:
        """The result of the latest call to ``name`` (None if never answered)."""
        for call_id, n in reversed(self.calls):
            if n == name:
                return self.results.get(call_id)
        return None


# --- the decision -------------------------------------------------------------------


def plan_reply(
    messages: Sequence[Any], tools: Sequence[Any] | None = None
) -> DemoReply:
    """Decide the demo model's answer from OpenAI-format messages and tool schemas."""
    turn = _read_turn(messages)
    offered = _tool_names(tools)
    if "reply with one sentence" in turn.request.lower():
        return DemoReply(text=SUBAGENT_ANSWER)
    if not offered:
        if "title" in turn.system.lower():
            return DemoReply(text=_title(turn.first_request))
        return DemoReply(text=_plain_answer(turn.request))
    return _next_step(turn, offered)


def _next_step(turn: _Turn, offered: set[str]) -> DemoReply:
    new_id = f"demo_call_{turn.calls_so_far + 1}"
    if "write_todos" in offered and not turn.called("write_todos"):
        return _call(
            "The offline demo model starts by planning the work as TODOs.",
            DemoToolCall(id=new_id, name="write_todos", arguments=_todos(None)),
        )
    if "write_file" in offered and not turn.called("write_file"):
        return _call(
            f"Now the offline demo model writes its notes to `{NOTES_PATH}`.",
            DemoToolCall(
                id=new_id,
                name="write_file",
                arguments={"file_path": NOTES_PATH, "content": _notes(turn.request)},
            ),
        )
    if "task" in offered and not turn.called("task"):
        return _call(
            "Next the offline demo model asks a general-purpose sub-agent for a review.",
            DemoToolCall(
                id=new_id,
                name="task",
                arguments={
                    "instructions": SUBAGENT_INSTRUCTIONS,
                    "subagent_type": "general-purpose",
                },
            ),
        )
    if turn.called("write_todos") == 1 and "write_todos" in offered:
        return _call(
            "All steps are done, so the offline demo model closes its TODOs.",
            DemoToolCall(id=new_id, name="write_todos", arguments=_todos(turn)),
        )
    return DemoReply(text=_summary(turn))


def _call(text: str, call: DemoToolCall) -> DemoReply:
    return DemoReply(text=text, tool_calls=(call,))


def _todos(turn: _Turn | None) -> dict[str, Any]:
    """The plan: the first item in progress, or (after the walk) each item's outcome."""
    if turn is None:
        statuses = ("in_progress", "pending", "pending")
    else:
        statuses = (
            "completed",
            _outcome(turn, "write_file"),
            _outcome(turn, "task"),
        )
    return {
        "todos": [
            {"id": todo_id, "content": content, "status": status}
            for (todo_id, content), status in zip(PLAN, statuses, strict=True)
        ]
    }


def _outcome(turn: _Turn, tool: str) -> str:
    result = turn.result_of(tool)
    return "cancelled" if result is None or _failed(result) else "completed"


def _failed(result: str) -> bool:
    lowered = result.lower()
    return any(word in lowered for word in FAILURE_WORDS)


def _summary(turn: _Turn) -> str:
    lines = [
        _summary_line(turn, name) for name in ("write_todos", "write_file", "task")
    ]
    steps = [line for line in lines if line]
    if not steps:
        return _plain_answer(turn.request)
    return "\n".join(
        [
            f"Done! You asked: “{_gist(turn.request)}”. Here is what happened:",
            "",
            *steps,
            "",
            f"{IDENTITY} {HOW_TO_CONFIGURE}",
        ]
    )


def _summary_line(turn: _Turn, name: str) -> str | None:
    if not turn.called(name):
        return None
    result = turn.result_of(name)
    if name == "write_todos":
        return "- **Plan:** I kept a TODO list of three steps up to date."
    if result is None:
        return f"- **{name}:** the call got no result."
    if name == "write_file":
        if _failed(result):
            return f"- **File:** `{NOTES_PATH}` was not written: “{_gist(result)}”."
        return f"- **File:** I wrote `{NOTES_PATH}` (see the file panel)."
    if _failed(result):
        return f"- **Sub-agent:** the review did not happen: “{_gist(result)}”."
    return f"- **Sub-agent:** a general-purpose sub-agent replied: “{_gist(result)}”"


def _notes(request: str) -> str:
    steps = "\n".join(f"{todo_id}. {content}" for todo_id, content in PLAN)
    return (
        "# Demo notes\n\n"
        f"You asked: {_gist(request, words=40)}\n\n"
        f"## Plan\n\n{steps}\n\n"
        "Written by the offline demo model, which needs no API key.\n"
    )


def _plain_answer(request: str) -> str:
    opening = f"You said: “{_gist(request)}”." if request.strip() else "Hello!"
    return (
        f"{opening} I can only echo you and show the framework's features, "
        f"because I am the offline demo model: no API key needed. {HOW_TO_CONFIGURE}"
    )


def _title(first_request: str) -> str:
    # A title prompt may wrap the user's words in a tag; prefer what is inside.
    tagged = re.search(r"<([\w-]+)>(.*?)</\1>", first_request, re.DOTALL)
    source = tagged.group(2) if tagged else first_request
    words = re.findall(r"[\w'\u2019-]+", source)[:6]
    if not words:
        return "Demo conversation"
    title = " ".join(words)
    return title[0].upper() + title[1:]


def _gist(text: str, *, words: int = 20) -> str:
    parts = text.split()
    gist = " ".join(parts[:words])
    return gist + "…" if len(parts) > words else gist


# --- reading OpenAI-format messages --------------------------------------------------


def _read_turn(messages: Sequence[Any]) -> _Turn:
    roles = [_field(m, "role") for m in messages]
    users = [i for i, role in enumerate(roles) if role == "user"]
    last_user = users[-1] if users else -1
    calls: list[tuple[str, str]] = []
    results: dict[str, str] = {}
    calls_so_far = 0
    for i, message in enumerate(messages):
        message_calls = [_read_call(c) for c in _field(message, "tool_calls") or ()]
        calls_so_far += len(message_calls)
        if i <= last_user:
            continue
        if roles[i] == "assistant":
            calls.extend(message_calls)
        elif roles[i] == "tool":
            call_id = str(_field(message, "tool_call_id") or "")
            results[call_id] = _text(_field(message, "content"))
    return _Turn(
        request=_text(_field(messages[last_user], "content")) if users else "",
        first_request=_text(_field(messages[users[0]], "content")) if users else "",
        system="\n".join(
            _text(_field(m, "content"))
            for m, r in zip(messages, roles, strict=True)
            if r == "system"
        ),
        calls=tuple(calls),
        results=results,
        calls_so_far=calls_so_far,
    )


def _read_call(call: Any) -> tuple[str, str]:
    name = _field(_field(call, "function") or {}, "name")
    return str(_field(call, "id") or ""), str(name or "")


def _tool_names(tools: Sequence[Any] | None) -> set[str]:
    names = set()
    for tool in tools or ():
        function = _field(tool, "function") or tool
        name = _field(function, "name")
        if name:
            names.add(str(name))
    return names


def _field(obj: Any, key: str) -> Any:
    # litellm may hand over its own Message objects instead of plain dicts.
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(_field(part, "text") or "")
            for part in content
            if _field(part, "type") in (None, "text")
        )
    return str(content)


# --- litellm registration ------------------------------------------------------------


def register_demo_provider() -> None:
    """Make ``sagents/demo`` callable through litellm. Idempotent and thread-safe."""
    # Imported here: the adapter imports this module, and importing it must stay cheap.
    from .demo_litellm import register_demo_provider as register

    register()
