"""Export: a user's data as a zip, downloaded once by that user; the admin's
actions on users."""

from __future__ import annotations

import io
import json
import zipfile
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.test import Client, RequestFactory
from django.urls import reverse

from sagents_django import services
from sagents_django.admin.lifecycle import erase_users, export_users
from sagents_django.approvals.models import ApprovalRequest, ApprovalVote
from sagents_django.approvals.records import arguments_hash
from sagents_django.core import TokenUsage
from sagents_django.exceptions import InvalidInput
from sagents_django.lifecycle.export import request_export
from sagents_django.models import DataExport, ReplyFeedback, UsageEntry
from sagents_django.tasks import build_export
from tests.lifecycle import agents
from tests.lifecycle.conftest import export_storage, storage_names
from tests.runtime.follow import make_scope

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(lifecycle_settings: Any) -> Any:
    """Alice with one conversation: a turn, a rated reply, a decided approval,
    and a file in each backend."""
    scope = make_scope("alice")
    conversation = services.create_conversation(scope, title="Trip")
    run = services.begin_run(scope, conversation.pk, trigger="message")
    services.append_text_message(scope, conversation.pk, "user", "Paris?")
    answer = services.append_text_message(
        scope, conversation.pk, "assistant", "Yes, in May.", run_id=run.pk
    )
    services.finish_run(
        scope,
        run.pk,
        status="completed",
        usage=TokenUsage(input=10, output=5),
        cost=Decimal("0.002"),
        model="openai/gpt-4o-mini",
    )
    UsageEntry.objects.create(
        created_at=run.created_at,
        conversation_id=conversation.pk,
        run_id=run.pk,
        user=scope.user,
        owner_key=str(scope.user.pk),
        model="openai/gpt-4o-mini",
        input_tokens=10,
        output_tokens=5,
        cost=Decimal("0.002"),
        charged=Decimal("0.002"),
    )
    services.rate_reply(scope, answer.pk, rating="up", comment="Helpful")
    call = services.append_display_message(
        scope,
        conversation.pk,
        message_type="assistant",
        content_type="tool_call",
        content={"call_id": "c1", "name": "write_file", "arguments": {}},
        tool_call_id="c1",
    )
    services.record_hitl_decision(
        scope, "c1", {"type": "approve"}, conversation_id=conversation.pk
    )
    request = ApprovalRequest.objects.create(
        conversation_id=conversation.pk,
        conversation_ref=str(conversation.pk),
        run=run,
        run_ref=str(run.pk),
        requested_by=scope.user,
        requested_by_label="alice",
        tool_name="write_file",
        tool_call_id="c1",
        arguments={"file_path": "/a.md"},
        arguments_hash=arguments_hash({"file_path": "/a.md"}),
        status="approved",
        decision={"type": "approve"},
    )
    ApprovalVote.objects.create(
        request=request, user=scope.user, user_label="alice", decision="approve"
    )
    agents.seed_files(("agent", str(conversation.agent_id)), "alice's notes")
    return scope, conversation, call


def archive_of(response: Any) -> zipfile.ZipFile:
    return zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))


def status_of(client: Client, url: str) -> int:
    """The status of a GET; an archive read to its end (the test client then
    closes the response, and the archive's file with it)."""
    response = client.get(url)
    if response.streaming:
        b"".join(response.streaming_content)
    return response.status_code


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_archive_holds_messages_files_approvals_feedback_and_usage(
    alice: Any,
) -> None:
    scope, conversation, _ = alice
    client = signed_in(scope.user)
    response = client.post(reverse("sagents_django:export"))
    assert response.status_code == 302
    export = DataExport.objects.get(user=scope.user)
    assert export.status == "ready" and export.conversations == 1

    page = client.get(reverse("sagents_django:my_usage")).content.decode()
    url = reverse("sagents_django:download_export", args=[export.pk])
    assert url in page

    response = client.get(url)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    archive = archive_of(response)
    label = f"agent-{conversation.agent_id}"
    assert sorted(archive.namelist()) == sorted(
        [
            "account.json",
            "usage_ledger.json",
            f"conversations/{conversation.pk}.json",
            f"files/{label}/a.md",
            f"files/{label}/exports/b.md",
            f"files/{label}/notes/deep/c.md",
        ]
    )
    data = json.loads(archive.read(f"conversations/{conversation.pk}.json"))
    assert data["conversation"]["title"] == "Trip"
    texts = [m["content"].get("text") for m in data["messages"]]
    assert "Paris?" in texts and "Yes, in May." in texts
    assert data["approvals"][0]["decision"] in ("approve", "approved")
    chain = data["approval_requests"][0]
    assert chain["proposed"]["arguments"] == {"file_path": "/a.md"}
    assert chain["votes"][0]["by"] == "alice"
    assert chain["decided"]["status"] == "approved"
    assert data["feedback"][0]["comment"] == "Helpful"
    assert data["runs"][0]["input_tokens"] == 10
    account = json.loads(archive.read("account.json"))
    assert account["usage"]["output_tokens"] == 5
    assert account["feedback_given"][0]["rating"] == "up"
    [call] = json.loads(archive.read("usage_ledger.json"))
    assert (call["model"], call["input_tokens"], call["cost"]) == (
        "openai/gpt-4o-mini",
        10,
        "0.0020000000",
    )
    assert account["approval_votes"][0]["decision"] == "approve"
    assert archive.read(f"files/{label}/notes/deep/c.md") == b"alice's notes"


