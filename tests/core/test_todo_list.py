"""TodoList: write_todos through a real agent, its validation, clearing and events."""

from __future__ import annotations

from typing import Any

import pytest

from sagents_django.core import Agent, Message, State, Todo, ToolCall
from sagents_django.core.events import event_handlers
from sagents_django.core.middleware.todo_list import (
    CLEARED_TEXT,
    DEFAULT_DISPLAY_TEXT,
    TodoList,
    clear_if_resolved,
    format_response,
    parse_todos,
)
from sagents_django.core.testing import ScriptedModel
from sagents_django.core.tools import ToolContext


def write(todos: Any, *, call_id: str = "w1", **extra: Any) -> Message:
    return Message.assistant(
        tool_calls=[
            ToolCall(
                call_id=call_id,
                name="write_todos",
                arguments={"todos": todos, **extra},
            )
        ]
    )


def item(content: str, status: str = "pending", todo_id: str | None = None) -> dict:
    data = {"content": content, "status": status}
    if todo_id is not None:
        data["id"] = todo_id
    return data


async def run(
    *replies: Any, state: State | None = None, **options: Any
) -> tuple[Any, list[tuple[str, dict]]]:
    """One turn with a TodoList agent; returns the result and the events it emitted."""
    events: list[tuple[str, dict]] = []
    agent = Agent(
        model=ScriptedModel([*replies, "Done."]),
        middleware=[(TodoList, options)] if options else [TodoList],
        replace_default_middleware=True,
    )
    result = await agent.aexecute(
        state or State(messages=[Message.user("Plan it")]),
        callbacks=[
            {"on_agent_event": lambda ex, name, data: events.append((name, data))}
        ],
    )
    assert result.status == "completed", result.error
    return result, events


def tool_results(result: Any) -> list[Any]:
    return [r for m in result.state.messages for r in m.tool_results]


def todo_events(events: list[tuple[str, dict]]) -> list[list[dict]]:
    return [data["todos"] for name, data in events if name == "todos_updated"]


# Normal use --------------------------------------------------------------------------


async def test_write_todos_stores_the_list_and_the_model_reads_a_summary() -> None:
    result, _ = await run(
        write(
            [
                item("Outline", "in_progress", "1"),
                item("Draft", todo_id="2"),
                item("Review", todo_id="3"),
            ]
        )
    )

    assert [t.to_dict() for t in result.state.todos] == [
        {"id": "1", "content": "Outline", "status": "in_progress"},
        {"id": "2", "content": "Draft", "status": "pending"},
        {"id": "3", "content": "Review", "status": "pending"},
    ]
    [answer] = tool_results(result)
    assert not answer.is_error
    assert answer.content.startswith(
        "Successfully replaced 3 TODO(s): 2 pending, 1 in_progress"
    )
    assert "- [in_progress] Outline (id: 1)" in answer.content
    assert answer.display_text == DEFAULT_DISPLAY_TEXT


async def test_each_call_replaces_the_whole_list() -> None:
    result, _ = await run(
        write([item("A", todo_id="a"), item("B", todo_id="b")], call_id="w1"),
        write([item("B", "in_progress", "b"), item("C", todo_id="c")], call_id="w2"),
    )

    assert [(t.id, t.content, t.status) for t in result.state.todos] == [
        ("b", "B", "in_progress"),
        ("c", "C", "pending"),
    ]


async def test_ids_the_model_sends_are_kept_even_when_they_are_numbers() -> None:
    result, _ = await run(
        write([{"id": 7, "content": "Seven"}, item("X", "pending", "x-1")])
    )

    assert [t.id for t in result.state.todos] == ["7", "x-1"]


async def test_items_without_an_id_get_one_that_stays_when_the_same_item_comes_back() -> (
    None
):
    first, _ = await run(write([item("Outline"), item("Draft")]))
    ids = [t.id for t in first.state.todos]
    assert all(ids) and len(set(ids)) == 2

    state = first.state.add_message(Message.user("Go on"))
    second, _ = await run(
        write(
            [item("Outline", "completed"), item("Draft", "in_progress"), item("New")]
        ),
        state=state,
    )

    todos = second.state.todos
    assert [t.id for t in todos[:2]] == ids
    assert [t.status for t in todos] == ["completed", "in_progress", "pending"]
    assert todos[2].id not in ids


