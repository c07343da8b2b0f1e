"""Approvals as types: the decision and interrupt JSON forms, round trips, and every
malformed input refused with an error that names the bad field."""

from __future__ import annotations

import json

import pytest

from sagents_django.core import (
    ActionRequest,
    Approve,
    CustomInterrupt,
    Edit,
    HITLInterrupt,
    InvalidResume,
    Reject,
    SerializationError,
    State,
    SubAgentInterrupt,
    ToolCall,
    decision_from_dict,
    interrupt_from_dict,
)
from sagents_django.core.approvals import (
    MAX_EDIT_BYTES,
    MAX_EDIT_DEPTH,
    MAX_REJECT_MESSAGE,
    decisions_from_list,
)


def write_request(**overrides) -> ActionRequest:
    values = {
        "tool_call_id": "w1",
        "tool_name": "write_file",
        "arguments": {"path": "notes.md"},
    }
    values.update(overrides)
    return ActionRequest(**values)


# Decisions ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("decision", "data"),
    [
        (Approve(), {"type": "approve"}),
        (
            Edit(arguments={"path": "b.md"}),
            {"type": "edit", "arguments": {"path": "b.md"}},
        ),
        (Reject(), {"type": "reject"}),
        (
            Reject(message="Not that one."),
            {"type": "reject", "message": "Not that one."},
        ),
    ],
)
def test_each_decision_has_one_json_form_and_reads_back(decision, data):
    assert decision.to_dict() == data
    assert decision_from_dict(data) == decision
    assert decision_from_dict(json.loads(json.dumps(data))) == decision
    assert decision.type == data["type"]


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        pytest.param("approve", r"decisions\[0\] must be a dict", id="string"),
        pytest.param(None, r"decisions\[0\] must be a dict", id="none"),
        pytest.param(
            {}, r"decisions\[0\]\.type must be one of .*not None", id="no-type"
        ),
        pytest.param(
            {"type": "APPROVE"}, r"decisions\[0\]\.type .* not 'APPROVE'", id="case"
        ),
        pytest.param({"type": 1}, r"decisions\[0\]\.type .* not 1", id="int-type"),
        pytest.param(
            {"type": "approve", "arguments": {}},
            r"decisions\[0\] has an unknown key 'arguments'; 'approve' takes 'type'",
            id="approve-with-arguments",
        ),
        pytest.param(
            {"type": "edit", "argument": {}},
            r"decisions\[0\] has an unknown key 'argument'",
            id="typo",
        ),
        pytest.param(
            {"type": "edit"},
            r"decisions\[0\]\.arguments is required for an edit",
            id="edit-without-arguments",
        ),
        pytest.param(
            {"type": "edit", "arguments": "x"},
            r"decisions\[0\]\.arguments must be an object, not 'x'",
            id="edit-arguments-string",
        ),
        pytest.param(
            {"type": "edit", "arguments": [1]},
            r"decisions\[0\]\.arguments must be an object, not \[1\]",
            id="edit-arguments-list",
        ),
        pytest.param(
            {"type": "edit", "arguments": {"x": float("nan")}},
            r"decisions\[0\]\.arguments must be plain JSON",
            id="edit-nan",
        ),
        pytest.param(
            {"type": "edit", "arguments": {"x": object()}},
            r"decisions\[0\]\.arguments must be plain JSON",
            id="edit-object",
        ),
        pytest.param(
            {"type": "reject", "message": 3},
            r"decisions\[0\]\.message must be a string, not 3",
            id="reject-message-int",
        ),
        pytest.param(
            {"type": "reject", "message": "x" * (MAX_REJECT_MESSAGE + 1)},
            rf"decisions\[0\]\.message is {MAX_REJECT_MESSAGE + 1} characters long",
            id="reject-message-too-long",
        ),
        pytest.param(
            Edit(arguments="x"),  # type: ignore[arg-type]
            r"decisions\[0\]\.arguments must be an object, not 'x'",
            id="typed-edit-rechecked",
        ),
    ],
)
def test_a_malformed_decision_raises_invalid_resume_naming_the_field(value, problem):
    with pytest.raises(InvalidResume, match=problem):
        decisions_from_list([value])


def test_the_error_names_the_position_of_the_bad_decision():
    with pytest.raises(
        InvalidResume, match=r"decisions\[1\]\.arguments must be an object, not 'x'"
    ):
        decisions_from_list([{"type": "approve"}, {"type": "edit", "arguments": "x"}])


def test_decisions_must_be_a_list():
    with pytest.raises(InvalidResume, match=r"decisions must be a list .* not dict"):
        decisions_from_list({"type": "approve"})


