"""State: the conversation data an agent works on (messages, todos, metadata).

State is data, the agent is code: nothing callable lives here, and everything but
``agent_id`` (a runtime identifier injected by ``Agent.aexecute``) is serialized.
Methods return a new State and leave the receiver unchanged, so a caller that keeps the
state it passed in still has it after a failed call.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .messages import Message, ToolResult
from .todo import Todo

if TYPE_CHECKING:
    from .approvals import PendingInterrupt

STALE_INTERRUPT_TEXT = (
    "This tool call was waiting for input when the conversation was restored and "
    "could not be resumed. Ask again if it is still needed."
)


@dataclass(kw_only=True, slots=True)
class State:
    """An agent's conversation state."""

    messages: list[Message] = field(default_factory=list)
    todos: list[Todo] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    """JSON data shared by middleware (e.g. ``conversation_title``)."""
    interrupt_data: dict[str, Any] | None = None
    """Set while the agent waits for a person, as JSON (typed: ``interrupt``)."""
    agent_id: str | None = None
    """Runtime identifier, injected at execution time; never serialized."""

    def __post_init__(self) -> None:
        # State(messages=[{"role": "user", "content": "Hi"}, "text"]) as Sagents'
        # State.new! takes a list: coerced once. Only the ends are looked at, so the
        # copies every step makes (``replace``) cost nothing for a long history.
        messages = self.messages
        if messages and (
            type(messages[0]) is not Message or type(messages[-1]) is not Message
        ):
            self.messages = coerce_messages(messages)

    @property
    def interrupt(self) -> PendingInterrupt | None:
        """The pending interrupt typed: ``HITLInterrupt``, ``SubAgentInterrupt`` or
        ``CustomInterrupt`` (raises SerializationError when it is malformed)."""
        if not self.interrupt_data:
            return None
        from .approvals import interrupt_from_dict

        return interrupt_from_dict(self.interrupt_data)

    # Messages ---------------------------------------------------------------------
    def add_message(self, message: Message | str) -> State:
        """A copy with ``message`` appended (a string is the user's text)."""
        return replace(self, messages=[*self.messages, _message(message)])

    def add_messages(self, messages: list[Message] | list[Message | str]) -> State:
        return replace(self, messages=[*self.messages, *map(_message, messages)])

    def set_messages(self, messages: list[Message]) -> State:
        return replace(self, messages=list(messages))

    def replace_tool_result(self, tool_call_id: str, new_result: ToolResult) -> State:
        """A copy with the result for ``tool_call_id`` swapped for ``new_result``."""
        messages = []
        for message in self.messages:
            if message.role == "tool" and any(
                r.tool_call_id == tool_call_id for r in message.tool_results
            ):
                message = replace(
                    message,
                    tool_results=[
                        new_result if r.tool_call_id == tool_call_id else r
                        for r in message.tool_results
                    ],
                )
            messages.append(message)
        return replace(self, messages=messages)

    def clean_stale_interrupts(self) -> State:
        """Interrupted tool results become error results (see ``restorable_interrupt``)."""
        return self.demote_interrupts(lambda _data: False)

    def demote_interrupts(self, is_restorable: Any) -> State:
        """Turn interrupted tool results that ``is_restorable(data)`` refuses into errors."""
        demoted: set[str] = set()
        messages = []
        for message in self.messages:
            if message.role == "tool" and any(
                r.is_interrupt for r in message.tool_results
            ):
                results = []
                for result in message.tool_results:
                    if result.is_interrupt and not is_restorable(
                        result.interrupt_data or {}
                    ):
                        result = ToolResult(
                            tool_call_id=result.tool_call_id,
                            name=result.name,
                            content=STALE_INTERRUPT_TEXT,
                            display_text=result.display_text,
                            is_error=True,
                        )
                        demoted.add(result.tool_call_id)
                    results.append(result)
                message = replace(message, tool_results=results)
            messages.append(message)
        if not demoted:
            return self
        interrupt = self.interrupt_data
        # Stored data may hold anything there (a list is unhashable): only an id can
        # name a demoted result; anything else stays for resume to explain.
        call_id = interrupt.get("tool_call_id") if interrupt else None
        if isinstance(call_id, str) and call_id in demoted:
            interrupt = None  # it pointed at a result that can no longer resume
        return replace(self, messages=messages, interrupt_data=interrupt)

    # Todos ------------------------------------------------------------------------
    def set_todos(self, todos: list[Todo]) -> State:
        return replace(self, todos=list(todos))

    def put_todo(self, todo: Todo) -> State:
        """Replace the todo with the same id in place, or append it."""
        todos = list(self.todos)
        for i, existing in enumerate(todos):
            if existing.id == todo.id:
                todos[i] = todo
                break
        else:
            todos.append(todo)
        return replace(self, todos=todos)

    def get_todo(self, todo_id: str) -> Todo | None:
        return next((t for t in self.todos if t.id == todo_id), None)

    def delete_todo(self, todo_id: str) -> State:
        return replace(self, todos=[t for t in self.todos if t.id != todo_id])

    def get_todos_by_status(self, status: str) -> list[Todo]:
        return [t for t in self.todos if t.status == status]

    # Metadata ---------------------------------------------------------------------
    def get_metadata(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)

    def put_metadata(self, key: str, value: Any) -> State:
        return replace(self, metadata={**self.metadata, key: value})

    # Whole state ------------------------------------------------------------------
    def reset(self) -> State:
        """A clean slate: no messages, todos, metadata or interrupt."""
        return State(agent_id=self.agent_id)

    def copy(self) -> State:
        """A deep copy, for callers that want to mutate freely."""
        return copy.deepcopy(self)

    @classmethod
    def from_serialized(cls, agent_id: str | None, data: dict[str, Any]) -> State:
        """Read the ``"state"`` map written by ``StateSerializer``."""
        from .serialization import deserialize_state

        return deserialize_state(agent_id, data)