async def test_a_todo_without_a_status_is_pending() -> None:
    result, _ = await run(write([{"content": "Something"}]))

    assert result.state.todos[0].status == "pending"


async def test_merge_updates_items_by_id_and_appends_new_ones() -> None:
    state = State(
        messages=[Message.user("Go on")],
        todos=[Todo(id="a", content="A"), Todo(id="b", content="B")],
    )

    result, _ = await run(
        write([item("A", "completed", "a"), item("C", todo_id="c")], merge=True),
        state=state,
    )

    assert [(t.id, t.status) for t in result.state.todos] == [
        ("a", "completed"),
        ("b", "pending"),
        ("c", "pending"),
    ]
    assert tool_results(result)[0].content.startswith("Successfully merged 3 TODO(s)")


# Validation --------------------------------------------------------------------------

EXISTING = [Todo(id="keep", content="Keep me", status="in_progress")]


@pytest.mark.parametrize(
    ("todos", "named"),
    [
        ([item("Ship", "done")], "'done'"),
        ([item("")], "content"),
        ([item("   ")], "content must be a non-empty string"),
        ("Ship it", "array"),
        ([item("A", todo_id="1"), item("B", todo_id="1")], "id '1' is used twice"),
        (["just text"], "object"),
    ],
    ids=[
        "bad status",
        "empty content",
        "blank content",
        "not a list",
        "duplicate id",
        "item not an object",
    ],
)
async def test_a_bad_list_is_an_error_result_the_model_can_fix_and_changes_nothing(
    todos: Any, named: str
) -> None:
    state = State(messages=[Message.user("Plan")], todos=list(EXISTING))

    result, events = await run(write(todos), state=state)

    [answer] = tool_results(result)
    assert answer.is_error
    assert named in answer.content
    assert result.state.todos == EXISTING
    assert todo_events(events) == []


def test_parse_todos_names_every_problem_at_once() -> None:
    with pytest.raises(ValueError) as caught:
        parse_todos([item("", "done"), item("ok", "maybe")])

    message = str(caught.value)
    assert "item 1: content must be a non-empty string" in message
    assert "item 1: status must be one of" in message
    assert "not 'done'" in message
    assert "item 2: status must be one of" in message


async def test_a_direct_call_with_a_bad_list_says_nothing_was_changed() -> None:
    tool = TodoList().tools()[0]

    answer = await tool.function(
        {"todos": {"not": "a list"}}, ToolContext(state=State(), agent_id="a")
    )

    assert answer.is_error
    assert answer.content == (
        "Failed to parse TODOs: todos must be a list of {id, content, status} "
        "objects, not dict. Nothing was changed."
    )


# Clearing ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "statuses",
    [("completed", "completed"), ("completed", "cancelled"), ("cancelled",)],
    ids=["all completed", "completed and cancelled", "all cancelled"],
)
async def test_a_list_whose_every_item_is_resolved_clears_itself(
    statuses: tuple[str, ...],
) -> None:
    state = State(messages=[Message.user("Finish")], todos=list(EXISTING))
    todos = [item(f"Task {n}", s, str(n)) for n, s in enumerate(statuses)]

    result, events = await run(write(todos), state=state)

    assert result.state.todos == []
    assert tool_results(result)[0].content == CLEARED_TEXT
    assert todo_events(events) == [[]]


async def test_a_list_with_open_items_is_kept() -> None:
    result, _ = await run(
        write(
            [
                item("Done", "completed", "1"),
                item("Next", "cancelled", "2"),
                item("Open", todo_id="3"),
            ]
        )
    )

    assert [t.status for t in result.state.todos] == [
        "completed",
        "cancelled",
        "pending",
    ]


def test_clearing_and_the_summary_are_plain_functions() -> None:
    done = [Todo(id="1", content="A", status="completed")]

    assert clear_if_resolved(done) == []
    assert clear_if_resolved([]) == []
    assert format_response([]) == CLEARED_TEXT


# Events ------------------------------------------------------------------------------


