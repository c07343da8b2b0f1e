"""TodoList: the ``write_todos`` tool, with which an agent plans and tracks its work.

Why the whole list, every time: the model sends the complete list on each call and it
replaces the previous one (as Sagents' default ``merge: false``), so the model never
has to reason about partial updates, and a removed item is simply left out. Ids stay
stable anyway: an id the model sends is kept, and an item sent without one takes the id
of the existing item with the same text, or a new id. ``merge: true`` updates items by
id and appends new ones instead.

A list whose every item is resolved (completed or cancelled) clears itself, as in
Sagents v0.13.1: a finished plan is not carried, serialized and re-broadcast on every
later turn. Every successful call announces the resulting list as a ``todos_updated``
event, and so does ``on_server_start`` (a restored conversation shows its plan).

Options (``todo_opts`` of ``Agent``): ``display_text``, ``inline``, ``system_prompt``
and ``tool_description``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..events import emit
from ..messages import ToolResult
from ..todo import TODO_STATUSES, Todo
from ..tools import Tool
from .base import Middleware

if TYPE_CHECKING:
    from ..state import State
    from ..tools import ToolContext

TOOL_NAME = "write_todos"
DEFAULT_DISPLAY_TEXT = "Updating task list"
CLEARED_TEXT = "TODO list cleared - all tasks resolved"

SYSTEM_PROMPT = """\
## `write_todos`

You have access to the `write_todos` tool to plan and track complex objectives. Use it \
for complex, multi-step work, so that every necessary step is tracked and the user can \
see your progress. It is very helpful for breaking a large objective into smaller steps.

**Finish what you plan**: once you have created todos, work through ALL of them until \
each one is completed or cancelled. Do not stop while todos are still pending or \
in_progress.

While todos remain unfinished:
- Check the current list before you consider your work done.
- Always work on the next pending or in_progress item.
- If you cannot complete a todo, mark it cancelled and say why in its content.

Mark each todo completed as soon as you have finished it; do not batch completions. For \
simple requests that take only a few steps, skip this tool and just do the work: writing \
todos costs time and tokens.

## Important notes on the todo list
- Never call `write_todos` several times in parallel.
- Revise the list as you go: new information may reveal new tasks or make old ones \
irrelevant.
- Before you finish, make sure every todo is completed or cancelled."""

TOOL_DESCRIPTION = """\
Create and manage a structured task list for your current work session. It helps you \
track progress, organize complex tasks and show the user that you are being thorough.

Each call sends the COMPLETE list: it replaces the previous one. Keep the id of every \
existing item you send back; leave an item out to remove it.

Only use this tool when it helps you stay organized. If the request is trivial and \
takes fewer than 3 steps, do it directly instead.

## When to use this tool
1. Complex multi-step tasks: the work needs 3 or more distinct steps or actions.
2. Non-trivial tasks that need careful planning or several operations.
3. The user explicitly asks for a todo list.
4. The user gives several tasks (numbered or comma-separated).
5. The plan may need revising based on the results of the first steps.

## How to use it
1. Mark a task in_progress BEFORE you begin working on it.
2. Mark it completed right after finishing it, and add any follow-up tasks you found.
3. Update future tasks as needed: remove ones that are no longer necessary, add new \
ones. Do not change tasks that are already completed.
4. You can make several updates at once, e.g. complete one task and start the next.

## When NOT to use it
1. There is only a single, straightforward task.
2. The task is trivial and tracking it brings no benefit.
3. The task takes fewer than 3 trivial steps.
4. The request is purely conversational or informational.

## Task states
- pending: not started yet
- in_progress: being worked on now (several at once only if they are independent)
- completed: finished successfully
- cancelled: no longer needed, or impossible (say why in the content)

Only mark a task completed when it is FULLY done: not while errors are unresolved, the \
work is partial, or something blocks you. When blocked, keep it in_progress and add a \
task for what must be resolved. Unless every task is done, keep at least one task \
in_progress. When every task is completed or cancelled, the list clears itself."""


class TodoList(Middleware):
    """Adds ``write_todos`` and the guidance on when to plan with it."""

    def __init__(
        self,
        *,
        display_text: str = DEFAULT_DISPLAY_TEXT,
        inline: bool = False,
        system_prompt: str | None = None,
        tool_description: str | None = None,
    ) -> None:
        super().__init__(
            display_text=display_text,
            inline=inline,
            system_prompt=system_prompt,
            tool_description=tool_description,
        )
        self.display_text = display_text
        """The tool's label in the UI."""
        self.inline = inline
        """Also announce each update as a ``todo_snapshot`` display item, so the plan
        can show inside the transcript (the runtime persists it)."""
        self.prompt = SYSTEM_PROMPT if system_prompt is None else system_prompt
        self.tool_description = tool_description or TOOL_DESCRIPTION

    def system_prompt(self) -> str | None:
        return self.prompt or None

    def tools(self) -> list[Tool]:
        return [
            Tool(
                name=TOOL_NAME,
                description=self.tool_description,
                function=self.write_todos,
                parameters=PARAMETERS,
                display_text=self.display_text,
                idempotent=True,  # it replaces the whole list
            )
        ]

    def on_server_start(self, state: State) -> State:
        # A restored conversation shows its saved plan before anything runs.
        emit("todos_updated", {"todos": [t.to_dict() for t in state.todos]})
        return state

    def debug_summary(self) -> dict[str, Any]:
        return {"display_text": self.display_text, "inline": self.inline}

    async def write_todos(
        self, args: dict[str, Any], context: ToolContext
    ) -> ToolResult | tuple[str, dict[str, Any]]:
        """The tool function (async: ``emit`` must run on the event loop)."""
        merge = args.get("merge") is True
        current = list(context.state.todos)
        try:
            todos = parse_todos(args.get("todos"), current)
        except ValueError as exc:
            return ToolResult(
                tool_call_id="",
                name=TOOL_NAME,
                content=f"Failed to parse TODOs: {exc} Nothing was changed.",
                display_text=self.display_text,
                is_error=True,
            )
        if merge:
            todos = merge_todos(current, todos)
        kept = clear_if_resolved(todos)
        emit("todos_updated", {"todos": [t.to_dict() for t in kept]})
        if self.inline:
            # The snapshot shows the list before clearing: the transcript keeps the
            # finished plan while the sidebar empties.
            emit("todo_snapshot", {"display_item": todo_snapshot(todos)})
        return format_response(kept, merge=merge), {"todos": kept}


PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "todos": {
            "type": "array",
            "description": (
                "The complete TODO list; it replaces the previous one. Send every "
                "item you want to keep, with its id."
            ),
            "items": {
                "type": "object",
                "properties": {
                    "id": {
                        "type": ["string", "integer"],
                        "description": (
                            "The item's id: keep it for an existing item, omit it "
                            "for a new one."
                        ),
                    },
                    "content": {
                        "type": "string",
                        "minLength": 1,
                        "description": "What the task is.",
                    },
                    "status": {
                        "type": "string",
                        "enum": list(TODO_STATUSES),
                        "description": "The task's status (default pending).",
                    },
                },
                "required": ["content"],
            },
        },
        "merge": {
            "type": "boolean",
            "description": (
                "If true, update existing items by id and add new ones instead of "
                "replacing the whole list. Default false."
            ),
        },
    },
    "required": ["todos"],
}


def parse_todos(data: Any, current: Sequence[Todo] = ()) -> list[Todo]:
    """Todos from the model's list; raise ValueError naming every problem.

    An item without an id takes the id of an unclaimed current todo with the same
    content, else a new one, so a model that omits ids still keeps them stable.
    """
    if not isinstance(data, list):
        raise ValueError(
            "todos must be a list of {id, content, status} objects, not "
            f"{type(data).__name__}."
        )
    problems: list[str] = []
    seen: set[str] = set()
    for n, item in enumerate(data, 1):
        if not isinstance(item, dict):
            problems.append(f"item {n} must be an object, not {type(item).__name__}")
            continue
        content = item.get("content")
        if not isinstance(content, str) or not content.strip():
            problems.append(f"item {n}: content must be a non-empty string")
        status = item.get("status", "pending")
        if status not in TODO_STATUSES:
            problems.append(
                f"item {n}: status must be one of {', '.join(TODO_STATUSES)}, "
                f"not {status!r}"
            )
        todo_id = item.get("id")
        if todo_id not in (None, ""):
            if str(todo_id) in seen:
                problems.append(f"item {n}: id {str(todo_id)!r} is used twice")
            seen.add(str(todo_id))
    if problems:
        raise ValueError("; ".join(problems) + ".")

    by_content: dict[str, list[str]] = {}
    for todo in current:
        if todo.id not in seen:
            by_content.setdefault(todo.content.strip(), []).append(todo.id)
    todos = []
    for item in data:
        content = item["content"].strip()
        todo_id = item.get("id")
        if todo_id in (None, ""):
            reusable = by_content.get(content)
            todo_id = reusable.pop(0) if reusable else None
        kwargs: dict[str, Any] = {
            "content": content,
            "status": item.get("status", "pending"),
        }
        if todo_id is not None:
            kwargs["id"] = str(todo_id)
        todos.append(Todo(**kwargs))
    return todos


def merge_todos(current: list[Todo], updates: list[Todo]) -> list[Todo]:
    """``current`` with items of the same id replaced in place, new items appended."""
    by_id = {t.id: t for t in updates}
    merged = [by_id.pop(t.id, t) for t in current]
    return [*merged, *(t for t in updates if t.id in by_id)]


def clear_if_resolved(todos: list[Todo]) -> list[Todo]:
    """An empty list when every item is completed or cancelled (Sagents v0.13.1)."""
    if todos and all(t.resolved for t in todos):
        return []
    return todos


def format_response(todos: list[Todo], *, merge: bool = False) -> str:
    """What the model reads back: Sagents' summary line, then the list with its ids."""
    if not todos:
        return CLEARED_TEXT
    counts = [
        f"{sum(t.status == s for t in todos)} {s}"
        for s in TODO_STATUSES
        if any(t.status == s for t in todos)
    ]
    lines = [
        f"Successfully {'merged' if merge else 'replaced'} {len(todos)} TODO(s): "
        f"{', '.join(counts)}"
    ]
    lines.extend(f"- [{t.status}] {t.content} (id: {t.id})" for t in todos)
    return "\n".join(lines)


def todo_snapshot(todos: list[Todo]) -> dict[str, Any]:
    """A display item (as ``extract_display_items`` makes) showing the list inline."""
    return {
        "type": "todo_snapshot",
        "message_type": "system",
        "content": {
            "todos": [t.to_dict() for t in todos],
            "summary": {
                "total": len(todos),
                **{s: sum(t.status == s for t in todos) for s in TODO_STATUSES},
            },
        },
    }
