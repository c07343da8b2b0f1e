"""Our conversation events as AG-UI events.

One ``Translator`` per stream (an SSE response, an AG-UI socket) turns each
``agent.event`` message of the conversation's group into the AG-UI events it
means, as plain dicts in AG-UI's wire form (camelCase keys). Plain dicts, not the
SDK's pydantic models: a streamed token must cost about what it costs on our JSON
socket (bench/agui.py), and the tests validate every dict against the SDK's types.

The stream is one AG-UI run: RUN_STARTED when it opens, RUN_FINISHED (or
RUN_ERROR) when the run it follows ends. What happens in between (a streamed
message, tool calls, the plan) maps onto AG-UI's own events; what AG-UI has no
event for becomes CUSTOM (``CUSTOM_NAMES``). A sub-agent's own stream is not
translated: what it returns reaches the parent as its ``task`` call's result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from .interrupts import agui_interrupts
from .snapshot import AGUI_ID

CUSTOM_NAMES: Final = {
    "message_queued": "sagents.message_queued",
    "conversation_title_generated": "sagents.title",
    "approval_decided": "sagents.approval_decided",
    "run_restarted": "sagents.run_restarted",
    "notice": "sagents.notice",
    "tool_progress": "sagents.tool_progress",
}
"""Our events with no AG-UI counterpart, by the CUSTOM event's ``name``."""

AgUiEvent = dict[str, Any]


@dataclass(kw_only=True, slots=True)
class StreamState:
    """What the client's AG-UI state holds (``STATE_SNAPSHOT``), so that changes can
    go out as JSON Patch (``STATE_DELTA``)."""

    todos: list[dict[str, Any]] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"todos": self.todos, "files": self.files}