def merge_states(left: State, right: State) -> State:
    """Combine a state with an update (from a tool, middleware or sub-agent).

    messages are concatenated; todos are right's when it has any, else left's;
    metadata is deep-merged; interrupt_data and agent_id are right's when set.
    """
    return State(
        messages=[*left.messages, *right.messages],
        todos=list(right.todos) if right.todos else list(left.todos),
        metadata=_deep_merge(left.metadata, right.metadata),
        interrupt_data=right.interrupt_data
        if right.interrupt_data is not None
        else left.interrupt_data,
        agent_id=right.agent_id if right.agent_id is not None else left.agent_id,
    )


def _deep_merge(left: dict[str, Any], right: dict[str, Any]) -> dict[str, Any]:
    merged = dict(left)
    for key, value in right.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def coerce_messages(items: Any) -> list[Message]:
    """Messages from Message objects, OpenAI-format dicts (``{"role": "user",
    "content": "Hello"}``; consecutive ones convert together, so a tool call and its
    results pair up) or plain strings (the user's text)."""
    from .openai_format import messages_from_openai

    if isinstance(items, (str, bytes)):
        raise TypeError("Pass a list of messages, not a string")
    messages: list[Message] = []
    pending: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, dict):
            pending.append(item)
            continue
        if pending:
            messages.extend(messages_from_openai(pending))
            pending = []
        if isinstance(item, Message):
            messages.append(item)
        elif isinstance(item, str):
            messages.append(Message.user(item))
        else:
            raise TypeError(f"Cannot read a message from {item!r}")
    if pending:
        messages.extend(messages_from_openai(pending))
    return messages


def _message(value: object) -> Message:
    """A Message as given, or the user's text as one; anything else is refused here,
    not later in the loop where it would break far from the mistake."""
    if isinstance(value, Message):
        return value
    if isinstance(value, str):
        return Message.user(value)
    raise TypeError(f"Expected a Message or the user's text, not {value!r}")
