"""State and Todo: pure data, every method returns a new State."""

from __future__ import annotations

import copy

import pytest

from sagents_django.core.messages import Message, ToolCall, ToolResult
from sagents_django.core.state import STALE_INTERRUPT_TEXT, State, merge_states
from sagents_django.core.todo import TODO_STATUSES, Todo


def full_state() -> State:
    return State(
        messages=[
            Message.user("hi"),
            Message.assistant(tool_calls=[ToolCall(call_id="c1", name="ask")]),
            Message.tool(
                [
                    ToolResult(
                        tool_call_id="c1",
                        name="ask",
                        content="waiting",
                        display_text="Asking",
                        is_interrupt=True,
                        interrupt_data={"type": "subagent"},
                    )
                ]
            ),
        ],
        todos=[
            Todo(id="t1", content="one"),
            Todo(id="t2", content="two", status="completed"),
        ],
        metadata={"title": "Chat", "nested": {"a": 1}},
        interrupt_data={"type": "hitl"},
        agent_id="agent-1",
    )


def unchanged(method_call):
    """Run ``method_call(state)`` and assert the state it got is untouched."""
    state = full_state()
    before = copy.deepcopy(state)
    result = method_call(state)
    assert state == before
    return result


# Todo ----------------------------------------------------------------------------


def test_a_todo_has_four_statuses() -> None:
    assert TODO_STATUSES == ("pending", "in_progress", "completed", "cancelled")
    for status in TODO_STATUSES:
        assert Todo(content="x", status=status).status == status  # type: ignore[arg-type]


def test_a_new_todo_is_pending() -> None:
    assert Todo(content="Write tests").status == "pending"


def test_an_invalid_todo_status_raises_value_error_naming_it() -> None:
    with pytest.raises(ValueError, match="'done'"):
        Todo(content="x", status="done")  # type: ignore[arg-type]


@pytest.mark.parametrize("content", ["", "   ", None, 3])
def test_a_todo_without_content_raises_value_error(content: object) -> None:
    with pytest.raises(ValueError, match="content"):
        Todo(content=content)  # type: ignore[arg-type]


def test_a_todo_id_is_generated_unique_and_kept_when_given() -> None:
    first, second = Todo(content="a"), Todo(content="b")

    assert first.id and second.id and first.id != second.id
    assert Todo(id="custom-id", content="a").id == "custom-id"


def test_a_todo_survives_to_dict_and_from_dict() -> None:
    todo = Todo(id="123", content="Task ✓", status="in_progress")

    assert todo.to_dict() == {"id": "123", "content": "Task ✓", "status": "in_progress"}
    assert Todo.from_dict(todo.to_dict()) == todo


def test_a_todo_from_a_map_without_id_or_status_gets_defaults() -> None:
    todo = Todo.from_dict({"content": "Task", "id": ""})

    assert todo.status == "pending"
    assert todo.id


def test_a_todo_from_a_map_with_a_bad_status_raises_value_error() -> None:
    with pytest.raises(ValueError):
        Todo.from_dict({"content": "Task", "status": "finished"})


# Messages ------------------------------------------------------------------------


def test_add_message_appends_without_touching_the_receiver() -> None:
    message = Message.assistant("hello")

    result = unchanged(lambda s: s.add_message(message))

    assert result.messages[-1] is message
    assert len(result.messages) == 4


def test_add_messages_appends_in_order() -> None:
    new = [Message.user("a"), Message.assistant("b")]

    result = unchanged(lambda s: s.add_messages(new))

    assert [m.text for m in result.messages[-2:]] == ["a", "b"]


def test_set_messages_replaces_them_with_a_copy_of_the_list() -> None:
    new = [Message.user("only")]

    result = unchanged(lambda s: s.set_messages(new))
    new.append(Message.user("later"))

    assert [m.text for m in result.messages] == ["only"]