@dataclass(kw_only=True)
class Translator:
    """One stream's translation state."""

    thread_id: str
    run_id: str
    """The AG-UI run id (the client's, or our run's on a reconnect)."""
    follows: str | None = None
    """Our run whose end ends the stream (None: the next run that ends)."""
    state: StreamState = field(default_factory=StreamState)
    text_id: str | None = None
    """The AG-UI message now streaming text (open TEXT_MESSAGE)."""
    reasoning_id: str | None = None
    calls: dict[int, str] = field(default_factory=dict)
    """Open tool calls of the streaming message: delta index -> call id."""
    steps: set[str] = field(default_factory=set)
    known_messages: set[str] = field(default_factory=set)
    """Ids of the person's messages the client has (snapshots, this stream)."""
    usage: dict[str, int] = field(default_factory=dict)
    failure: str | None = None
    """The run's error as its ``error`` event said (RUN_ERROR's message)."""
    resumed_here: bool = False
    """This stream sent the decisions that resume the run (no CUSTOM for it)."""
    waits_for_next: bool = False
    """The stream's message was queued behind a running turn: the run that answers
    it is the ``next_run_id`` of the one it follows."""
    finished: bool = False
    _pending_end: dict[str, Any] | None = None

    # The stream's edges --------------------------------------------------------------
    def started(self) -> AgUiEvent:
        return {"type": "RUN_STARTED", "threadId": self.thread_id, "runId": self.run_id}

    def finish(
        self, status: str, *, interrupt: Any = None, error: str | None = None
    ) -> list[AgUiEvent]:
        """The events that end the stream's run (``status``: our run's)."""
        out = self.close_message()
        out += [{"type": "STEP_FINISHED", "stepName": s} for s in sorted(self.steps)]
        self.steps.clear()
        self.finished = True
        if status == "error":
            return [*out, {"type": "RUN_ERROR", "message": error or "The run failed"}]
        event: AgUiEvent = {
            "type": "RUN_FINISHED",
            "threadId": self.thread_id,
            "runId": self.run_id,
        }
        interrupts = agui_interrupts(interrupt) if status == "interrupted" else []
        if interrupts:
            event["outcome"] = {"type": "interrupt", "interrupts": interrupts}
        elif status == "cancelled":
            event["outcome"] = {"type": "cancelled"}
        else:
            event["outcome"] = {"type": "success"}
        if self.usage:
            event["usage"] = [self.usage]
        return [*out, event]

    def reopen(
        self,
        *,
        message_id: str,
        text: str,
        thinking: str,
        tool_calls: list[dict[str, Any]],
    ) -> list[AgUiEvent]:
        """The message a run is streaming, as far as it came (a stream that joins
        mid-message: the in-flight buffer)."""
        deltas: list[dict[str, Any]] = []
        if thinking:
            deltas.append({"thinking": thinking})
        if text:
            deltas.append({"content": text})
        for call in tool_calls:
            deltas.append({"tool_calls": [call]})
        return self._deltas(deltas, message_id)

    # One event of ours -----------------------------------------------------------------
    def translate(self, message: dict[str, Any]) -> list[AgUiEvent]:
        """The AG-UI events for one ``agent.event`` message (in ``seq`` order)."""
        if message.get("subagent") or self.finished:
            return []
        event = message.get("event")
        data = message.get("data") or {}
        if event not in HANDLED:
            return []
        handler: Any = getattr(self, str(event))
        result: list[AgUiEvent] = handler(data, message.get("seq"))
        return result

    def llm_deltas(self, data: dict[str, Any], seq: Any) -> list[AgUiEvent]:
        return self._deltas(data.get("deltas") or [], f"{self.run_id}.{seq}")

    def _deltas(self, deltas: list[Any], new_id: str) -> list[AgUiEvent]:
        out: list[AgUiEvent] = []
        for delta in deltas:
            if not isinstance(delta, dict):
                continue
            thinking = delta.get("thinking")
            if isinstance(thinking, str) and thinking:
                out += self._close_text()
                if self.reasoning_id is None:
                    self.reasoning_id = f"{new_id}.r"
                    out += [
                        {"type": "REASONING_START", "messageId": self.reasoning_id},
                        {
                            "type": "REASONING_MESSAGE_START",
                            "messageId": self.reasoning_id,
                            "role": "reasoning",
                        },
                    ]
                out.append(
                    {
                        "type": "REASONING_MESSAGE_CONTENT",
                        "messageId": self.reasoning_id,
                        "delta": thinking,
                    }
                )
            content = delta.get("content")
            if isinstance(content, str) and content:
                out += self._close_reasoning()
                if self.text_id is None:
                    self.text_id = new_id
                    out += self._step("model")
                    out.append(
                        {
                            "type": "TEXT_MESSAGE_START",
                            "messageId": new_id,
                            "role": "assistant",
                        }
                    )
                out.append(
                    {
                        "type": "TEXT_MESSAGE_CONTENT",
                        "messageId": self.text_id,
                        "delta": content,
                    }
                )
            for piece in delta.get("tool_calls") or []:
                out += self._tool_piece(piece, new_id)
        return out

    def _tool_piece(self, piece: Any, new_id: str) -> list[AgUiEvent]:
        if not isinstance(piece, dict) or not isinstance(piece.get("index"), int):
            return []
        out: list[AgUiEvent] = []
        call_id = self.calls.get(piece["index"])
        if call_id is None:
            if not piece.get("call_id") or not piece.get("name"):
                return []  # a call is announced once its id and name are known
            out += self._close_reasoning()
            call_id = self.calls[piece["index"]] = str(piece["call_id"])
            start: AgUiEvent = {
                "type": "TOOL_CALL_START",
                "toolCallId": call_id,
                "toolCallName": str(piece["name"]),
            }
            start["parentMessageId"] = self.text_id or new_id
            out += self._step("model")
            out.append(start)
        arguments = piece.get("arguments")
        if arguments:
            out.append(
                {
                    "type": "TOOL_CALL_ARGS",
                    "toolCallId": call_id,
                    "delta": str(arguments),
                }
            )
        return out

    def llm_message(self, data: dict[str, Any], seq: Any) -> list[AgUiEvent]:
        return self.close_message()

    def close_message(self) -> list[AgUiEvent]:
        """The events that end what is open of the streaming message."""
        out = self._close_reasoning() + self._close_text()
        out += [{"type": "TOOL_CALL_END", "toolCallId": c} for c in self.calls.values()]
        self.calls.clear()
        if "model" in self.steps:
            self.steps.discard("model")
            out.append({"type": "STEP_FINISHED", "stepName": "model"})
        return out

    def _close_text(self) -> list[AgUiEvent]:
        if self.text_id is None:
            return []
        event = {"type": "TEXT_MESSAGE_END", "messageId": self.text_id}
        self.text_id = None
        return [event]

    def _close_reasoning(self) -> list[AgUiEvent]:
        if self.reasoning_id is None:
            return []
        rid, self.reasoning_id = self.reasoning_id, None
        return [
            {"type": "REASONING_MESSAGE_END", "messageId": rid},
            {"type": "REASONING_END", "messageId": rid},
        ]

    def _step(self, name: str) -> list[AgUiEvent]:
        if name in self.steps:
            return []
        self.steps.add(name)
        return [{"type": "STEP_STARTED", "stepName": name}]

    def tool_execution_update(self, data: dict[str, Any], seq: Any) -> list[AgUiEvent]:
        name = f"tool:{data.get('call_id')}"
        status = data.get("status")
        if status == "executing":
            if data.get("progress"):
                return [_custom("tool_progress", data)]
            return self.close_message() + self._step(name)
        if status in ("completed", "failed") and name in self.steps:
            self.steps.discard(name)
            return [{"type": "STEP_FINISHED", "stepName": name}]
        return []

    def display_message_saved(self, data: dict[str, Any], seq: Any) -> list[AgUiEvent]:
        row = data.get("display_message")
        if not isinstance(row, dict):
            return []
        kind, content = row.get("content_type"), row.get("content") or {}
        if kind == "tool_result":
            return [
                *self.close_message(),
                {
                    "type": "TOOL_CALL_RESULT",
                    "messageId": f"d{row.get('id')}",
                    "toolCallId": str(content.get("tool_call_id")),
                    "content": str(content.get("content", "")),
                    "role": "tool",
                },
            ]
        if row.get("message_type") == "user" and kind == "text":
            # Someone's message (another tab's, one queued meanwhile), unless the
            # client has it (its own, in a snapshot): the snapshot's id for it.
            meta = row.get("metadata")
            given = meta.get(AGUI_ID) if isinstance(meta, dict) else None
            mid = given if isinstance(given, str) else f"d{row.get('id')}"
            if mid in self.known_messages:
                return []
            self.known_messages.add(mid)
            text = str(content.get("text", ""))
            # The assistant's message streaming meanwhile stays open (AG-UI
            # messages may interleave): closing it would split its text in two.
            return [
                {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "user"},
                *(
                    [{"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": text}]
                    if text
                    else []
                ),
                {"type": "TEXT_MESSAGE_END", "messageId": mid},
            ]
        if row.get("message_type") == "system":
            return [_custom("notice", row)]
        return []

    def todos_updated(self, data: dict[str, Any], seq: Any) -> list[AgUiEvent]:
        todos = data.get("todos")
        if not isinstance(todos, list):
            return []
        self.state.todos = todos
        return [
            {
                "type": "STATE_DELTA",
                "delta": [{"op": "replace", "path": "/todos", "value": todos}],
            }
        ]

    def file_updated(self, data: dict[str, Any], seq: Any) -> list[AgUiEvent]:
        return self._file(data, deleted=False)

    def file_deleted(self, data: dict[str, Any], seq: Any) -> list[AgUiEvent]:
        return self._file(data, deleted=True)

    def _file(self, data: dict[str, Any], *, deleted: bool) -> list[AgUiEvent]:
        path = data.get("path")
        if not isinstance(path, str):
            return []
        files = self.state.files
        if deleted and path in files:
            index = files.index(path)
            files.pop(index)
            op: dict[str, Any] = {"op": "remove", "path": f"/files/{index}"}
        elif not deleted and path not in files:
            files.append(path)
            op = {"op": "add", "path": "/files/-", "value": path}
        else:
            return []
        return [{"type": "STATE_DELTA", "delta": [op]}]

    def llm_token_usage(self, data: dict[str, Any], seq: Any) -> list[AgUiEvent]:
        usage = data.get("usage") or {}
        for ours, theirs in _USAGE_KEYS.items():
            value = usage.get(ours)
            if isinstance(value, int) and value >= 0:
                self.usage[theirs] = self.usage.get(theirs, 0) + value
        return []

    def run_started(self, data: dict[str, Any], seq: Any) -> list[AgUiEvent]:
        if self.follows is not None and data.get("run_id") != self.follows:
            return []
        out: list[AgUiEvent] = []
        if (data.get("attempt") or 1) > 1:
            # Another worker took the run over: its reply streams again from the
            # last step, so the message streamed so far is dropped.
            self.text_id = self.reasoning_id = None
            self.calls.clear()
            self.steps.clear()
            out.append(_custom("run_restarted", data))
        if data.get("trigger") == "resume" and not self.resumed_here:
            out.append(_custom("approval_decided", data))
        return out

    def run_finished(self, data: dict[str, Any], seq: Any) -> list[AgUiEvent]:
        run_id = data.get("run_id")
        if self.follows is not None and run_id != self.follows:
            return []
        status = str(data.get("status"))
        if status == "completed" and data.get("next_run_id") and self.waits_for_next:
            # Our message was queued behind this run: follow the one answering it.
            self.follows = str(data["next_run_id"])
            return []
        if status == "interrupted":
            self._pending_end = data  # the interrupt comes with status_changed
            return []
        return self.finish(status, error=data.get("error") or self.failure)

    def status_changed(self, data: dict[str, Any], seq: Any) -> list[AgUiEvent]:
        if self._pending_end is not None and data.get("status") == "interrupted":
            self._pending_end = None
            return self.finish("interrupted", interrupt=data.get("data"))
        return []

    def error(self, data: dict[str, Any], seq: Any) -> list[AgUiEvent]:
        self.failure = str(data.get("error") or "The run failed")
        return []

    def message_queued(self, data: dict[str, Any], seq: Any) -> list[AgUiEvent]:
        return [_custom("message_queued", data)]

    def conversation_title_generated(
        self, data: dict[str, Any], seq: Any
    ) -> list[AgUiEvent]:
        return [_custom("conversation_title_generated", {"title": data.get("title")})]


_USAGE_KEYS: Final = {
    "input": "inputTokens",
    "output": "outputTokens",
    "cached_input": "cachedInputTokens",
    "reasoning": "reasoningTokens",
}


def _custom(kind: str, value: Any) -> AgUiEvent:
    return {"type": "CUSTOM", "name": CUSTOM_NAMES[kind], "value": value}


HANDLED: Final = frozenset(
    {
        "llm_deltas",
        "llm_message",
        "tool_execution_update",
        "display_message_saved",
        "todos_updated",
        "file_updated",
        "file_deleted",
        "llm_token_usage",
        "run_started",
        "run_finished",
        "status_changed",
        "error",
        "message_queued",
        "conversation_title_generated",
    }
)
"""Our events a translator has a method for (named after the event, as a
consumer's handlers are); the others have no AG-UI meaning."""