def test_a_second_download_is_gone_and_the_archive_is_deleted(alice: Any) -> None:
    scope, _, _ = alice
    export = request_export(scope.user)
    client = signed_in(scope.user)
    url = reverse("sagents_django:download_export", args=[export.pk])
    assert status_of(client, url) == 200
    assert status_of(client, url) == 410
    export.refresh_from_db()
    assert export.status == "downloaded" and export.file_name == ""
    assert storage_names(export_storage()) == []


def test_another_user_gets_a_404_and_the_owner_still_gets_the_archive(
    alice: Any,
) -> None:
    scope, _, _ = alice
    export = request_export(scope.user)
    bob = get_user_model().objects.create_user(username="bob")
    url = reverse("sagents_django:download_export", args=[export.pk])
    assert status_of(signed_in(bob), url) == 404
    assert status_of(Client(), url) == 302  # to sign in
    assert status_of(signed_in(scope.user), url) == 200


def test_an_unknown_export_is_a_404_and_the_export_view_takes_only_post(
    alice: Any,
) -> None:
    scope, _, _ = alice
    client = signed_in(scope.user)
    url = reverse(
        "sagents_django:download_export",
        args=["00000000-0000-0000-0000-000000000000"],
    )
    assert status_of(client, url) == 404
    assert client.get("/usage/export/not-a-uuid/").status_code == 404
    assert client.get(reverse("sagents_django:export")).status_code == 405
    assert not DataExport.objects.exists()


def test_a_large_account_on_celery_is_exported_by_a_task(
    alice: Any, settings: Any
) -> None:
    scope, _, _ = alice
    settings.SAGENTS = {
        **settings.SAGENTS,
        "EXECUTOR": "celery",
        "EXPORT_INLINE_MAX_ROWS": 1,
    }
    export = request_export(scope.user)
    assert export.status == "pending"
    url = reverse("sagents_django:download_export", args=[export.pk])
    assert status_of(signed_in(scope.user), url) == 404  # not ready yet
    assert build_export(str(export.pk)) == "ready"
    assert build_export(str(export.pk)) == "ready"  # a duplicate delivery
    assert status_of(signed_in(scope.user), url) == 200


@pytest.mark.parametrize("value", [None, "alice", 1, object()])
def test_exporting_something_that_is_not_a_user_is_refused(
    lifecycle_settings: Any, value: Any
) -> None:
    with pytest.raises(InvalidInput):
        request_export(value)
    assert not DataExport.objects.exists()


class Recorder:
    def __init__(self) -> None:
        self.messages: list[str] = []

    def message_user(self, request: Any, message: str, level: Any = None) -> None:
        self.messages.append(message)


def test_the_admin_actions_export_and_erase_the_selected_users(alice: Any) -> None:
    scope, conversation, _ = alice
    users = get_user_model().objects.filter(pk=scope.user.pk)
    request = RequestFactory().post("/admin/")
    request.user = get_user_model().objects.create_user(username="staff")
    admin = Recorder()

    export_users(admin, request, users)
    assert DataExport.objects.get(user=scope.user).status == "ready"
    with pytest.raises(PermissionDenied):
        erase_users(admin, request, users)
    assert services.get_conversation(scope, conversation.pk) is not None

    request.user = get_user_model().objects.create_superuser(username="root")
    erase_users(admin, request, users)
    assert services.get_conversation(scope, conversation.pk) is None
    assert not DataExport.objects.filter(user=scope.user).exists()
    assert not ReplyFeedback.objects.filter(user=scope.user).exists()
    assert admin.messages[-1].startswith(f"Erased {scope.user}: ")
    assert "1 conversations" in admin.messages[-1]


def test_a_disk_root_shared_by_every_scope_is_left_out_of_the_archive(
    alice: Any,
) -> None:
    scope, conversation, _ = alice
    agents.SHARED_DISK[0] = True
    agents.seed_files(("agent", "someone-else"), "not alice's")
    export = request_export(scope.user)
    response = signed_in(scope.user).get(
        reverse("sagents_django:download_export", args=[export.pk])
    )
    names = archive_of(response).namelist()
    label = f"agent-{conversation.agent_id}"
    assert f"files/{label}/a.md" in names
    assert not any("notes" in name for name in names)


def test_an_archive_never_downloaded_expires_with_the_retention_pass(
    alice: Any,
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from sagents_django.lifecycle.export import KEEP_DAYS
    from sagents_django.lifecycle.retention import apply_retention

    scope, _, _ = alice
    old, fresh = request_export(scope.user), request_export(scope.user)
    DataExport.objects.filter(pk=old.pk).update(
        created_at=timezone.now() - timedelta(days=KEEP_DAYS + 1)
    )
    assert apply_retention(dry_run=True).expired_exports == 0
    assert apply_retention().expired_exports == 1
    old.refresh_from_db()
    assert old.status == "expired" and old.file_name == ""
    assert storage_names(export_storage()) == [fresh.file_name]
    client = signed_in(scope.user)
    url = reverse("sagents_django:download_export", args=[old.pk])
    assert status_of(client, url) == 410
    page = client.get(reverse("sagents_django:my_usage")).content.decode()
    assert "expired (never downloaded)" in page
