"""StateSerializer: the versioned envelope, round trips, malformed input, stale interrupts."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sagents_django.core.display import extract_display_items
from sagents_django.core.exceptions import SerializationError, StateVersionError
from sagents_django.core.messages import (
    ContentPart,
    Message,
    ToolCall,
    ToolResult,
)
from sagents_django.core.middleware.base import Middleware, init_middleware
from sagents_django.core.openai_format import messages_to_openai
from sagents_django.core.serialization import (
    CURRENT_VERSION,
    MAX_DEPTH,
    StateSerializer,
    current_version,
    deserialize_server_state,
    deserialize_state,
    serialize_server_state,
    serialize_state,
)
from sagents_django.core.state import STALE_INTERRUPT_TEXT, State
from sagents_django.core.todo import TODO_STATUSES, Todo

REPO = Path(__file__).resolve().parents[2]

# Strategies -----------------------------------------------------------------------

any_text = st.one_of(
    st.text(st.characters(exclude_categories=("Cs",)), max_size=16),
    st.sampled_from(["\x00", "emoji 🐝🍯", "مرحبا", "עברית", "\u202e"]),
)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    any_text,
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(any_text, children, max_size=3)
    ),
    max_leaves=10,
)
json_objects = st.dictionaries(any_text, json_values, max_size=3)
ids = st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=10)
parts = st.one_of(
    st.builds(ContentPart.text, any_text),
    st.builds(
        lambda t, s: ContentPart.thinking(t, signature=s),
        any_text,
        st.one_of(st.none(), ids),
    ),
    st.builds(lambda d: ContentPart.image(d, media="image/png"), ids),
    st.builds(lambda u: ContentPart.image_url(f"https://x.test/{u}"), ids),
)
results = st.builds(
    ToolResult,
    tool_call_id=ids,
    name=any_text,
    content=st.one_of(any_text, st.lists(parts, max_size=2)),
    display_text=st.one_of(st.none(), any_text),
    is_error=st.booleans(),
    # Interrupts are demoted on load; the round trip covers unflagged results with data.
    is_interrupt=st.just(False),
    interrupt_data=st.one_of(st.none(), json_objects),
)
messages = st.builds(
    Message,
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    content=st.lists(parts, max_size=3),
    tool_calls=st.lists(
        st.builds(ToolCall, call_id=ids, name=any_text, arguments=json_objects),
        max_size=2,
    ),
    tool_results=st.lists(results, max_size=2),
    status=st.sampled_from(
        ["complete", "length", "cancelled", "content_filtered", "stream_error"]
    ),
    name=st.one_of(st.none(), any_text),
    metadata=json_objects,
)
todos = st.builds(
    Todo,
    id=ids,
    content=any_text.filter(lambda t: t.strip() != ""),
    status=st.sampled_from(TODO_STATUSES),
)
states = st.builds(
    State,
    messages=st.lists(messages, max_size=4),
    todos=st.lists(todos, max_size=3),
    metadata=json_objects,
    interrupt_data=st.one_of(st.none(), json_objects),
)


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": value}
    return value


# Envelope ------------------------------------------------------------------------


def test_the_envelope_has_version_one_and_an_iso_timestamp_and_no_agent_id() -> None:
    envelope = serialize_server_state(State(agent_id="secret-agent"))

    assert set(envelope) == {"version", "state", "serialized_at"}
    assert envelope["version"] == 1 == current_version() == CURRENT_VERSION
    assert datetime.fromisoformat(envelope["serialized_at"]).tzinfo is not None
    assert "agent_id" not in envelope["state"]
    assert "secret-agent" not in json.dumps(envelope)


def test_serialize_state_writes_string_keys_only() -> None:
    state = State(
        messages=[Message.user("hi")],
        todos=[Todo(id="t", content="do")],
        metadata={"title": "T"},
        interrupt_data={"type": "hitl"},
    )

    assert serialize_state(state) == {
        "messages": [{"role": "user", "content": [{"type": "text", "content": "hi"}]}],
        "todos": [{"id": "t", "content": "do", "status": "pending"}],
        "metadata": {"title": "T"},
        "interrupt_data": {"type": "hitl"},
    }


def test_the_state_serializer_namespace_exposes_the_functions() -> None:
    state = State(messages=[Message.user("x")])

    envelope = StateSerializer.serialize_server_state(state)

    assert StateSerializer.current_version() == 1
    assert StateSerializer.deserialize_server_state("a", envelope) == State(
        messages=state.messages, agent_id="a"
    )
    assert (
        StateSerializer.deserialize_state(
            "b", StateSerializer.serialize_state(state)
        ).agent_id
        == "b"
    )


def test_from_serialized_injects_the_agent_id() -> None:
    data = serialize_state(State(metadata={"k": "v"}))

    assert State.from_serialized("agent-9", data) == State(
        metadata={"k": "v"}, agent_id="agent-9"
    )


@settings(max_examples=150, deadline=None)
@given(states, st.one_of(st.none(), ids))
def test_any_state_survives_the_envelope_through_json_text(
    state: State, agent_id: str | None
) -> None:
    text = json.dumps(serialize_server_state(state), ensure_ascii=False)

    loaded = deserialize_server_state(agent_id, json.loads(text))

    assert loaded == State(
        messages=state.messages,
        todos=state.todos,
        metadata=state.metadata,
        interrupt_data=state.interrupt_data,
        agent_id=agent_id,
    )


def test_an_empty_state_dict_loads_as_an_empty_state() -> None:
    assert deserialize_state("a", {}) == State(agent_id="a")
    assert deserialize_state(
        "a", {"messages": None, "todos": None, "metadata": None}
    ) == State(agent_id="a")


# Versions ------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 2, "1", None, 1.5, True])
def test_an_unknown_version_raises_state_version_error(version: Any) -> None:
    envelope = {"version": version, "state": serialize_state(State())}

    with pytest.raises(StateVersionError, match=r"version .* reads version 1"):
        deserialize_server_state("a", envelope)


def test_a_missing_version_raises_state_version_error() -> None:
    with pytest.raises(StateVersionError, match="None"):
        deserialize_server_state("a", {"state": {}})


def test_an_envelope_without_state_raises_serialization_error() -> None:
    with pytest.raises(SerializationError, match="'state'"):
        deserialize_server_state("a", {"version": 1})


@pytest.mark.parametrize("envelope", [None, [], "text", 1])
def test_an_envelope_that_is_not_a_dict_raises_serialization_error(
    envelope: Any,
) -> None:
    with pytest.raises(SerializationError, match="must be a dict"):
        deserialize_server_state("a", envelope)


# Malformed input -----------------------------------------------------------------

MALFORMED = {
    "not a dict": ["messages"],
    "messages not a list": {"messages": {"role": "user"}},
    "messages an empty dict": {"messages": {}},
    "messages a string": {"messages": "hi"},
    "todos not a list": {"todos": 0},
    "message not a dict": {"messages": ["hi"]},
    "message without role": {"messages": [{"content": []}]},
    "message with unknown role": {"messages": [{"role": "robot"}]},
    "message with unhashable role": {"messages": [{"role": ["user"]}]},
    "message with unknown status": {"messages": [{"role": "user", "status": "weird"}]},
    "part without content": {
        "messages": [{"role": "user", "content": [{"type": "text"}]}]
    },
    "part with unknown type": {
        "messages": [{"role": "user", "content": [{"type": "video", "content": "x"}]}]
    },
    "part content not text": {
        "messages": [{"role": "user", "content": [{"type": "text", "content": 5}]}]
    },
    "content a string": {"messages": [{"role": "user", "content": "hi"}]},
    "tool call without id": {
        "messages": [{"role": "assistant", "tool_calls": [{"name": "x"}]}]
    },
    "tool call arguments a list": {
        "messages": [
            {
                "role": "assistant",
                "tool_calls": [{"call_id": "1", "name": "x", "arguments": [1]}],
            }
        ]
    },
    "tool result without name": {
        "messages": [{"role": "tool", "tool_results": [{"tool_call_id": "1"}]}]
    },
    "tool result content a number": {
        "messages": [
            {
                "role": "tool",
                "tool_results": [{"tool_call_id": "1", "name": "x", "content": 3}],
            }
        ]
    },
    "tool result interrupt data a list": {
        "messages": [
            {
                "role": "tool",
                "tool_results": [
                    {
                        "tool_call_id": "1",
                        "name": "x",
                        "is_interrupt": True,
                        "interrupt_data": [1],
                    }
                ],
            }
        ]
    },
    "bad todo status": {"todos": [{"id": "1", "content": "x", "status": "done"}]},
    "todo without content": {"todos": [{"id": "1"}]},
    "todo not a dict": {"todos": ["do it"]},
    "non-string key": {"metadata": {1: "one"}},
    "non-string key deep down": {"metadata": {"a": [{"b": {None: 1}}]}},
    "nesting deeper than MAX_DEPTH": {"metadata": nested(MAX_DEPTH + 5)},
    "metadata not a dict": {"metadata": ["a"]},
    "metadata an empty list": {"metadata": []},
    "metadata a string": {"metadata": "title"},
    "interrupt_data not a dict": {"interrupt_data": "pending"},
}


@pytest.mark.parametrize("data", list(MALFORMED.values()), ids=list(MALFORMED))
def test_malformed_state_raises_serialization_error(data: Any) -> None:
    with pytest.raises(SerializationError):
        deserialize_state("a", data)


def test_malformed_state_in_an_envelope_raises_serialization_error() -> None:
    with pytest.raises(SerializationError):
        deserialize_server_state(
            "a", {"version": 1, "state": {"messages": [{"role": 1}]}}
        )


def test_nesting_up_to_max_depth_is_accepted() -> None:
    # The state dict is level 1 and metadata level 2: fill the remaining levels.
    state = deserialize_state("a", {"metadata": nested(MAX_DEPTH - 2)})

    assert state.metadata == nested(MAX_DEPTH - 2)


def test_deep_nesting_is_refused_with_a_message_naming_the_limit() -> None:
    with pytest.raises(SerializationError, match=str(MAX_DEPTH)):
        deserialize_state("a", {"metadata": nested(MAX_DEPTH * 50)})


json_ish = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False),
        st.text(max_size=8),
        st.sampled_from(
            ["user", "assistant", "tool", "system", "text", "pending", "content"]
        ),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(
            st.one_of(
                st.sampled_from(
                    [
                        "messages",
                        "todos",
                        "metadata",
                        "interrupt_data",
                        "role",
                        "content",
                        "type",
                        "tool_calls",
                        "tool_results",
                        "call_id",
                        "tool_call_id",
                        "name",
                        "arguments",
                        "status",
                        "id",
                        "options",
                        "is_interrupt",
                    ]
                ),
                st.text(max_size=4),
                st.integers(),
            ),
            children,
            max_size=5,
        ),
    ),
    max_leaves=25,
)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(_paths(item, (*path, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_paths(item, (*path, index)))
    return found


@st.composite
def damaged_states(draw: st.DrawFn) -> Any:
    """A valid serialized state with a few nodes replaced by junk or removed."""
    data = json.loads(json.dumps(serialize_state(draw(states))))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(data)))
        if not path:
            return draw(json_ish)
        parent = data
        for step in path[:-1]:
            parent = parent[step]
        if isinstance(parent, dict) and draw(st.booleans()):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(json_ish)
    return data


@settings(max_examples=300, deadline=None)
@given(st.one_of(json_ish, damaged_states()))
def test_arbitrary_input_only_ever_raises_serialization_error(data: Any) -> None:
    try:
        state = deserialize_state("a", data)
    except SerializationError:
        return
    # What loads is usable: it serializes again and reads back the same, converts to
    # the OpenAI format and to display items.
    assert (
        deserialize_state("a", json.loads(json.dumps(serialize_state(state)))) == state
    )
    json.dumps(messages_to_openai(state.messages))
    for message in state.messages:
        json.dumps(extract_display_items(message))


@settings(max_examples=100, deadline=None)
@given(json_ish)
def test_arbitrary_envelopes_only_ever_raise_sagents_load_errors(data: Any) -> None:
    envelope = {"version": 1, "state": data}
    try:
        state = deserialize_server_state("a", envelope)
    except SerializationError:
        return
    # No interrupt survives a load without middleware to claim it.
    assert not any(r.is_interrupt for m in state.messages for r in m.tool_results)


# Stale interrupts ----------------------------------------------------------------


def interrupted_envelope(interrupt_data: dict[str, Any]) -> dict[str, Any]:
    state = State(
        messages=[
            Message.assistant(tool_calls=[ToolCall(call_id="c1", name="task")]),
            Message.tool(
                [
                    ToolResult(
                        tool_call_id="c1",
                        name="task",
                        content="waiting for the sub-agent",
                        display_text="Delegating",
                        is_interrupt=True,
                        interrupt_data=interrupt_data,
                    ),
                    ToolResult(tool_call_id="c2", name="other", content="fine"),
                ]
            ),
        ]
    )
    return json.loads(json.dumps(serialize_server_state(state)))


class AskUserMiddleware(Middleware):
    def restorable_interrupt(self, interrupt_data: dict[str, Any]) -> bool:
        return interrupt_data.get("type") == "ask_user_question"


class BrokenMiddleware(Middleware):
    def restorable_interrupt(self, interrupt_data: dict[str, Any]) -> bool:
        raise RuntimeError("bug in a middleware")


class ClaimsEverythingMiddleware(Middleware):
    def restorable_interrupt(self, interrupt_data: dict[str, Any]) -> bool:
        return True


def test_an_unclaimed_interrupt_is_demoted_to_an_error_result() -> None:
    state = deserialize_server_state(
        "a",
        interrupted_envelope({"type": "subagent"}),
        middleware=[init_middleware(AskUserMiddleware)],
    )

    first, second = state.messages[1].tool_results
    assert first == ToolResult(
        tool_call_id="c1",
        name="task",
        content=STALE_INTERRUPT_TEXT,
        display_text="Delegating",
        is_error=True,
    )
    assert second == ToolResult(tool_call_id="c2", name="other", content="fine")


@pytest.mark.parametrize("call_id", [["c1"], {"c1": 1}], ids=["list", "dict"])
def test_a_stored_interrupt_whose_id_is_not_text_loads_as_stored(call_id: Any) -> None:
    # It was a TypeError (an unhashable id) on every load of the conversation.
    envelope = interrupted_envelope({"type": "subagent"})
    envelope["state"]["interrupt_data"] = {"tool_call_id": call_id}
    state = deserialize_server_state("a", envelope)
    assert state.interrupt_data == {"tool_call_id": call_id}
    assert state.messages[1].tool_results[0].is_error  # the result was demoted


def test_without_middleware_every_interrupt_is_demoted() -> None:
    state = deserialize_server_state(
        "a", interrupted_envelope({"type": "ask_user_question"})
    )

    assert state.messages[1].tool_results[0].is_error


def test_an_interrupt_claimed_by_a_middleware_is_kept() -> None:
    data = {"type": "ask_user_question", "question": "Which city? 🏙"}

    state = deserialize_server_state(
        "a", interrupted_envelope(data), middleware=[init_middleware(AskUserMiddleware)]
    )

    kept = state.messages[1].tool_results[0]
    assert kept.is_interrupt and not kept.is_error
    assert kept.interrupt_data == data
    assert kept.content == "waiting for the sub-agent"


def test_a_middleware_whose_restorable_interrupt_raises_counts_as_no() -> None:
    state = deserialize_server_state(
        "a",
        interrupted_envelope({"type": "ask_user_question"}),
        middleware=[init_middleware(BrokenMiddleware)],
    )

    assert state.messages[1].tool_results[0].content == STALE_INTERRUPT_TEXT


def test_a_raising_middleware_does_not_stop_the_next_one_from_claiming() -> None:
    state = deserialize_server_state(
        "a",
        interrupted_envelope({"type": "ask_user_question"}),
        middleware=[
            init_middleware(BrokenMiddleware),
            init_middleware(AskUserMiddleware),
        ],
    )

    assert state.messages[1].tool_results[0].is_interrupt


def test_the_base_middleware_claims_no_interrupt() -> None:
    state = deserialize_server_state(
        "a",
        interrupted_envelope({"type": "anything"}),
        middleware=[init_middleware(Middleware)],
    )

    assert state.messages[1].tool_results[0].is_error


def test_an_async_restorable_interrupt_is_not_taken_as_a_yes() -> None:
    class AsyncMiddleware(Middleware):
        async def restorable_interrupt(self, interrupt_data: dict[str, Any]) -> bool:  # type: ignore[override]
            return False

    state = deserialize_server_state(
        "a",
        interrupted_envelope({"type": "subagent"}),
        middleware=[init_middleware(AsyncMiddleware)],
    )

    assert state.messages[1].tool_results[0].is_error


def test_deserialize_state_alone_leaves_interrupts_alone() -> None:
    envelope = interrupted_envelope({"type": "subagent"})

    state = deserialize_state("a", envelope["state"])

    assert state.messages[1].tool_results[0].is_interrupt


def test_a_state_can_claim_every_interrupt() -> None:
    state = deserialize_server_state(
        "a",
        interrupted_envelope({"type": "subagent"}),
        middleware=[init_middleware(ClaimsEverythingMiddleware)],
    )

    assert state.messages[1].tool_results[0].interrupt_data == {"type": "subagent"}


# A fresh interpreter -------------------------------------------------------------

DIGEST_SCRIPT = """
import hashlib, json, sys
from sagents_django.core.serialization import deserialize_server_state, serialize_state
state = deserialize_server_state("fresh-agent", json.loads(sys.stdin.read()))
canonical = json.dumps(serialize_state(state), sort_keys=True, ensure_ascii=True)
print(state.agent_id, len(state.messages), len(state.todos), state.messages[-1].text)
print(hashlib.sha256(canonical.encode()).hexdigest())
"""


def test_a_serialized_state_loads_identically_in_a_fresh_interpreter() -> None:
    state = State(
        messages=[
            Message.system("Be kind."),
            Message.user([ContentPart.text("Hi 👋 שלום"), ContentPart.image("QUJD")]),
            Message.assistant(
                [
                    ContentPart.thinking("hmm", signature="sig"),
                    ContentPart.text("Searching"),
                ],
                tool_calls=[
                    ToolCall(
                        call_id="c1",
                        name="search",
                        arguments={"q": {"deep": [1, "\x00"]}},
                    )
                ],
            ),
            Message.tool(
                [
                    ToolResult(
                        tool_call_id="c1",
                        name="search",
                        content="found",
                        display_text="Search",
                    )
                ]
            ),
            Message.assistant("Done ✓"),
        ],
        todos=[Todo(id="t1", content="search", status="completed")],
        metadata={"title": "Bees 🐝", "nested": {"list": [1, 2.5, None, True]}},
        agent_id="not-written",
    )
    text = json.dumps(serialize_server_state(state), ensure_ascii=False)

    completed = subprocess.run(
        [sys.executable, "-c", DIGEST_SCRIPT],
        input=text,
        capture_output=True,
        text=True,
        encoding="utf-8",
        cwd=REPO,
        timeout=60,
        check=False,
    )

    assert completed.returncode == 0, completed.stderr
    summary, digest = completed.stdout.strip().splitlines()
    local = deserialize_server_state("fresh-agent", json.loads(text))
    canonical = json.dumps(serialize_state(local), sort_keys=True, ensure_ascii=True)
    assert summary == "fresh-agent 5 1 Done ✓"
    assert digest == hashlib.sha256(canonical.encode()).hexdigest()
    assert local == State(
        messages=state.messages,
        todos=state.todos,
        metadata=state.metadata,
        agent_id="fresh-agent",
    )