def test_replace_tool_result_swaps_only_the_matching_result() -> None:
    state = State(
        messages=[
            Message.tool(
                [
                    ToolResult(tool_call_id="a", name="x", content="old"),
                    ToolResult(tool_call_id="b", name="y", content="keep"),
                ]
            )
        ]
    )
    new = ToolResult(tool_call_id="a", name="x", content="new")

    result = state.replace_tool_result("a", new)

    assert [r.content for r in result.messages[0].tool_results] == ["new", "keep"]
    assert [r.content for r in state.messages[0].tool_results] == ["old", "keep"]


def test_replace_tool_result_with_an_unknown_id_changes_nothing() -> None:
    state = full_state()

    result = state.replace_tool_result(
        "nope", ToolResult(tool_call_id="nope", name="z")
    )

    assert result == state


def test_clean_stale_interrupts_turns_interrupts_into_error_results() -> None:
    result = unchanged(lambda s: s.clean_stale_interrupts())

    (tool_result,) = result.messages[2].tool_results
    assert tool_result == ToolResult(
        tool_call_id="c1",
        name="ask",
        content=STALE_INTERRUPT_TEXT,
        display_text="Asking",
        is_error=True,
    )
    assert tool_result.is_interrupt is False
    assert tool_result.interrupt_data is None


def test_clean_stale_interrupts_is_idempotent() -> None:
    once = full_state().clean_stale_interrupts()

    assert once.clean_stale_interrupts() == once


def test_clean_stale_interrupts_without_interrupts_is_a_no_op() -> None:
    state = State(
        messages=[Message.tool([ToolResult(tool_call_id="a", name="x", content="1")])]
    )

    assert state.clean_stale_interrupts() is state


def test_demote_interrupts_keeps_those_the_predicate_accepts() -> None:
    state = State(
        messages=[
            Message.tool(
                [
                    ToolResult(
                        tool_call_id="a",
                        name="x",
                        is_interrupt=True,
                        interrupt_data={"type": "keep"},
                    ),
                    ToolResult(
                        tool_call_id="b",
                        name="y",
                        is_interrupt=True,
                        interrupt_data={"type": "drop"},
                    ),
                ]
            )
        ]
    )
    seen = []

    result = state.demote_interrupts(
        lambda data: seen.append(data) or data["type"] == "keep"
    )

    kept, dropped = result.messages[0].tool_results
    assert kept.is_interrupt and kept.interrupt_data == {"type": "keep"}
    assert dropped.is_error and not dropped.is_interrupt
    assert seen == [{"type": "keep"}, {"type": "drop"}]
    assert state.messages[0].tool_results[1].is_interrupt


def test_demote_interrupts_passes_an_empty_dict_when_the_data_is_missing() -> None:
    state = State(
        messages=[
            Message.tool([ToolResult(tool_call_id="a", name="x", is_interrupt=True)])
        ]
    )
    seen = []

    state.demote_interrupts(lambda data: seen.append(data) or True)

    assert seen == [{}]


# Todos ---------------------------------------------------------------------------


def test_put_todo_replaces_the_same_id_in_place() -> None:
    updated = Todo(id="t1", content="one, revised", status="in_progress")

    result = unchanged(lambda s: s.put_todo(updated))

    assert [t.id for t in result.todos] == ["t1", "t2"]
    assert result.todos[0] == updated


def test_put_todo_appends_a_new_id() -> None:
    result = unchanged(lambda s: s.put_todo(Todo(id="t3", content="three")))

    assert [t.id for t in result.todos] == ["t1", "t2", "t3"]


def test_get_todo_finds_by_id_or_returns_none() -> None:
    state = full_state()

    assert state.get_todo("t2") == Todo(id="t2", content="two", status="completed")
    assert state.get_todo("missing") is None


def test_delete_todo_removes_by_id() -> None:
    result = unchanged(lambda s: s.delete_todo("t1"))

    assert [t.id for t in result.todos] == ["t2"]


def test_delete_todo_with_an_unknown_id_keeps_every_todo() -> None:
    assert unchanged(lambda s: s.delete_todo("nope")).todos == full_state().todos


