"""Approval forms people can read: the arguments as fields from the tool's JSON
schema, the change a file call would make, and edits checked against the schema
before anything is sent (the error beside its field), with and without htmx."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from sagents_django import services
from sagents_django.core.approvals import ActionRequest
from sagents_django.models import AgentState
from sagents_django.scope import Scope
from sagents_django.ui import files
from tests.django.factories import envelope
from tests.web.hashes import hashed

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 20, "description": "A short title"},
        "count": {"type": "integer", "minimum": 1, "maximum": 10},
        "ratio": {"type": "number"},
        "colour": {"type": "string", "enum": ["red", "green"]},
        "urgent": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["title", "count"],
}
ARGS = {"title": "Picnic", "count": 3, "colour": "red", "urgent": True, "tags": ["a"]}
WRITE_SCHEMA = {
    "type": "object",
    "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["file_path", "content"],
}


def pause(conversation: Any, *requests: dict[str, Any]) -> None:
    AgentState.objects.create(
        conversation=conversation,
        state_data=envelope(
            interrupt_data={"type": "hitl", "action_requests": list(requests)}
        ),
    )


def request(name: str, arguments: dict[str, Any], schema: Any = SCHEMA, n: int = 0):
    """An action request as the loop stores it (on PostgreSQL, ``jsonb`` keeps
    none of the schema's key order: the stored ``parameter_order`` does)."""
    return ActionRequest(
        tool_call_id=f"call-{n}",
        tool_name=name,
        arguments=arguments,
        allowed_decisions=("approve", "edit", "reject"),
        parameters=schema,
    ).to_dict()


def decide(client: Client, conversation: Any, post: dict[str, Any], **extra: Any):
    url = reverse("sagents_django:decide", args=[conversation.pk])
    return client.post(url, hashed(conversation, post), **extra)


def page(client: Client, conversation: Any) -> str:
    url = reverse("sagents_django:conversation", args=[conversation.pk])
    return client.get(url).content.decode()


def edit(**fields: str) -> dict[str, str]:
    """A posted edit of the first request: field positions as in SCHEMA."""
    order = list(SCHEMA["properties"])
    post = {"decision-0": "edit"}
    values = {"title": "Picnic", "count": "3", "colour": "e0", "tags": '["a"]'}
    values.update(fields)
    for name, value in values.items():
        post[f"arg-0-{order.index(name)}"] = value
    return post


def test_the_arguments_are_drawn_as_fields_of_their_types(
    alice_client: Client, conversation: Any
) -> None:
    pause(conversation, request("plan", ARGS))
    html = page(alice_client, conversation)
    assert 'name="arg-0-0" value="Picnic" maxlength="20"' in html
    assert 'type="number" name="arg-0-1" value="3" step="1" min="1" max="10"' in html
    assert 'name="arg-0-2" value="" step="any"' in html
    assert '<option value="e0" selected>red</option>' in html
    assert 'name="arg-0-4" checked' in html
    assert "A short title" in html
    assert 'class="sg-json-input"' in html  # the list: a JSON box of its own


def test_an_edit_of_the_fields_is_sent_with_their_types(
    alice_client: Client, conversation: Any, sent: list
) -> None:
    pause(conversation, request("plan", ARGS))
    post = edit(title="Lake", count="7", ratio="0.5", colour="e1")  # urgent unticked
    response = decide(alice_client, conversation, post, **HTMX)
    assert response.status_code == 200, response.content
    assert sent == [
        (
            "resume",
            [
                {
                    "type": "edit",
                    "arguments": {
                        "title": "Lake",
                        "count": 7,
                        "ratio": 0.5,
                        "colour": "green",
                        "urgent": False,
                        "tags": ["a"],
                    },
                }
            ],
        )
    ]


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"count": "three"}, "Must be a whole number."),
        ({"count": "11"}, "11 is greater than the maximum of 10"),
        ({"count": ""}, "Required."),
        ({"ratio": "nan"}, "Must be a finite number."),
        ({"colour": "e9"}, "Choose one of the options."),
        ({"colour": "red"}, "Choose one of the options."),
        ({"title": "x" * 21}, "is too long"),
        ({"tags": "[1,"}, "Not valid JSON"),
        ({"tags": '"not a list"'}, "is not of type"),
    ],
)
def test_a_forged_edit_of_the_wrong_type_is_refused_beside_its_field(
    alice_client: Client, conversation: Any, sent: list, fields: dict, error: str
) -> None:
    pause(conversation, request("plan", ARGS))
    response = decide(alice_client, conversation, edit(**fields), **HTMX)
    assert response.status_code == 422
    html = response.content.decode()
    assert 'class="sg-field-error"' in html and error in html
    assert 'aria-invalid="true"' in html
    assert 'value="edit" checked' in html  # the choice is kept
    assert sent == []


