"""The approval audit in the admin: append-only for everyone (superusers too),
filterable, exported as CSV and JSON with each request's chain."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from sagents_django.approvals.models import ApprovalRequest, ApprovalVote
from sagents_django.approvals.records import arguments_hash

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:sagents_django_approvalrequest_changelist"


@pytest.fixture
def admin_client_(db: None) -> Client:
    user = get_user_model().objects.create_superuser("root", password="pw")
    client = Client()
    client.force_login(user)
    return client


def request_row(tool: str, status: str, **extra: Any) -> ApprovalRequest:
    arguments = extra.pop("arguments", {"file_path": "/a.md"})
    extra.setdefault("requested_by_label", "alice")
    row = ApprovalRequest.objects.create(
        conversation_ref="c",
        run_ref=f"run-{tool}-{status}",
        tool_name=tool,
        tool_call_id=f"call-{tool}",
        arguments=arguments,
        arguments_hash=arguments_hash(arguments),
        status=status,
        **extra,
    )
    return row


def test_nobody_adds_changes_or_deletes_an_approval_record(
    admin_client_: Client,
) -> None:
    row = request_row("write_file", "approved")
    add = reverse("admin:sagents_django_approvalrequest_add")
    change = reverse("admin:sagents_django_approvalrequest_change", args=[row.pk])
    delete = reverse("admin:sagents_django_approvalrequest_delete", args=[row.pk])
    assert admin_client_.get(add).status_code == 403
    page = admin_client_.get(change)
    assert page.status_code == 200 and b'name="_save"' not in page.content
    assert b"proposed" in page.content and b"executed" in page.content
    assert admin_client_.post(change, {"tool_name": "x"}).status_code == 403
    assert admin_client_.post(delete, {"post": "yes"}).status_code == 403
    listing = admin_client_.get(reverse(CHANGELIST))
    assert b"delete_selected" not in listing.content
    assert ApprovalRequest.objects.get().tool_name == "write_file"


def test_the_audit_filters_by_status_and_tool(admin_client_: Client) -> None:
    request_row("write_file", "approved")
    request_row("delete_file", "rejected")
    page = admin_client_.get(reverse(CHANGELIST), {"status": "rejected"})
    assert b"delete_file" in page.content and b"write_file</td>" not in page.content


def test_the_selection_exports_as_csv_and_json_with_its_chain(
    admin_client_: Client,
) -> None:
    row = request_row(
        "write_file",
        "approved",
        decision={"type": "approve"},
        execution_status="completed",
        result="=HYPERLINK(1)",
    )
    ApprovalVote.objects.create(request=row, user_label="bob", decision="approve")
    url = reverse(CHANGELIST)
    post = {"action": "export_csv", "_selected_action": [str(row.pk)]}
    response = admin_client_.post(url, post)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert rows[0]["tool_name"] == "write_file" and rows[0]["status"] == "approved"
    assert rows[0]["arguments_hash"] == row.arguments_hash
    assert rows[0]["votes"].startswith("approve by bob")
    assert rows[0]["execution_status"] == "completed"

    response = admin_client_.post(url, {**post, "action": "export_json"})
    chain = json.loads(response.content)[0]
    assert chain["proposed"]["tool_call_id"] == "call-write_file"
    assert chain["votes"][0]["by"] == "bob"
    assert chain["executed"]["result"] == "=HYPERLINK(1)"


def test_a_csv_cell_that_looks_like_a_formula_is_quoted(admin_client_: Client) -> None:
    row = request_row("write_file", "approved", requested_by_label="=cmd|' /C calc'!A0")
    post = {"action": "export_csv", "_selected_action": [str(row.pk)]}
    response = admin_client_.post(reverse(CHANGELIST), post)
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert rows[0]["requested_by"].startswith("'=")


def test_a_person_without_the_view_permission_sees_no_audit(db: None) -> None:
    staff = get_user_model().objects.create_user("staff", password="pw", is_staff=True)
    client = Client()
    client.force_login(staff)
    assert client.get(reverse(CHANGELIST)).status_code == 403