def test_edited_arguments_nested_too_deep_are_refused_without_recursing():
    deep: dict = {}
    node = deep
    for _ in range(5000):
        node["x"] = {}
        node = node["x"]
    with pytest.raises(InvalidResume, match=f"deeper than {MAX_EDIT_DEPTH} levels"):
        decision_from_dict({"type": "edit", "arguments": deep})


def test_edited_arguments_over_the_size_limit_are_refused():
    with pytest.raises(InvalidResume, match=f"the limit is {MAX_EDIT_BYTES}"):
        decision_from_dict(
            {"type": "edit", "arguments": {"text": "x" * MAX_EDIT_BYTES}}
        )


def test_a_huge_bad_value_is_shortened_in_the_message():
    with pytest.raises(InvalidResume) as caught:
        decision_from_dict({"type": "edit", "arguments": "y" * 100_000})
    assert len(str(caught.value)) < 200


# Action requests and HITL interrupts --------------------------------------------
def test_an_action_request_for_a_call_copies_its_id_name_and_arguments():
    call = ToolCall(call_id="c1", name="pay", arguments={"amount": 5})
    request = ActionRequest.for_call(
        call, description="Pay 5", allowed_decisions=["approve", "reject"]
    )
    assert request == ActionRequest(
        tool_call_id="c1",
        tool_name="pay",
        arguments={"amount": 5},
        description="Pay 5",
        allowed_decisions=("approve", "reject"),
    )
    request.arguments["amount"] = 6
    assert call.arguments == {"amount": 5}


def test_a_hitl_interrupt_round_trips_through_json():
    interrupt = HITLInterrupt(
        action_requests=[
            write_request(description="Write notes", middleware_id="mw"),
            write_request(
                tool_call_id="d1",
                tool_name="delete_file",
                allowed_decisions=("approve", "reject"),
            ),
        ]
    )
    data = json.loads(json.dumps(interrupt.to_dict()))

    assert data["type"] == "hitl"
    assert data["hitl_tool_call_ids"] == ["w1", "d1"]
    assert data["review_configs"] == {
        "write_file": {"allowed_decisions": ["approve", "edit", "reject"]},
        "delete_file": {"allowed_decisions": ["approve", "reject"]},
    }
    assert data["action_requests"][0]["description"] == "Write notes"
    assert "description" not in data["action_requests"][1]
    assert interrupt_from_dict(data) == interrupt
    assert State(interrupt_data=data).interrupt == interrupt


def test_check_decisions_types_them_and_keeps_their_order():
    interrupt = HITLInterrupt(
        action_requests=[write_request(), write_request(tool_call_id="w2")]
    )
    checked = interrupt.check_decisions(
        [Reject(message="no"), {"type": "edit", "arguments": {"path": "x"}}],
        pending_call_ids=["w1", "w2"],
    )
    assert checked == [Reject(message="no"), Edit(arguments={"path": "x"})]


@pytest.mark.parametrize(
    ("decisions", "pending", "problem"),
    [
        ([], ["w1"], r"Expected 1 decision\(s\), one per action request, got 0"),
        ([Approve(), Approve()], ["w1"], "got 2"),
        ([Approve()], [], r"action_requests\[0\] \('write_file'\) no longer matches"),
        (
            [Edit(arguments={})],
            ["w1"],
            r"decisions\[0\]\.type 'edit' is not allowed for 'write_file'; "
            r"allowed: \['approve', 'reject'\]",
        ),
    ],
)
def test_decisions_that_do_not_fit_the_interrupt_are_refused(
    decisions, pending, problem
):
    interrupt = HITLInterrupt(
        action_requests=[write_request(allowed_decisions=("approve", "reject"))]
    )
    with pytest.raises(InvalidResume, match=problem):
        interrupt.check_decisions(decisions, pending_call_ids=pending)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        pytest.param([], "interrupt_data must be an object, not", id="list"),
        pytest.param(
            {"type": "hitl"},
            "interrupt_data.action_requests must be a list, not None",
            id="hitl-without-requests",
        ),
        pytest.param(
            {"action_requests": "all"},
            "interrupt_data.action_requests must be a list, not 'all'",
            id="requests-not-a-list",
        ),
        pytest.param(
            {"action_requests": [{"tool_name": "x"}]},
            r"interrupt_data\.action_requests\[0\]\.tool_call_id must be a string, "
            "not None",
            id="no-call-id",
        ),
        pytest.param(
            {"action_requests": [{"tool_call_id": "c", "tool_name": 3}]},
            r"action_requests\[0\]\.tool_name must be a string, not 3",
            id="name-int",
        ),
        pytest.param(
            {
                "action_requests": [
                    {"tool_call_id": "c", "tool_name": "t", "arguments": "a=1"}
                ]
            },
            r"action_requests\[0\]\.arguments must be an object, not 'a=1'",
            id="arguments-string",
        ),
        pytest.param(
            {
                "action_requests": [
                    {"tool_call_id": "c", "tool_name": "t", "allowed_decisions": []}
                ]
            },
            r"action_requests\[0\]\.allowed_decisions must be a non-empty list",
            id="nothing-allowed",
        ),
        pytest.param(
            {
                "action_requests": [
                    {
                        "tool_call_id": "c",
                        "tool_name": "t",
                        "allowed_decisions": ["approve", "ignore"],
                    }
                ]
            },
            r"allowed_decisions must be a non-empty list .* not \['approve', 'ignore'\]",
            id="unknown-decision",
        ),
        pytest.param(
            {"type": "subagent", "subagent_id": "s", "tool_call_id": "t"},
            "interrupt_data.subagent must be a string, not None",
            id="subagent-without-name",
        ),
        pytest.param(
            {
                "type": "subagent",
                "subagent": "calc",
                "subagent_id": "s",
                "tool_call_id": "t",
                "interrupt": {"action_requests": [{}]},
            },
            r"interrupt_data\.interrupt\.action_requests\[0\]\.tool_call_id",
            id="subagent-inner-bad",
        ),
    ],
)
def test_malformed_interrupt_data_is_refused_naming_the_field(data, problem):
    with pytest.raises(SerializationError, match=problem):
        interrupt_from_dict(data)