async def test_every_successful_write_announces_the_whole_list() -> None:
    _, events = await run(
        write([item("A", "in_progress", "a"), item("B", todo_id="b")], call_id="w1"),
        write(
            [item("A", "completed", "a"), item("B", "in_progress", "b")], call_id="w2"
        ),
        write([item("A", "completed", "a"), item("B", "completed", "b")], call_id="w3"),
    )

    assert todo_events(events) == [
        [
            {"id": "a", "content": "A", "status": "in_progress"},
            {"id": "b", "content": "B", "status": "pending"},
        ],
        [
            {"id": "a", "content": "A", "status": "completed"},
            {"id": "b", "content": "B", "status": "in_progress"},
        ],
        [],
    ]


def test_on_server_start_announces_the_saved_list() -> None:
    seen: list[tuple[str, dict]] = []
    state = State(todos=[Todo(id="1", content="Saved", status="in_progress")])

    with event_handlers(lambda name, data: seen.append((name, data))):
        returned = TodoList().on_server_start(state)

    assert returned is state
    assert seen == [
        (
            "todos_updated",
            {"todos": [{"id": "1", "content": "Saved", "status": "in_progress"}]},
        )
    ]


async def test_inline_mode_also_announces_a_snapshot_of_the_list_before_clearing() -> (
    None
):
    _, events = await run(write([item("A", "completed", "a")]), inline=True)

    snapshots = [data for name, data in events if name == "todo_snapshot"]
    assert snapshots == [
        {
            "display_item": {
                "type": "todo_snapshot",
                "message_type": "system",
                "content": {
                    "todos": [{"id": "a", "content": "A", "status": "completed"}],
                    "summary": {
                        "total": 1,
                        "pending": 0,
                        "in_progress": 0,
                        "completed": 1,
                        "cancelled": 0,
                    },
                },
            }
        }
    ]
    assert todo_events(events) == [[]]


# Prompt and options ------------------------------------------------------------------


def test_the_agent_prompt_explains_when_to_plan_and_the_tool_is_offered() -> None:
    agent = Agent(
        model=ScriptedModel([]),
        middleware=[TodoList],
        replace_default_middleware=True,
    )

    prompt = agent.assembled_system_prompt
    assert "## `write_todos`" in prompt
    assert "complex" in prompt
    [tool] = agent.openai_tools
    description = tool["function"]["description"]
    assert "in_progress BEFORE" in description
    assert "completed right after" in description
    assert "When NOT to use it" in description
    schema = tool["function"]["parameters"]["properties"]["todos"]["items"]
    assert schema["properties"]["status"]["enum"] == [
        "pending",
        "in_progress",
        "completed",
        "cancelled",
    ]


async def test_the_prompt_description_and_label_can_be_replaced() -> None:
    result, _ = await run(
        write([item("A", todo_id="a")]),
        system_prompt="Plan with write_todos.",
        tool_description="Keep a plan.",
        display_text="Updating my notes",
    )

    agent = Agent(
        model=ScriptedModel([]),
        middleware=[
            (TodoList, {"system_prompt": "Plan.", "tool_description": "Keep."})
        ],
        replace_default_middleware=True,
    )
    assert agent.assembled_system_prompt == "Plan."
    assert agent.openai_tools[0]["function"]["description"] == "Keep."
    assert tool_results(result)[0].display_text == "Updating my notes"


def test_an_empty_system_prompt_option_adds_no_prompt() -> None:
    agent = Agent(
        model=ScriptedModel([]),
        middleware=[(TodoList, {"system_prompt": ""})],
        replace_default_middleware=True,
        base_system_prompt="Base.",
    )

    assert agent.assembled_system_prompt == "Base."


@pytest.mark.parametrize(
    ("status", "resolved"),
    [
        ("pending", False),
        ("in_progress", False),
        ("completed", True),
        ("cancelled", True),
    ],
)
def test_a_todo_says_whether_it_is_resolved_or_open(
    status: str, resolved: bool
) -> None:
    todo = Todo(content="Ship it", status=status)  # type: ignore[arg-type]
    assert (todo.resolved, todo.open) == (resolved, not resolved)
