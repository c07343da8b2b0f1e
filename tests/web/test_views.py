"""Every chat view against bad input: strangers, other tenants, forged or missing
CSRF tokens, malformed and oversized values. Nothing bad input sends reaches
``agent_server`` (the ``sent`` fixture records what would have)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from sagents_django import services
from sagents_django.core.limits import MAX_FILE_BYTES
from sagents_django.models import AgentState, StoredFile
from sagents_django.scope import Scope
from sagents_django.ui import files
from tests.django.factories import envelope
from tests.web.hashes import hashed

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
POSTS = ["send", "stop", "retry", "decide", "rename", "delete", "upload"]
GETS = ["conversation", "older", "files", "file", "download", "delete"]


def url(name: str, conversation: Any) -> str:
    return reverse(f"sagents_django:{name}", args=[conversation.pk])


def interrupt(conversation: Any, *names: str) -> None:
    requests = [
        {
            "tool_call_id": f"call-{n}",
            "tool_name": name,
            "arguments": {"file_path": "/a.md", "content": "x"},
            "allowed_decisions": ["approve", "edit", "reject"],
        }
        for n, name in enumerate(names)
    ]
    AgentState.objects.create(
        conversation=conversation,
        state_data=envelope(
            interrupt_data={"type": "hitl", "action_requests": requests}
        ),
    )


@pytest.mark.parametrize("name", POSTS + GETS)
def test_a_stranger_is_sent_to_sign_in_from_every_conversation_view(
    client: Client, conversation: Any, name: str, sent: list
) -> None:
    method = client.post if name in POSTS else client.get
    response = method(url(name, conversation))
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]
    assert sent == []


@pytest.mark.parametrize("name", POSTS + GETS)
def test_another_users_conversation_is_not_found_on_every_view(
    alice: Any, bob_client: Client, conversation: Any, name: str, sent: list
) -> None:
    method = bob_client.post if name in POSTS else bob_client.get
    response = method(url(name, conversation) + "?path=/notes/demo.md&before=1")
    assert response.status_code == 404
    assert sent == []
    assert services.get_conversation(Scope.for_user(alice), conversation.pk)


def test_a_malformed_conversation_id_is_not_found(alice_client: Client) -> None:
    assert alice_client.get("/c/not-a-uuid/").status_code == 404
    assert (
        alice_client.get("/c/00000000-0000-0000-0000-000000000000/").status_code == 404
    )


@pytest.mark.parametrize("name", POSTS)
def test_a_post_without_a_csrf_token_is_refused(
    alice: Any, conversation: Any, name: str, sent: list
) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    response = client.post(url(name, conversation), {"text": "hi", "title": "x"})
    assert response.status_code == 403
    assert sent == []
    conversation.refresh_from_db()
    assert conversation.title == "Alice's"


def test_new_without_a_csrf_token_is_refused(alice: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post(reverse("sagents_django:new")).status_code == 403


def test_views_refuse_the_wrong_method(alice_client: Client, conversation: Any) -> None:
    assert alice_client.get(url("send", conversation)).status_code == 405
    assert alice_client.post(url("conversation", conversation)).status_code == 405


def test_an_empty_or_oversized_message_sends_nothing(
    alice_client: Client, conversation: Any, sent: list, settings: Any
) -> None:
    blank = alice_client.post(url("send", conversation), {"text": "  \n "}, **HTMX)
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = None
    huge = alice_client.post(
        url("send", conversation), {"text": "x" * (8 * 1024 * 1024 + 1)}, **HTMX
    )
    plain = alice_client.post(url("send", conversation), {"text": ""})
    assert blank.status_code == 422 and b"Write a message" in blank.content
    assert huge.status_code == 422
    assert plain.status_code == 302  # back to the page, the error as a message
    assert sent == []


def test_a_message_is_handed_to_the_agent_server(
    alice_client: Client, conversation: Any, sent: list
) -> None:
    response = alice_client.post(url("send", conversation), {"text": "Hi"}, **HTMX)
    assert response.status_code == 204
    assert sent == [("add_message", "Hi")]


@pytest.mark.parametrize("before", ["abc", "-1", "1" * 30, "999999"])
def test_a_bad_history_cursor_is_bad_input(
    alice_client: Client, conversation: Any, before: str
) -> None:
    assert (
        alice_client.get(url("older", conversation), {"before": before}).status_code
        == 400
    )
    page = alice_client.get(url("conversation", conversation), {"before": before})
    assert page.status_code == 400


def test_another_conversations_row_is_no_cursor_here(
    alice: Any, alice_client: Client, conversation: Any
) -> None:
    scope = Scope.for_user(alice)
    other = services.create_conversation(scope)
    row = services.append_text_message(scope, other.pk, "user", "elsewhere")
    response = alice_client.get(url("older", conversation), {"before": row.pk})
    assert response.status_code == 400


def test_older_history_comes_a_page_at_a_time(
    alice: Any, alice_client: Client, conversation: Any
) -> None:
    scope = Scope.for_user(alice)
    rows = [
        services.append_text_message(scope, conversation.pk, "user", f"m{n}")
        for n in range(130)
    ]
    page = alice_client.get(url("conversation", conversation)).content.decode()
    assert f'id="sg-msg-{rows[-1].pk}"' in page
    assert f'id="sg-msg-{rows[29].pk}"' not in page
    assert f"before={rows[30].pk}" in page
    older = alice_client.get(url("older", conversation), {"before": rows[30].pk})
    html = older.content.decode()
    assert (
        f'id="sg-msg-{rows[0].pk}"' in html and f'id="sg-msg-{rows[30].pk}"' not in html
    )


def test_a_title_longer_than_255_characters_changes_nothing(
    alice_client: Client, conversation: Any
) -> None:
    response = alice_client.post(
        url("rename", conversation), {"title": "x" * 256}, **HTMX
    )
    assert response.status_code == 422
    conversation.refresh_from_db()
    assert conversation.title == "Alice's"


def test_a_rename_returns_the_new_title(
    alice_client: Client, conversation: Any
) -> None:
    response = alice_client.post(
        url("rename", conversation), {"title": "<b>New</b>"}, **HTMX
    )
    assert response.status_code == 200
    assert b"&lt;b&gt;New&lt;/b&gt;" in response.content


def test_delete_asks_first_then_deletes(
    alice_client: Client, conversation: Any
) -> None:
    ask = alice_client.get(url("delete", conversation))
    assert ask.status_code == 200 and b"Delete the conversation" in ask.content
    assert services.conversation_model().objects.filter(pk=conversation.pk).exists()
    done = alice_client.post(url("delete", conversation))
    assert done.status_code == 302
    assert not services.conversation_model().objects.filter(pk=conversation.pk).exists()


@pytest.mark.parametrize(
    ("post", "error"),
    [
        ({}, b"choose approve, edit or reject"),
        ({"decision-0": "maybe"}, b"choose approve, edit or reject"),
        (
            {"decision-0": "edit", "arguments-0": "{not json", "decision-1": "reject"},
            b"not JSON",
        ),
        (
            {"decision-0": "edit", "arguments-0": "[1, 2]", "decision-1": "reject"},
            b"JSON object",
        ),
        ({"decision-0": "edit", "arguments-0": "x" * 100_001}, b"too long"),
        ({"decision-0": "reject", "message-0": "x" * 10_001}, b"too long"),
        ({"decision-0": "approve"}, b"Action 2"),
    ],
)
def test_a_malformed_decision_form_sends_nothing(
    alice_client: Client, conversation: Any, sent: list, post: dict, error: bytes
) -> None:
    interrupt(conversation, "write_file", "delete_file")
    response = alice_client.post(url("decide", conversation), post, **HTMX)
    assert response.status_code == 422
    assert error in response.content
    assert sent == []


def test_the_decisions_of_every_action_request_go_together(
    alice_client: Client, conversation: Any, sent: list
) -> None:
    interrupt(conversation, "write_file", "delete_file")
    response = alice_client.post(
        url("decide", conversation),
        hashed(
            conversation,
            {
                "decision-0": "edit",
                "arguments-0": json.dumps({"file_path": "/b.md", "content": "y"}),
                "decision-1": "reject",
                "message-1": "keep it",
            },
        ),
        **HTMX,
    )
    assert response.status_code == 200
    assert sent == [
        (
            "resume",
            [
                {"type": "edit", "arguments": {"file_path": "/b.md", "content": "y"}},
                {"type": "reject", "message": "keep it"},
            ],
        )
    ]


def test_a_decision_with_nothing_pending_is_refused(
    alice_client: Client, conversation: Any, sent: list
) -> None:
    response = alice_client.post(url("decide", conversation), {"decision-0": "approve"})
    assert response.status_code == 302
    assert sent == []


def test_the_inbox_lists_only_the_users_own_pending_approvals(
    alice_client: Client, bob_client: Client, conversation: Any
) -> None:
    interrupt(conversation, "write_file")
    mine = alice_client.get(reverse("sagents_django:inbox")).content.decode()
    theirs = bob_client.get(reverse("sagents_django:inbox")).content.decode()
    assert "write_file" in mine and "Alice&#x27;s" in mine
    assert "write_file" not in theirs
    count = alice_client.get(reverse("sagents_django:inbox_count"))
    assert b">1</span>" in count.content


def test_an_upload_lands_in_the_agents_uploads_directory(
    alice_client: Client, conversation: Any, sent: list
) -> None:
    upload = SimpleUploadedFile("../../etc/passwd", b"root", content_type="text/plain")
    response = alice_client.post(url("upload", conversation), {"file": upload}, **HTMX)
    assert response.status_code == 204
    row = StoredFile.objects.get(scope_kind="agent", scope_id=conversation.agent_id)
    assert row.path == "/uploads/passwd" and row.content == "root"


@pytest.mark.parametrize(
    ("name", "data", "error"),
    [
        ("big.txt", b"x" * (MAX_FILE_BYTES + 1), b"too large"),
        ("bin.dat", b"\xff\xfe\x00\x01", b"UTF-8"),
    ],
)
def test_a_bad_upload_stores_nothing(
    alice_client: Client, conversation: Any, name: str, data: bytes, error: bytes
) -> None:
    upload = SimpleUploadedFile(name, data)
    response = alice_client.post(url("upload", conversation), {"file": upload}, **HTMX)
    assert response.status_code == 422 and error in response.content
    assert not StoredFile.objects.exists()


@pytest.mark.parametrize("name", ["..", ".", "dir/", "  "])
def test_an_upload_named_nothing_is_refused(
    alice: Any, conversation: Any, name: str
) -> None:
    with pytest.raises(files.UploadError):
        files.upload(Scope.for_user(alice), conversation, name, b"x")
    assert not StoredFile.objects.exists()


def test_an_upload_without_a_file_is_refused(
    alice_client: Client, conversation: Any
) -> None:
    response = alice_client.post(url("upload", conversation), {}, **HTMX)
    assert response.status_code == 422


def test_a_download_is_always_a_plain_text_attachment(
    alice: Any, alice_client: Client, conversation: Any
) -> None:
    files.upload(
        Scope.for_user(alice), conversation, "page.html", b"<script>x</script>"
    )
    response = alice_client.get(
        url("download", conversation), {"path": "/uploads/page.html"}
    )
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["Content-Disposition"].startswith("attachment;")
    assert response["X-Content-Type-Options"] == "nosniff"
    opened = alice_client.get(url("file", conversation), {"path": "/uploads/page.html"})
    assert b"&lt;script&gt;" in opened.content and b"<script>x" not in opened.content


@pytest.mark.parametrize("path", ["", "/nope.md", "../../etc/passwd", "/" + "a" * 2000])
def test_a_missing_or_bad_file_path_is_not_found(
    alice_client: Client, conversation: Any, path: str
) -> None:
    assert (
        alice_client.get(url("download", conversation), {"path": path}).status_code
        == 404
    )
    assert (
        alice_client.get(url("file", conversation), {"path": path}).status_code == 404
    )


def test_the_inspector_is_for_staff_and_only_their_own_conversations(
    alice: Any, alice_client: Client, bob: Any, bob_client: Client, conversation: Any
) -> None:
    assert alice_client.get(url("inspector", conversation)).status_code == 302
    bob.is_staff = True
    bob.save()
    assert bob_client.get(url("inspector", conversation)).status_code == 404
    alice.is_staff = True
    alice.save()
    page = alice_client.get(url("inspector", conversation))
    assert page.status_code == 200 and b"Middleware" in page.content


def test_search_finds_titles_and_messages_and_survives_odd_queries(
    alice: Any, alice_client: Client, conversation: Any
) -> None:
    services.append_text_message(
        Scope.for_user(alice), conversation.pk, "user", "bring lemonade"
    )
    found = alice_client.get("/", {"q": "lemonade"}).content.decode()
    assert "bring <mark>lemonade</mark>" in found
    for query in ["   ", "%", "x" * 5000, "\x00"]:
        assert alice_client.get("/", {"q": query}).status_code == 200


def test_search_shows_one_result_per_conversation_with_a_plain_text_snippet(
    alice: Any, alice_client: Client, conversation: Any
) -> None:
    scope = Scope.for_user(alice)
    other = services.create_conversation(scope, title="Unrelated")
    for text in ["**Lemonade** is [sweet](https://x.test)", "more `lemonade` here"]:
        services.append_text_message(scope, conversation.pk, "assistant", text)
    services.append_text_message(
        scope, other.pk, "user", "<b>lemonade</b> & <script>x</script>"
    )
    html = alice_client.get("/", {"q": "LEMONADE"}).content.decode()
    assert html.count('class="sg-snippet"') == 2  # one per conversation
    assert "more <mark>lemonade</mark> here" in html  # the newest, no backticks
    assert "**" not in html and "`lemonade`" not in html
    assert "&lt;b&gt;<mark>lemonade</mark>&lt;/b&gt; &amp; &lt;script&gt;" in html
    assert 'aria-label="Your conversations"' not in html  # the list is hidden
    assert "ws-connect" not in html  # and not followed while searching


def test_the_theme_switch_sets_a_cookie_and_comes_back_without_javascript(
    client: Client, alice_client: Client, conversation: Any
) -> None:
    page = url("conversation", conversation)
    answer = alice_client.post("/theme/", {"theme": "toggle", "next": page})
    assert answer.status_code == 302 and answer["Location"] == page
    assert answer.cookies["sg_theme"].value == "dark"
    assert (
        '<html lang="en" data-theme="dark">' in alice_client.get(page).content.decode()
    )
    again = alice_client.post("/theme/", {"theme": "toggle", "next": page})
    assert again.cookies["sg_theme"].value == "light"
    away = client.post("/theme/", {"theme": "dark", "next": "https://evil.test/"})
    assert away["Location"] == "/"  # signed out works, and never leaves the site
    assert client.post("/theme/", {"theme": "<x>"}).status_code == 400
    client.cookies["sg_theme"] = '"><script>'
    assert "data-theme" not in client.get("/accounts/login/").content.decode()


def test_the_conversation_page_has_the_sidebar_with_the_current_one_marked(
    alice: Any, alice_client: Client, bob: Any, conversation: Any
) -> None:
    services.create_conversation(Scope.for_user(alice), title="Second")
    services.create_conversation(Scope.for_user(bob), title="Bob's secret")
    html = alice_client.get(url("conversation", conversation)).content.decode()
    assert 'aria-current="page"><span id="sg-title-' in html
    assert "Second" in html and "Bob&#x27;s secret" not in html
    assert 'href="#sg-main"' in html and 'id="sg-main"' in html  # the skip link
    assert "autofocus" in html


def test_the_chat_pages_send_a_csp_without_inline_scripts(
    alice_client: Client, conversation: Any
) -> None:
    for page in ["/", url("conversation", conversation), "/inbox/"]:
        policy = alice_client.get(page)["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    html = alice_client.get(url("conversation", conversation)).content.decode()
    assert "<script>" not in html and "<style" not in html


def test_the_signed_in_home_lists_conversations_newest_first(
    alice: Any, alice_client: Client
) -> None:
    scope = Scope.for_user(alice)
    services.create_conversation(scope, title="older one")
    services.create_conversation(scope, title="newer one")
    html = alice_client.get("/").content.decode()
    assert html.index("newer one") < html.index("older one")


def test_the_admin_transcript_renders_markdown_sanitized_like_the_chat_pages(
    admin_client: Client, alice: Any, conversation: Any
) -> None:
    scope = Scope.for_user(alice)
    services.append_text_message(
        scope,
        conversation.pk,
        "assistant",
        "**bold** [bad](javascript:alert(1)) <img src=x onerror=alert(1)>",
    )
    html = admin_client.get(
        reverse("admin:sagents_django_conversation_change", args=[conversation.pk])
    ).content.decode()
    assert "<strong>bold</strong>" in html
    assert 'href="javascript' not in html and "<img src=x" not in html


def test_a_failed_turn_shows_its_error_with_a_retry(
    alice: Any, alice_client: Client, conversation: Any, sent: list
) -> None:
    from sagents_django.models import AgentRun

    AgentRun.objects.create(conversation=conversation, status="error", error="boom")
    services.append_display_message(
        Scope.for_user(alice),
        conversation.pk,
        message_type="system",
        content_type="error",
        content={"text": "The provider said **no**"},
    )
    html = alice_client.get(url("conversation", conversation)).content.decode()
    assert "The last turn failed" in html and "<strong>no</strong>" in html
    assert url("retry", conversation) in html
    assert alice_client.post(url("retry", conversation), **HTMX).status_code == 204
    assert sent == [("execute", None)]


def test_a_message_sent_during_a_turn_is_marked_queued_until_answered(
    alice: Any, alice_client: Client, conversation: Any
) -> None:
    from sagents_django.models import AgentRun

    scope = Scope.for_user(alice)
    AgentRun.objects.create(conversation=conversation, status="running")
    services.append_text_message(scope, conversation.pk, "user", "first")
    services.append_text_message(
        scope, conversation.pk, "user", "meanwhile", metadata={"queued": True}
    )
    html = alice_client.get(url("conversation", conversation)).content.decode()
    assert html.count("sg-badge--queued") == 1
    assert "queued and answered right after it" in html
    services.append_text_message(scope, conversation.pk, "assistant", "answer")
    html = alice_client.get(url("conversation", conversation)).content.decode()
    assert "sg-badge--queued" not in html


@pytest.mark.parametrize(("executor", "warmed"), [("inline", True), ("celery", False)])
def test_the_chat_page_warms_the_model_library_only_where_turns_run(
    alice_client: Client,
    conversation: Any,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    executor: str,
    warmed: bool,
) -> None:
    from sagents_django.core import transports

    monkeypatch.setattr(transports, "_demo_registered", False)
    monkeypatch.setattr(transports, "_warming", None)
    settings.SAGENTS = {**settings.SAGENTS, "EXECUTOR": executor}

    assert alice_client.get(url("conversation", conversation)).status_code == 200
    thread = transports._warming
    assert (thread is not None) is warmed
    if thread is not None:
        thread.join(300)
        assert transports._demo_registered


def test_an_empty_transcript_says_so_and_one_with_rows_does_not(
    alice_client: Client, conversation: Any, alice: Any
) -> None:
    empty = alice_client.get(url("conversation", conversation)).content.decode()
    assert "No messages yet." in empty

    services.append_text_message(Scope.for_user(alice), conversation.pk, "user", "Hi")
    page = alice_client.get(url("conversation", conversation)).content.decode()
    assert "No messages yet." not in page and "Hi" in page


def test_a_huge_message_is_drawn_in_part_without_edit_and_the_agent_keeps_it(
    alice_client: Client, conversation: Any, alice: Any
) -> None:
    from sagents_django.ui.transcript import SHOWN_CHARS

    scope = Scope.for_user(alice)
    huge = "A" * (1024 * 1024)
    services.append_text_message(scope, conversation.pk, "user", huge)
    services.append_text_message(scope, conversation.pk, "user", "short")

    page = alice_client.get(url("conversation", conversation)).content.decode()

    assert len(page) < 200_000  # not the megabyte
    assert f"({len(huge) - SHOWN_CHARS:,} more characters not shown here)" in page
    assert page.count("Edit your message") == 1  # the short one only
    [row] = [
        r
        for r in services.load_display_messages(scope, conversation.pk)
        if r.content.get("text") == huge
    ]
    assert row.pk  # stored whole


def test_the_pages_load_htmx_without_django_htmxs_debug_page_takeover(
    alice_client: Client, conversation: Any, settings: Any
) -> None:
    settings.DEBUG = True  # where {% htmx_script %} would add django-htmx.js
    page = alice_client.get(url("conversation", conversation)).content.decode()
    assert "django_htmx/htmx-2.min.js" in page
    assert "django_htmx/ext/hx-ws-2.min.js" in page
    assert "django-htmx.js" not in page


def test_the_sockets_redraw_of_an_empty_transcript_says_so_too(
    conversation: Any, alice: Any
) -> None:
    from sagents_django.ui import fragments

    scope = Scope.for_user(alice)
    assert "No messages yet." in fragments.resync(scope, str(conversation.pk), None)
    services.append_text_message(scope, conversation.pk, "user", "Hi")
    assert "No messages yet." not in fragments.resync(scope, str(conversation.pk), None)