def test_without_javascript_a_bad_edit_redraws_the_page_with_the_error(
    alice_client: Client, conversation: Any, sent: list
) -> None:
    pause(conversation, request("plan", ARGS))
    response = decide(alice_client, conversation, edit(count="zero"))
    assert response.status_code == 422
    html = response.content.decode()
    assert "Must be a whole number." in html and 'value="zero"' in html
    assert 'id="sg-text"' in html  # the whole page, the message box too
    assert sent == []


def test_a_tool_without_a_schema_keeps_the_json_box_checked_as_before(
    alice_client: Client, conversation: Any, sent: list
) -> None:
    pause(conversation, request("plan", {"x": 1}, schema=None))
    assert 'name="arguments-0"' in page(alice_client, conversation)
    bad = decide(
        alice_client,
        conversation,
        {"decision-0": "edit", "arguments-0": "{nope"},
        **HTMX,
    )
    assert bad.status_code == 422 and b"not JSON" in bad.content
    good = decide(
        alice_client,
        conversation,
        {"decision-0": "edit", "arguments-0": '{"x": 2}'},
        **HTMX,
    )
    assert good.status_code == 200
    assert sent == [("resume", [{"type": "edit", "arguments": {"x": 2}}])]


def test_arguments_outside_the_schema_fall_back_to_the_json_box_checked_by_it(
    alice_client: Client, conversation: Any, sent: list
) -> None:
    pause(conversation, request("plan", {**ARGS, "extra": 1}))
    assert 'name="arguments-0"' in page(alice_client, conversation)
    response = decide(
        alice_client,
        conversation,
        {"decision-0": "edit", "arguments-0": '{"title": 5, "count": 1}'},
        **HTMX,
    )
    assert response.status_code == 422
    assert b"title: 5 is not of type" in response.content
    assert sent == []


def test_a_write_file_call_shows_a_diff_against_the_stored_file(
    alice: Any, alice_client: Client, conversation: Any
) -> None:
    files.upload(Scope.for_user(alice), conversation, "plan.md", b"one\ntwo\n")
    pause(
        conversation,
        request(
            "write_file",
            {"file_path": "/uploads/plan.md", "content": "one\n<b>2</b>\n"},
            schema=WRITE_SCHEMA,
        ),
    )
    html = page(alice_client, conversation)
    assert "What changes in <code>/uploads/plan.md</code>" in html
    assert '<span class="sg-diff-del">-two</span>' in html
    assert '<span class="sg-diff-add">+&lt;b&gt;2&lt;/b&gt;</span>' in html


def test_an_edit_file_call_shows_its_replacement_and_a_new_file_says_so(
    alice: Any, alice_client: Client, conversation: Any
) -> None:
    files.upload(Scope.for_user(alice), conversation, "a.md", b"alpha beta\n")
    pause(
        conversation,
        request(
            "edit_file",
            {
                "file_path": "/uploads/a.md",
                "old_string": "beta",
                "new_string": "gamma",
            },
            schema=None,
        ),
        request(
            "write_file",
            {"file_path": "/new.md", "content": "hi"},
            schema=WRITE_SCHEMA,
            n=1,
        ),
        request(
            "edit_file",
            {"file_path": "/uploads/a.md", "old_string": "zeta", "new_string": "x"},
            schema=None,
            n=2,
        ),
    )
    html = page(alice_client, conversation)
    assert '<span class="sg-diff-add">+alpha gamma</span>' in html
    assert "A new file." in html
    assert "The edit would fail: String not found" in html


def test_another_users_approval_form_is_a_404_and_sends_nothing(
    bob_client: Client, conversation: Any, sent: list
) -> None:
    pause(conversation, request("plan", ARGS))
    response = decide(bob_client, conversation, edit(count="2"), **HTMX)
    assert response.status_code == 404
    assert sent == []


def test_the_inbox_shows_the_fields_and_the_diff_too(
    alice: Any, alice_client: Client, conversation: Any
) -> None:
    other = services.create_conversation(Scope.for_user(alice), title="Other")
    pause(conversation, request("plan", ARGS))
    pause(
        other,
        request("write_file", {"file_path": "/n.md", "content": "x"}, WRITE_SCHEMA),
    )
    html = alice_client.get(reverse("sagents_django:inbox")).content.decode()
    assert 'name="arg-0-1"' in html and "A new file." in html
