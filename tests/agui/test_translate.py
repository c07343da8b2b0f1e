"""The translation of our events into AG-UI events, one case at a time: each event
valid for the SDK, and the client's state patched as it would be."""

from __future__ import annotations

from typing import Any

from sagents_django.agui.translate import Translator
from tests.agui.client import EVENT, View

RUN = "11111111-1111-4111-8111-111111111111"


def translator() -> Translator:
    t = Translator(thread_id="t", run_id="r", follows=RUN)
    t.state.files = ["/a.txt"]
    return t


def feed(t: Translator, *events: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for seq, (name, data) in enumerate(events, start=1):
        out += t.translate({"event": name, "seq": seq, "data": data})
    for event in out:
        EVENT.validate_python(event)
    return out


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def test_thinking_then_text_then_a_tool_call_open_and_close_in_order() -> None:
    t = translator()
    events = feed(
        t,
        ("llm_deltas", {"deltas": [{"thinking": "Hmm"}]}),
        ("llm_deltas", {"deltas": [{"content": "Sure."}]}),
        (
            "llm_deltas",
            {
                "deltas": [
                    {"tool_calls": [{"index": 0, "call_id": "c1", "name": "ls"}]},
                    {"tool_calls": [{"index": 0, "arguments": '{"path": "/"}'}]},
                ]
            },
        ),
        ("llm_message", {"message": {}}),
    )
    assert kinds(events) == [
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "STEP_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_END",
        "STEP_FINISHED",
    ]
    start = events[8]
    assert start["parentMessageId"] == events[6]["messageId"]


def test_files_and_todos_are_json_patches_of_the_state() -> None:
    t = translator()
    view = View(state={"todos": [], "files": ["/a.txt"]})
    events = feed(
        t,
        ("file_updated", {"path": "/b.txt", "scope": None}),
        ("file_updated", {"path": "/b.txt", "scope": None}),  # known: no change
        ("file_deleted", {"path": "/a.txt", "scope": None}),
        (
            "todos_updated",
            {"todos": [{"id": "1", "content": "x", "status": "pending"}]},
        ),
    )
    for event in events:
        view.apply(event)
    assert kinds(events) == ["STATE_DELTA"] * 3
    assert view.state == {
        "todos": [{"id": "1", "content": "x", "status": "pending"}],
        "files": ["/b.txt"],
    }
    assert view.state == t.state.to_dict()


def test_an_error_ends_the_run_with_run_error() -> None:
    t = translator()
    events = feed(
        t,
        ("error", {"error": "The provider said no", "error_type": "x"}),
        ("run_finished", {"run_id": RUN, "status": "error", "error": ""}),
    )
    assert events == [{"type": "RUN_ERROR", "message": "The provider said no"}]
    assert t.finished
    assert feed(t, ("llm_deltas", {"deltas": [{"content": "late"}]})) == []


def test_a_cancelled_run_has_the_cancelled_outcome_and_usage() -> None:
    t = translator()
    events = feed(
        t,
        ("llm_token_usage", {"usage": {"input": 10, "output": 3}}),
        ("run_finished", {"run_id": RUN, "status": "cancelled"}),
    )
    assert events[-1]["outcome"] == {"type": "cancelled"}
    assert events[-1]["usage"] == [{"inputTokens": 10, "outputTokens": 3}]


def test_a_run_taken_over_drops_the_message_streamed_so_far() -> None:
    t = translator()
    feed(t, ("llm_deltas", {"deltas": [{"content": "Half a rep"}]}))
    events = feed(
        t,
        ("run_started", {"run_id": RUN, "trigger": "message", "attempt": 2}),
        ("llm_deltas", {"deltas": [{"content": "Whole reply"}]}),
    )
    assert events[0]["name"] == "sagents.run_restarted"
    assert kinds(events)[1:] == [
        "STEP_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
    ]


def test_a_sub_agents_stream_and_other_runs_are_not_translated() -> None:
    t = translator()
    sub = {"event": "llm_deltas", "seq": 1, "data": {"deltas": [{"content": "x"}]}}
    assert t.translate({**sub, "subagent": {"name": "r", "task_call_id": "c"}}) == []
    other = {"run_id": "another", "status": "completed"}
    assert t.translate({"event": "run_finished", "seq": 2, "data": other}) == []
    assert not t.finished


def test_what_agui_has_no_event_for_is_custom() -> None:
    t = translator()
    events = feed(
        t,
        ("conversation_title_generated", {"title": "Trip", "agent_id": "a"}),
        ("message_queued", {"run_id": RUN, "policy": "enqueue", "waits_for": "run"}),
        ("run_started", {"run_id": RUN, "trigger": "resume", "attempt": 1}),
    )
    assert [e["name"] for e in events] == [
        "sagents.title",
        "sagents.message_queued",
        "sagents.approval_decided",
    ]


def test_a_persons_message_interleaves_and_is_sent_once() -> None:
    t = translator()
    t.known_messages.add("mine")
    row = {"message_type": "user", "content_type": "text"}
    events = feed(
        t,
        ("llm_deltas", {"deltas": [{"content": "Half"}]}),
        (
            "display_message_saved",
            {"display_message": {**row, "id": "7", "content": {"text": "Hello"}}},
        ),
        (
            "display_message_saved",
            {
                "display_message": {
                    **row,
                    "id": "8",
                    "content": {"text": "Mine"},
                    "metadata": {"agui_message_id": "mine"},
                }
            },
        ),
        ("llm_deltas", {"deltas": [{"content": " a reply"}]}),
    )
    view = View()
    for event in events:
        view.apply(event)
    assert view.texts() == ["Half a reply"]  # not split by the person's message
    assert view.texts("user") == ["Hello"]  # "mine" the client already has
