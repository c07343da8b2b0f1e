"""The Django admin: what staff see, what they may change, and what stays escaped."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
import swapper
from django.contrib import admin as django_admin
from django.contrib.admin import AdminSite
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

import sagents_django.admin as sagents_admin
from sagents_django.core.approvals import (
    ActionRequest,
    HITLInterrupt,
    SubAgentInterrupt,
)
from sagents_django.core.display import extract_display_items
from sagents_django.core.messages import ContentPart, Message, ToolCall, ToolResult
from sagents_django.core.serialization import StateSerializer
from sagents_django.core.state import State
from sagents_django.core.todo import Todo
from sagents_django.models import (
    AgentRun,
    AgentState,
    DisplayMessage,
    StoredFile,
)

pytestmark = pytest.mark.django_db

Conversation = swapper.load_model("sagents_django", "Conversation")
HOSTILE = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


# Factories ----------------------------------------------------------------------------
def make_conversation(
    owner: User,
    title: str = "",
    *,
    messages: list[Message] = (),  # type: ignore[assignment]
    runs: list[str] = (),  # type: ignore[assignment]
    with_state: bool = True,
) -> Any:
    """A conversation persisted as the runtime would: state, display rows, runs."""
    conversation = Conversation.objects.create(user=owner, title=title)
    for message in messages:
        for sequence, item in enumerate(extract_display_items(message)):
            content = item["content"]
            DisplayMessage.objects.create(
                conversation=conversation,
                message_type=item["message_type"],
                content_type=item["type"],
                content=content,
                sequence=sequence,
                tool_call_id=content.get("call_id")
                or content.get("tool_call_id")
                or "",
            )
    if with_state:
        state = State(messages=list(messages), todos=[Todo(content="Plan the trip")])
        AgentState.objects.create(
            conversation=conversation,
            state_data=StateSerializer.serialize_server_state(state),
        )
    # Oldest first, so the last one given is the latest run.
    start = timezone.now() - timedelta(hours=1)
    for index, status in enumerate(runs):
        run = AgentRun.objects.create(
            conversation=conversation,
            status=status,
            input_tokens=120 + index,
            output_tokens=45,
            error="provider timed out" if status == "error" else "",
        )
        AgentRun.objects.filter(pk=run.pk).update(
            created_at=start + timedelta(minutes=index)
        )
    return conversation


def chat_messages() -> list[Message]:
    return [
        Message.user("What is in notes.md?"),
        Message.assistant(
            [
                ContentPart.thinking("The user wants the file read."),
                ContentPart.text("Let me look."),
            ],
            tool_calls=[
                ToolCall(
                    call_id="call_1", name="read_file", arguments={"path": "notes.md"}
                )
            ],
        ),
        Message.tool(
            [ToolResult(tool_call_id="call_1", name="read_file", content="Buy milk")]
        ),
        Message.assistant("The notes say: Buy milk."),
    ]


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    # admin_user is created with a password; the default hasher costs ~0.3s a user.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def owner() -> User:
    return User.objects.create_user("alice", "alice@example.com")


@pytest.fixture
def other_owner() -> User:
    return User.objects.create_user("bob", "bob@example.com")


@pytest.fixture
def superuser_client(admin_client: Client) -> Client:
    return admin_client


def staff_client(client: Client, *permissions: str) -> Client:
    user = User.objects.create_user("staff", "staff@example.com", is_staff=True)
    for codename in permissions:
        user.user_permissions.add(
            Permission.objects.get(
                content_type__app_label="sagents_django", codename=codename
            )
        )
    client.force_login(user)
    return client


def changelist_url(model: Any) -> str:
    opts = model._meta
    return reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")


def change_url(obj: Any) -> str:
    opts = obj._meta
    return reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])


def add_url(model: Any) -> str:
    opts = model._meta
    return reverse(f"admin:{opts.app_label}_{opts.model_name}_add")


def row_cells(response: Any, text: str) -> dict[str, str]:
    """The cells (field name -> inner HTML) of the changelist row containing ``text``."""
    return dict(
        re.findall(r'class="field-(\w+)[^"]*">(.*?)</t[dh]>', row_html(response, text))
    )


def row_html(response: Any, text: str) -> str:
    """The changelist table row that contains ``text``."""
    rows = [
        r.split("</tr>")[0]
        for r in response.content.decode().split("<tr")
        if text in r.split("</tr>")[0]
    ]
    assert len(rows) == 1, f"expected one row with {text!r}, found {len(rows)}"
    return rows[0]


def result_titles(response: Any) -> set[str]:
    return {c.title for c in response.context["cl"].result_list}


# Changelist ---------------------------------------------------------------------------
def test_a_superuser_sees_each_conversation_with_owner_status_and_message_count(
    superuser_client: Client, owner: User, other_owner: User
) -> None:
    make_conversation(
        owner, "Trip", messages=chat_messages(), runs=["completed", "error"]
    )
    make_conversation(other_owner, "Quiet")

    response = superuser_client.get(changelist_url(Conversation))

    assert response.status_code == 200
    trip = row_cells(response, "Trip")
    assert (trip["user"], trip["status"]) == ("alice", "error")  # the latest run's
    # user text, thinking, text, tool call, tool result, final text
    assert trip["message_count"] == "6"
    quiet = row_cells(response, "Quiet")
    assert (quiet["user"], quiet["status"], quiet["message_count"]) == (
        "bob",
        "idle",
        "0",
    )


def test_last_activity_is_the_latest_of_update_message_and_run(
    superuser_client: Client, owner: User
) -> None:
    conversation = make_conversation(owner, "Old", messages=[Message.user("hi")])
    long_ago = timezone.now() - timedelta(days=30)
    Conversation.objects.filter(pk=conversation.pk).update(
        updated_at=long_ago, created_at=long_ago
    )
    message_at = DisplayMessage.objects.get(conversation=conversation).inserted_at

    response = superuser_client.get(changelist_url(Conversation))

    (row,) = response.context["cl"].result_list
    assert row.last_activity == message_at
    detail = superuser_client.get(change_url(conversation)).content.decode()
    shown = re.search(
        r'field-last_activity.*?<div class="readonly">(.*?)</div>', detail, re.S
    )
    assert shown and "+00:00" not in shown[1]  # formatted, not a datetime's str()


def test_search_finds_conversations_by_title(
    superuser_client: Client, owner: User
) -> None:
    make_conversation(owner, "Holiday in Lisbon")
    make_conversation(owner, "Tax return")

    response = superuser_client.get(changelist_url(Conversation), {"q": "lisbon"})

    assert result_titles(response) == {"Holiday in Lisbon"}


def test_search_finds_conversations_by_message_text_once_each(
    superuser_client: Client, owner: User
) -> None:
    make_conversation(
        owner,
        "Groceries",
        messages=[Message.user("buy MILK please"), Message.assistant("Milk noted.")],
    )
    make_conversation(owner, "Other", messages=[Message.user("buy bread")])

    response = superuser_client.get(changelist_url(Conversation), {"q": "milk"})

    # Two rows match in one conversation; the conversation is listed once.
    assert [c.title for c in response.context["cl"].result_list] == ["Groceries"]


def test_run_status_filter_selects_by_latest_run_or_idle(
    superuser_client: Client, owner: User
) -> None:
    make_conversation(owner, "Failed", runs=["completed", "error"])
    make_conversation(owner, "Recovered", runs=["error", "completed"])
    make_conversation(owner, "Never ran")
    url = changelist_url(Conversation)

    assert result_titles(superuser_client.get(url, {"run_status": "error"})) == {
        "Failed"
    }
    assert result_titles(superuser_client.get(url, {"run_status": "completed"})) == {
        "Recovered"
    }
    assert result_titles(superuser_client.get(url, {"run_status": "idle"})) == {
        "Never ran"
    }


def test_owner_filter_lists_only_owners_with_conversations_and_filters(
    superuser_client: Client, owner: User, other_owner: User
) -> None:
    User.objects.create_user("carol")  # owns nothing: not offered
    make_conversation(owner, "Alice's")
    make_conversation(other_owner, "Bob's")
    url = changelist_url(Conversation)

    response = superuser_client.get(url)
    (owner_spec,) = [
        s for s in response.context["cl"].filter_specs if s.title == "user"
    ]
    offered = {
        choice["display"] for choice in owner_spec.choices(response.context["cl"])
    }
    assert offered == {"All", "alice", "bob"}
    assert result_titles(superuser_client.get(url, {"user__id__exact": owner.pk})) == {
        "Alice's"
    }


def test_created_date_filter_hides_older_conversations(
    superuser_client: Client, owner: User
) -> None:
    make_conversation(owner, "Recent")
    old = make_conversation(owner, "Ancient")
    Conversation.objects.filter(pk=old.pk).update(
        created_at=timezone.now() - timedelta(days=60)
    )
    url = changelist_url(Conversation)
    response = superuser_client.get(url)
    (spec,) = [
        s
        for s in response.context["cl"].filter_specs
        if getattr(s, "field_path", None) == "created_at"
    ]
    (past_week,) = [
        c for c in spec.choices(response.context["cl"]) if c["display"] == "Past 7 days"
    ]

    response = superuser_client.get(url + past_week["query_string"])

    assert result_titles(response) == {"Recent"}


def test_the_changelist_query_count_does_not_grow_with_its_rows(
    superuser_client: Client,
    owner: User,
    other_owner: User,
    django_assert_max_num_queries: Any,
) -> None:
    url = changelist_url(Conversation)
    for index in range(2):
        make_conversation(
            owner, f"A{index}", messages=chat_messages(), runs=["completed"]
        )
    with CaptureQueriesContext(connection) as few:
        superuser_client.get(url)
    for index in range(8):
        make_conversation(
            other_owner, f"B{index}", messages=chat_messages(), runs=["error"]
        )

    with django_assert_max_num_queries(len(few.captured_queries)):
        response = superuser_client.get(url)

    assert len(response.context["cl"].result_list) == 10
    # session, user, counts, the page of rows, the owner filter's choices...
    assert len(few.captured_queries) <= 8


# Change page --------------------------------------------------------------------------
def test_the_detail_page_renders_display_messages_as_a_chat(
    superuser_client: Client, owner: User
) -> None:
    conversation = make_conversation(owner, "Notes", messages=chat_messages())

    response = superuser_client.get(change_url(conversation))

    html = response.content.decode()
    assert response.status_code == 200
    assert re.search(
        r'sagents-bubble--user">\s*<div class="sagents-meta">user · [^<]*</div>\s*'
        r'<div class="sagents-text sagents-md"><p>What is in notes.md\?</p>\s*</div>',
        html,
    )
    assert "<p>The notes say: Buy milk.</p>" in html
    # Thinking is collapsed (a closed <details>).
    assert re.search(
        r'<details class="sagents-thinking">\s*<summary>Thinking[^<]*</summary>\s*'
        r'<div class="sagents-text sagents-md"><p>The user wants the file read.</p>',
        html,
    )
    # One tool card: name, status, pretty arguments, and its result folded in.
    assert '<span class="sagents-tool-name">read_file</span>' in html
    assert (
        '<span class="sagents-badge sagents-badge--completed">completed</span>' in html
    )
    assert (
        '<pre class="sagents-json">{\n  &quot;path&quot;: &quot;notes.md&quot;\n}</pre>'
        in html
    )
    assert '<pre class="sagents-json">Buy milk</pre>' in html
    assert html.count('class="sagents-tool ') == 1
    # Not the raw JSON column.
    assert "{&quot;text&quot;:" not in html


def test_a_failed_tool_call_is_marked_as_an_error_with_its_result(
    superuser_client: Client, owner: User
) -> None:
    conversation = make_conversation(
        owner,
        "Oops",
        messages=[
            Message.assistant("", tool_calls=[ToolCall(call_id="c9", name="rm")]),
            Message.tool(
                [
                    ToolResult(
                        tool_call_id="c9", name="rm", content="denied", is_error=True
                    )
                ]
            ),
        ],
    )

    html = superuser_client.get(change_url(conversation)).content.decode()

    assert 'class="sagents-tool sagents-tool--error"' in html
    assert '<span class="sagents-badge sagents-badge--error">error</span>' in html
    assert '<pre class="sagents-json sagents-json--error">denied</pre>' in html


def test_hostile_message_text_is_escaped_everywhere_on_the_detail_page(
    superuser_client: Client, owner: User
) -> None:
    conversation = make_conversation(
        owner,
        HOSTILE,
        messages=[
            Message.user(HOSTILE),
            Message.assistant(
                [ContentPart.thinking(HOSTILE)],
                tool_calls=[
                    ToolCall(call_id="c", name=HOSTILE, arguments={"x": HOSTILE})
                ],
            ),
            Message.tool([ToolResult(tool_call_id="c", name=HOSTILE, content=HOSTILE)]),
        ],
    )
    conversation.metadata = {"note": HOSTILE}
    conversation.save()

    response = superuser_client.get(change_url(conversation))

    html = response.content.decode()
    assert HOSTILE not in html
    assert f'<div class="sagents-text sagents-md"><p>{ESCAPED}</p>' in html
    assert f'<span class="sagents-tool-name">{ESCAPED}</span>' in html
    assert html.count(ESCAPED) >= 6  # bubble, thinking, tool name, args, result, state


def test_the_agent_state_is_shown_as_indented_escaped_json(
    superuser_client: Client, owner: User
) -> None:
    conversation = make_conversation(
        owner, "Stateful", messages=[Message.user("a < b")]
    )

    response = superuser_client.get(change_url(conversation))

    html = response.content.decode()
    assert re.search(r'<pre class="sagents-json">\{\n  &quot;version&quot;: 1,\n', html)
    assert "&quot;content&quot;: &quot;a &lt; b&quot;" in html
    assert "1 message · \n      1 todo" in html or re.search(
        r"1 message\s*·\s*1 todo", html
    )


def test_a_conversation_without_state_says_so(
    superuser_client: Client, owner: User
) -> None:
    conversation = make_conversation(owner, "Fresh", with_state=False)

    response = superuser_client.get(change_url(conversation))

    assert b"No agent state stored yet" in response.content
    assert b"No messages yet." in response.content


def empty_inline(prefix: str) -> dict[str, str]:
    """The management form of an inline with no rows (the sharing inlines)."""
    return {
        f"{prefix}-TOTAL_FORMS": "0",
        f"{prefix}-INITIAL_FORMS": "0",
        f"{prefix}-MIN_NUM_FORMS": "0",
        f"{prefix}-MAX_NUM_FORMS": "1000",
    }


def test_the_run_history_is_a_read_only_inline(
    superuser_client: Client, owner: User
) -> None:
    conversation = make_conversation(owner, "Runs", runs=["completed", "error"])

    response = superuser_client.get(change_url(conversation))

    html = response.content.decode()
    formsets = response.context["inline_admin_formsets"]
    (formset,) = [f for f in formsets if f.opts.model is AgentRun]
    assert not formset.has_add_permission and not formset.has_change_permission
    cells = re.findall(r'<td class="field-(\w+)">\s*<p>(.*?)</p>', html)
    assert ("error", "provider timed out") in cells
    assert ("tokens", "121 / 45") in cells
    assert [v for k, v in cells if k == "status"] == ["error", "completed"]
    assert 'name="runs-0-status"' not in html  # no editable widgets


def test_only_the_title_is_editable_and_the_owner_cannot_be_moved(
    superuser_client: Client, owner: User, other_owner: User
) -> None:
    conversation = make_conversation(owner, "Before", runs=["completed"])

    response = superuser_client.post(
        change_url(conversation),
        {
            "title": "After",
            "user": other_owner.pk,
            "runs-TOTAL_FORMS": "1",
            "runs-INITIAL_FORMS": "1",
            "runs-MIN_NUM_FORMS": "0",
            "runs-MAX_NUM_FORMS": "1000",
            "runs-0-id": str(conversation.runs.get().pk),
            "runs-0-conversation": str(conversation.pk),
            **empty_inline("shares"),
            **empty_inline("share_links"),
        },
    )

    assert response.status_code == 302
    conversation.refresh_from_db()
    assert conversation.title == "After"
    assert conversation.user == owner


def test_the_display_message_cap_is_announced(
    superuser_client: Client, owner: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sagents_django.admin.conversations.CHAT_LIMIT", 2)
    conversation = make_conversation(
        owner, "Long", messages=[Message.user(f"message {i}") for i in range(5)]
    )

    response = superuser_client.get(change_url(conversation))

    html = response.content.decode()
    assert "Showing the latest 2 of 5 display messages." in html
    chat = html[
        html.index('<div class="sagents-chat">') : html.index(
            'class="module sagents-state"'
        )
    ]
    texts = re.findall(r'<div class="sagents-text sagents-md"><p>(.*?)</p>', chat)
    assert texts == ["message 3", "message 4"]


# Actions ------------------------------------------------------------------------------
def post_action(
    client: Client, action: str, conversations: list[Any], **extra: str
) -> Any:
    return client.post(
        changelist_url(Conversation),
        {
            "action": action,
            "_selected_action": [str(c.pk) for c in conversations],
            **extra,
        },
    )


def test_export_downloads_one_conversations_state_as_a_json_attachment(
    superuser_client: Client, owner: User
) -> None:
    conversation = make_conversation(owner, "Export me", messages=chat_messages())

    response = post_action(superuser_client, "export_state", [conversation])

    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
    assert (
        response["Content-Disposition"]
        == f'attachment; filename="conversation-{conversation.pk}-state.json"'
    )
    state = StateSerializer.deserialize_server_state("x", json.loads(response.content))
    assert [m.role for m in state.messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert state.todos[0].content == "Plan the trip"


def test_export_of_several_conversations_is_an_object_keyed_by_id(
    superuser_client: Client, owner: User
) -> None:
    first = make_conversation(owner, "One", messages=[Message.user("one")])
    second = make_conversation(owner, "Two", with_state=False)

    response = post_action(superuser_client, "export_state", [first, second])

    assert 'filename="conversations-state.json"' in response["Content-Disposition"]
    body = json.loads(response.content)
    assert set(body) == {str(first.pk), str(second.pk)}
    first_state = StateSerializer.deserialize_server_state(None, body[str(first.pk)])
    assert first_state.messages[0].text == "one"
    # A conversation that never ran exports the empty state it would load.
    second_state = StateSerializer.deserialize_server_state(None, body[str(second.pk)])
    assert second_state.messages == [] and second_state.todos == []


def test_reset_asks_for_confirmation_before_changing_anything(
    superuser_client: Client, owner: User
) -> None:
    conversation = make_conversation(owner, "Keep for now", messages=chat_messages())

    response = post_action(superuser_client, "reset_conversations", [conversation])

    assert response.status_code == 200
    assert response.templates[0].name == (
        "admin/sagents_django/conversation/reset_confirmation.html"
    )
    html = response.content.decode()
    assert '<input type="hidden" name="post" value="yes">' in html
    assert f'name="_selected_action" value="{conversation.pk}"' in html
    assert "Keep for now (6 messages)" in html
    assert DisplayMessage.objects.filter(conversation=conversation).count() == 6


def test_confirmed_reset_is_the_runtimes_reset_of_only_the_selected(
    superuser_client: Client, owner: User
) -> None:
    target = make_conversation(owner, "Target", messages=chat_messages())
    bystander = make_conversation(owner, "Bystander", messages=chat_messages())
    bystander_state = AgentState.objects.get(conversation=bystander).state_data
    before = StateSerializer.deserialize_server_state(
        None, AgentState.objects.get(conversation=target).state_data
    )

    response = post_action(
        superuser_client, "reset_conversations", [target], post="yes"
    )

    assert response.status_code == 302
    state = StateSerializer.deserialize_server_state(
        None, AgentState.objects.get(conversation=target).state_data
    )
    # agent_server.reset: what the agent remembers goes, its metadata stays, and the
    # transcript keeps its rows with a note after them.
    assert (state.messages, state.todos) == ([], [])
    assert state.metadata == before.metadata
    rows = list(DisplayMessage.objects.filter(conversation=target).order_by("pk"))
    assert len(rows) == 7
    assert (rows[-1].message_type, rows[-1].content_type) == ("system", "notification")
    assert DisplayMessage.objects.filter(conversation=bystander).count() == 6
    assert AgentState.objects.get(conversation=bystander).state_data == bystander_state
    assert Conversation.objects.filter(pk=target.pk).exists()
    entry = LogEntry.objects.get(object_id=str(target.pk))
    assert entry.action_flag == CHANGE
    assert entry.get_change_message() == "Reset the agent state."


def test_reset_skips_a_conversation_with_a_running_turn(
    superuser_client: Client, owner: User
) -> None:
    busy = make_conversation(owner, "Busy", messages=chat_messages(), runs=["running"])

    response = post_action(
        superuser_client, "reset_conversations", [busy], post="yes", follow="1"
    )

    assert DisplayMessage.objects.filter(conversation=busy).count() == 6
    assert not LogEntry.objects.exists()
    response = superuser_client.get(changelist_url(Conversation))
    assert (
        "Skipped 1 conversation with a queued or running turn (or no owner to act "
        "for)." in [str(m) for m in response.context["messages"]]
    )


# Who may do what ----------------------------------------------------------------------
def test_a_non_staff_user_is_redirected_to_the_admin_login(
    client: Client, owner: User
) -> None:
    client.force_login(owner)
    url = changelist_url(Conversation)

    response = client.get(url)

    assert response.status_code == 302
    assert response["Location"] == f"{reverse('admin:login')}?next={url}"


def test_a_staff_user_without_permissions_gets_403(client: Client, owner: User) -> None:
    conversation = make_conversation(owner, "Private")
    staff = staff_client(client)

    assert staff.get(changelist_url(Conversation)).status_code == 403
    assert staff.get(change_url(conversation)).status_code == 403
    assert staff.get(changelist_url(DisplayMessage)).status_code == 403
    response = post_action(staff, "export_state", [conversation])
    assert response.status_code == 403


def test_viewing_conversations_alone_shows_neither_messages_state_nor_actions(
    client: Client, owner: User
) -> None:
    conversation = make_conversation(
        owner, "Need to know", messages=[Message.user(HOSTILE)]
    )
    staff = staff_client(client, "view_conversation")

    response = staff.get(change_url(conversation))

    assert response.status_code == 200
    assert b"You do not have permission to view display messages." in response.content
    assert b"You do not have permission to view agent states." in response.content
    assert ESCAPED.encode() not in response.content
    changelist = staff.get(changelist_url(Conversation))
    assert changelist.context["action_form"] is None  # no action is available
    # A forged export is refused: the action is not available to this user.
    forged = post_action(staff, "export_state", [conversation])
    assert forged["Content-Type"].startswith("text/html")
    assert forged.get("Content-Disposition") is None


def test_export_and_reset_follow_the_state_and_message_permissions(
    client: Client, owner: User
) -> None:
    make_conversation(owner, "x")
    staff = staff_client(
        client, "view_conversation", "view_agentstate", "change_agentstate"
    )

    response = staff.get(changelist_url(Conversation))

    actions = {
        name for name, _ in response.context["action_form"].fields["action"].choices
    }
    # Reset also adds a note to the transcript, which this user may not do.
    assert actions == {"", "export_state"}


def test_only_superusers_may_delete_conversations_and_it_cascades(
    client: Client, superuser_client: Client, owner: User
) -> None:
    conversation = make_conversation(
        owner, "Doomed", messages=chat_messages(), runs=["completed"]
    )
    staff = staff_client(client, "view_conversation", "delete_conversation")
    delete_url = reverse(
        f"admin:{Conversation._meta.app_label}_{Conversation._meta.model_name}_delete",
        args=[conversation.pk],
    )

    assert staff.post(delete_url, {"post": "yes"}).status_code == 403
    assert superuser_client.post(delete_url, {"post": "yes"}).status_code == 302

    assert not Conversation.objects.filter(pk=conversation.pk).exists()
    assert not DisplayMessage.objects.exists()
    assert not AgentRun.objects.exists()
    assert not AgentState.objects.exists()


@pytest.mark.parametrize(
    "model", [Conversation, DisplayMessage, AgentRun, AgentState, StoredFile]
)
def test_nobody_adds_rows_through_the_admin(
    superuser_client: Client, model: Any
) -> None:
    assert superuser_client.get(add_url(model)).status_code == 403
    assert superuser_client.post(add_url(model), {}).status_code == 403


def test_read_only_admins_refuse_a_change_even_from_a_superuser(
    superuser_client: Client, owner: User
) -> None:
    conversation = make_conversation(
        owner, "c", messages=[Message.user("original")], runs=["error"]
    )
    message = DisplayMessage.objects.get(conversation=conversation)
    run = AgentRun.objects.get(conversation=conversation)
    state = AgentState.objects.get(conversation=conversation)
    stored = StoredFile.objects.create(
        scope_kind="user", scope_id="1", path="/a.txt", content="a", size=1
    )

    for obj, data in [
        (message, {"content": '{"text": "forged"}', "status": "failed"}),
        (run, {"status": "completed", "error": ""}),
        (state, {"state_data": "{}"}),
        (stored, {"content": "forged", "path": "/b.txt"}),
    ]:
        assert superuser_client.get(change_url(obj)).status_code == 200  # view only
        assert superuser_client.post(change_url(obj), data).status_code == 403

    message.refresh_from_db()
    run.refresh_from_db()
    stored.refresh_from_db()
    assert message.content == {"text": "original"}
    assert run.status == "error"
    assert stored.content == "a"


# The other admins ---------------------------------------------------------------------
def test_display_messages_filter_by_type_and_search_by_text(
    superuser_client: Client, owner: User
) -> None:
    make_conversation(owner, "Notes", messages=chat_messages())
    url = changelist_url(DisplayMessage)

    calls = superuser_client.get(url, {"content_type__exact": "tool_call"})
    thinking = superuser_client.get(url, {"q": "wants"})
    users = superuser_client.get(url, {"message_type__exact": "user"})

    assert [m.content["name"] for m in calls.context["cl"].result_list] == ["read_file"]
    assert [m.content_type for m in thinking.context["cl"].result_list] == ["thinking"]
    assert [m.content["text"] for m in users.context["cl"].result_list] == [
        "What is in notes.md?"
    ]


def test_a_display_message_page_shows_it_rendered_and_escaped(
    superuser_client: Client, owner: User
) -> None:
    conversation = make_conversation(owner, "x", messages=[Message.assistant(HOSTILE)])
    message = DisplayMessage.objects.get(conversation=conversation)

    html = superuser_client.get(change_url(message)).content.decode()

    assert HOSTILE not in html
    assert f'<div class="sagents-text sagents-md"><p>{ESCAPED}</p>' in html
    assert "&quot;text&quot;: &quot;&lt;script&gt;" in html  # the JSON, indented


def test_runs_filter_by_status_and_drill_down_by_date(
    superuser_client: Client, owner: User
) -> None:
    make_conversation(owner, "a", runs=["completed", "error"])
    url = changelist_url(AgentRun)
    today = timezone.now()

    errors = superuser_client.get(url, {"status__exact": "error"})
    this_year = superuser_client.get(url, {"created_at__year": today.year})
    last_year = superuser_client.get(url, {"created_at__year": today.year - 1})

    assert [r.status for r in errors.context["cl"].result_list] == ["error"]
    assert this_year.context["cl"].result_count == 2
    assert last_year.context["cl"].result_count == 0
    assert b'<nav class="toplinks">' in errors.content  # the date hierarchy


def test_an_agent_state_page_shows_the_state_as_indented_json(
    superuser_client: Client, owner: User
) -> None:
    conversation = make_conversation(owner, "x", messages=[Message.user(HOSTILE)])
    state = AgentState.objects.get(conversation=conversation)

    html = superuser_client.get(change_url(state)).content.decode()

    assert HOSTILE not in html
    assert re.search(r'<pre class="sagents-json">\{\n  &quot;version&quot;: 1,', html)
    assert "envelope version 1, 1 messages, 1 todos" in html


@pytest.mark.parametrize(
    ("interrupt", "shown"),
    [
        pytest.param(
            HITLInterrupt(
                action_requests=[
                    ActionRequest(tool_call_id="w1", tool_name="write_file"),
                    ActionRequest(tool_call_id="d1", tool_name="delete_file"),
                ]
            ).to_dict(),
            "waiting for a decision on write_file, delete_file",
            id="hitl",
        ),
        pytest.param(
            SubAgentInterrupt(
                subagent="calculator",
                subagent_id="p.sub.t1",
                tool_call_id="t1",
                interrupt=HITLInterrupt(
                    action_requests=[ActionRequest(tool_call_id="a1", tool_name="add")]
                ),
            ).to_dict(),
            "waiting for a decision on calculator: add",
            id="subagent",
        ),
        pytest.param(
            {"type": "ask", "question": HOSTILE},
            "waiting for a decision on an interrupt of type ask",
            id="custom",
        ),
        pytest.param(
            {"action_requests": "garbage"},
            "waiting for a decision on an unreadable interrupt",
            id="malformed",
        ),
    ],
)
def test_an_agent_state_page_says_what_a_pending_interrupt_waits_for(
    superuser_client: Client, owner: User, interrupt: dict, shown: str
) -> None:
    conversation = make_conversation(owner, "x")
    state = AgentState.objects.get(conversation=conversation)
    state.state_data["state"]["interrupt_data"] = interrupt
    state.save()

    html = superuser_client.get(change_url(state)).content.decode()
    conversation_html = superuser_client.get(change_url(conversation)).content.decode()

    assert shown in html
    assert HOSTILE not in html
    assert shown.replace("waiting for", "· waiting for") in " ".join(
        conversation_html.split()
    )


def test_stored_files_list_scope_path_size_and_type_and_show_content_escaped(
    superuser_client: Client,
) -> None:
    stored = StoredFile.objects.create(
        scope_kind="user",
        scope_id="42",
        path="/notes/page.html",
        content=HOSTILE,
        size=len(HOSTILE),
        mime_type="text/html",
    )

    listing = superuser_client.get(changelist_url(StoredFile))
    detail = superuser_client.get(change_url(stored)).content.decode()

    cells = row_cells(listing, "/notes/page.html")
    assert (cells["scope_kind"], cells["scope_id"]) == ("user", "42")
    assert (cells["size"], cells["mime_type"]) == (str(len(HOSTILE)), "text/html")
    assert HOSTILE not in detail
    assert f'<pre class="sagents-json">{ESCAPED}</pre>' in detail


# Registration -------------------------------------------------------------------------
def test_the_active_conversation_model_is_registered_with_conversation_admin() -> None:
    model_admin = django_admin.site.get_model_admin(Conversation)

    assert isinstance(model_admin, sagents_admin.ConversationAdmin)


def test_a_swapped_conversation_model_is_left_for_the_host_to_register(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    site = AdminSite(name="swapped")
    monkeypatch.setattr(swapper, "is_swapped", lambda app, model: "team.Conversation")

    sagents_admin.register(site)

    assert not site.is_registered(Conversation)
    assert site.is_registered(DisplayMessage) and site.is_registered(AgentState)