def test_interrupt_data_a_middleware_made_up_is_a_custom_interrupt():
    data = {"type": "ask", "question": "Sure?"}
    interrupt = interrupt_from_dict(data)
    assert interrupt == CustomInterrupt(data=data)
    assert interrupt.type == "ask"
    assert interrupt.to_dict() == data


def test_a_subagent_interrupt_nests_its_own_and_tags_the_requests():
    inner = HITLInterrupt(action_requests=[write_request(middleware_id="hitl")])
    middle = SubAgentInterrupt(
        subagent="writer", subagent_id="p.sub.t2", tool_call_id="t2", interrupt=inner
    )
    outer = SubAgentInterrupt(
        subagent="manager", subagent_id="p.sub.t1", tool_call_id="t1", interrupt=middle
    )

    data = json.loads(json.dumps(outer.to_dict()))

    # The person decides on the innermost requests, tagged with who makes the call.
    assert [r.subagent for r in outer.action_requests] == ["writer"]
    assert data["action_requests"][0]["subagent"] == "writer"
    assert data["interrupt"]["interrupt"]["type"] == "hitl"
    assert interrupt_from_dict(data) == outer
    # Private keys (the sub-agent's conversation) are not part of the type.
    assert interrupt_from_dict({**data, "_run": {"id": "x"}}) == outer


def test_a_request_keeps_its_tools_schema_through_json_and_refuses_a_bad_one():
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    request = write_request(parameters=schema)
    data = HITLInterrupt(action_requests=[request]).to_dict()
    assert data["action_requests"][0]["parameters"] == schema
    assert interrupt_from_dict(json.loads(json.dumps(data))) == HITLInterrupt(
        action_requests=[request]
    )
    data["action_requests"][0]["parameters"] = "not a schema"
    with pytest.raises(SerializationError, match=r"action_requests\[0\]\.parameters"):
        interrupt_from_dict(data)


def test_a_schemas_property_order_survives_a_store_that_sorts_keys():
    """PostgreSQL's jsonb keeps no key order: the stored ``parameter_order`` does."""
    properties = {"title": {}, "count": {}, "a_late_one": {}, "b": {}}
    schema = {"type": "object", "properties": properties, "required": ["count"]}
    data = write_request(parameters=schema).to_dict()
    assert data["parameter_order"] == ["title", "count", "a_late_one", "b"]
    sorted_store = json.loads(json.dumps(data, sort_keys=True))
    assert list(sorted_store["parameters"]["properties"]) != data["parameter_order"]

    back = ActionRequest.from_dict(sorted_store)

    assert back.parameters == schema
    assert list(back.parameters["properties"]) == ["title", "count", "a_late_one", "b"]
    # Written before the order was stored, or naming fewer: the rest keep their place.
    del sorted_store["parameter_order"]
    assert ActionRequest.from_dict(sorted_store).parameters == schema
    sorted_store["parameter_order"] = ["count"]
    assert list(ActionRequest.from_dict(sorted_store).parameters["properties"]) == [
        "count",
        "a_late_one",
        "b",
        "title",
    ]
    sorted_store["parameter_order"] = "title,count"
    with pytest.raises(SerializationError, match=r"parameter_order"):
        ActionRequest.from_dict(sorted_store)