def test_get_todos_by_status_filters() -> None:
    state = full_state()

    assert [t.id for t in state.get_todos_by_status("pending")] == ["t1"]
    assert [t.id for t in state.get_todos_by_status("completed")] == ["t2"]
    assert state.get_todos_by_status("cancelled") == []


def test_set_todos_replaces_them_with_a_copy_of_the_list() -> None:
    todos = [Todo(id="x", content="x")]

    result = unchanged(lambda s: s.set_todos(todos))
    todos.clear()

    assert [t.id for t in result.todos] == ["x"]


# Metadata ------------------------------------------------------------------------


def test_get_metadata_returns_the_value_or_the_default() -> None:
    state = full_state()

    assert state.get_metadata("title") == "Chat"
    assert state.get_metadata("missing") is None
    assert state.get_metadata("missing", 5) == 5


def test_put_metadata_sets_one_key() -> None:
    result = unchanged(lambda s: s.put_metadata("title", "Renamed"))

    assert result.metadata == {"title": "Renamed", "nested": {"a": 1}}


# Whole state ---------------------------------------------------------------------


def test_reset_keeps_only_the_agent_id() -> None:
    result = unchanged(lambda s: s.reset())

    assert result == State(agent_id="agent-1")


def test_copy_is_deep() -> None:
    state = full_state()

    duplicate = state.copy()
    duplicate.metadata["nested"]["a"] = 2
    duplicate.messages[0].content[0].content = "changed"

    assert state.metadata["nested"] == {"a": 1}
    assert state.messages[0].text == "hi"


def test_merge_states_concatenates_messages() -> None:
    left = State(messages=[Message.user("hi")])
    right = State(messages=[Message.assistant("hello")])

    assert [m.text for m in merge_states(left, right).messages] == ["hi", "hello"]


def test_merge_states_takes_the_right_todos_when_there_are_any() -> None:
    left = State(todos=[Todo(id="l", content="left")])
    right = State(todos=[Todo(id="r", content="right")])

    assert [t.id for t in merge_states(left, right).todos] == ["r"]
    assert [t.id for t in merge_states(left, State()).todos] == ["l"]


def test_merge_states_deep_merges_metadata() -> None:
    left = State(
        metadata={"a": 1, "nested": {"x": 1, "y": {"deep": 1}}, "replaced": {"k": 1}}
    )
    right = State(
        metadata={"b": 2, "nested": {"y": {"deeper": 2}, "z": 3}, "replaced": 5}
    )

    merged = merge_states(left, right)

    assert merged.metadata == {
        "a": 1,
        "b": 2,
        "nested": {"x": 1, "y": {"deep": 1, "deeper": 2}, "z": 3},
        "replaced": 5,
    }
    assert left.metadata["nested"] == {"x": 1, "y": {"deep": 1}}


def test_merge_states_takes_agent_id_and_interrupt_from_the_right_when_set() -> None:
    left = State(agent_id="left", interrupt_data={"from": "left"})

    assert merge_states(left, State()).agent_id == "left"
    assert merge_states(left, State()).interrupt_data == {"from": "left"}
    merged = merge_states(
        left, State(agent_id="right", interrupt_data={"from": "right"})
    )
    assert merged.agent_id == "right"
    assert merged.interrupt_data == {"from": "right"}


def test_merge_states_changes_neither_input() -> None:
    left, right = full_state(), full_state()
    left_before, right_before = copy.deepcopy(left), copy.deepcopy(right)

    merge_states(left, right)

    assert (left, right) == (left_before, right_before)


def test_add_message_takes_the_users_text_and_refuses_anything_else() -> None:
    state = State().add_message("Hello").add_messages(["Again", Message.user("Third")])

    assert [(m.role, m.text) for m in state.messages] == [
        ("user", "Hello"),
        ("user", "Again"),
        ("user", "Third"),
    ]
    with pytest.raises(TypeError, match="Expected a Message or the user's text"):
        state.add_message({"role": "user"})  # type: ignore[arg-type]
    assert len(state.messages) == 3
