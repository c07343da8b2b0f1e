"""Who may decide an approval request, across conversations: the owner, holders of
the request's permission within their tenancy, a quorum of distinct people for
high-risk tools; and decisions refused for stale or tampered arguments, a second
decision, or a person not allowed."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from sagents_django import services
from sagents_django.approvals import deciding, routing
from sagents_django.approvals.deciding import Vote
from sagents_django.approvals.models import ApprovalRequest, ApprovalVote
from sagents_django.exceptions import InvalidInput, NotFound
from sagents_django.scope import Scope
from tests.web.approval_helpers import allow, approve_all, decide, pause, routed

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def carol(db: None) -> Any:
    return get_user_model().objects.create_user(username="carol", password="pw")


def client_of(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def inbox(client: Client) -> str:
    return client.get(reverse("sagents_django:inbox")).content.decode()


def test_a_holder_of_the_permission_sees_and_decides_another_persons_request(
    settings: Any,
    alice: Any,
    bob: Any,
    bob_client: Client,
    conversation: Any,
    sent: list,
) -> None:
    routed(settings)
    allow(bob)
    rows = pause(conversation, "write_file")
    assert "write_file" in inbox(bob_client)
    count = bob_client.get(reverse("sagents_django:inbox_count"))
    assert b">1</span>" in count.content

    response = decide(bob_client, conversation, approve_all(rows), **HTMX)

    assert response.status_code == 200, response.content
    assert sent == [("resume", [{"type": "approve"}])]
    row = ApprovalRequest.objects.get()
    assert row.status == "approved" and row.requested_by == alice
    vote = ApprovalVote.objects.get()
    assert vote.user == bob and vote.decision == "approve" and vote.via == "page"


def test_without_the_permission_another_persons_request_is_not_found(
    settings: Any, bob_client: Client, conversation: Any, sent: list
) -> None:
    routed(settings)
    rows = pause(conversation, "write_file")
    assert "write_file" not in inbox(bob_client)
    response = decide(bob_client, conversation, approve_all(rows))
    assert response.status_code == 404
    assert sent == [] and not ApprovalVote.objects.exists()


def test_with_owner_decides_off_only_permission_holders_decide(
    settings: Any, alice_client: Client, conversation: Any, sent: list
) -> None:
    routed(settings, OWNER_DECIDES=False)
    rows = pause(conversation, "write_file")
    assert "write_file" not in inbox(alice_client)
    response = decide(alice_client, conversation, approve_all(rows), **HTMX)
    assert response.status_code == 422 and sent == []


def test_a_tenancy_hook_keeps_a_permission_holder_to_their_tenant(
    settings: Any, bob: Any, bob_client: Client, conversation: Any, sent: list
) -> None:
    routed(settings, TENANCY="tests.web.test_approval_routing.nobody")
    allow(bob)
    rows = pause(conversation, "write_file")
    assert "write_file" not in inbox(bob_client)
    assert decide(bob_client, conversation, approve_all(rows)).status_code == 404
    assert sent == []


def nobody(user: Any, conversations: Any) -> Any:
    return conversations.none()


def test_arguments_that_no_longer_hash_to_the_request_are_refused(
    alice_client: Client, conversation: Any, sent: list
) -> None:
    rows = pause(conversation, "write_file")
    post = approve_all(rows)
    post["hash-0"] = "0" * 64  # the page showed other arguments
    response = decide(alice_client, conversation, post, **HTMX)
    assert response.status_code == 422
    assert b"not the ones this decision was made on" in response.content
    assert sent == [] and ApprovalRequest.objects.get().status == "pending"


def test_a_stale_page_is_refused_after_the_arguments_changed(
    alice_client: Client, conversation: Any, sent: list
) -> None:
    old = pause(conversation, "write_file")
    post = approve_all(old)
    # The agent paused again on the same call id with other arguments.
    ApprovalRequest.objects.all().delete()
    pause(conversation, "write_file", arguments={"file_path": "/etc/passwd"})
    response = decide(alice_client, conversation, post, **HTMX)
    assert response.status_code == 422 and sent == []


def test_a_form_without_the_arguments_hash_is_refused(
    alice_client: Client, conversation: Any, sent: list
) -> None:
    pause(conversation, "write_file")
    response = decide(alice_client, conversation, {"decision-0": "approve"}, **HTMX)
    assert response.status_code == 422 and b"reload" in response.content
    assert sent == []


def test_a_second_decision_on_a_decided_request_is_refused(
    settings: Any, alice: Any, bob: Any, conversation: Any, sent: list
) -> None:
    routed(settings)
    allow(bob)
    rows = pause(conversation, "write_file")
    vote = Vote(
        tool_call_id="call-0",
        arguments_hash=rows[0].arguments_hash,
        decision={"type": "reject"},
    )
    deciding.decide(bob, conversation.pk, [vote])
    ApprovalRequest.objects.update(resumed_run_ref="")  # the resume never ran (sent)
    with pytest.raises(deciding.AlreadyDecided):
        deciding.decide(alice, conversation.pk, [vote])
    assert len(sent) == 1 and ApprovalVote.objects.count() == 1


def test_a_high_risk_tool_needs_two_distinct_approvers_the_requester_only_first(
    settings: Any, alice: Any, bob: Any, carol: Any, conversation: Any, sent: list
) -> None:
    routed(settings, HIGH_RISK=["delete_file"])
    allow(bob)
    allow(carol)
    rows = pause(conversation, "delete_file")
    assert rows[0].approvals_needed == 2
    approve = Vote(
        tool_call_id="call-0",
        arguments_hash=rows[0].arguments_hash,
        decision={"type": "approve"},
    )

    first = deciding.decide(bob, conversation.pk, [approve])
    assert first.run_id is None and sent == []
    with pytest.raises(deciding.NotAllowed, match="already decided"):
        deciding.decide(bob, conversation.pk, [approve])
    with pytest.raises(deciding.NotAllowed, match="cannot be a second approver"):
        deciding.decide(alice, conversation.pk, [approve])
    edit = Vote(
        tool_call_id="call-0",
        arguments_hash=rows[0].arguments_hash,
        decision={"type": "edit", "arguments": {"file_path": "/x"}},
    )
    with pytest.raises(deciding.NotAllowed, match="approvers"):
        deciding.decide(carol, conversation.pk, [edit])
    second = deciding.decide(carol, conversation.pk, [approve])

    assert sent == [("resume", [{"type": "approve"}])] and second.decided
    deciders = list(ApprovalVote.objects.values_list("user__username", flat=True))
    assert deciders == ["bob", "carol"]


def test_the_requester_may_be_the_first_of_two_approvers(
    settings: Any, alice: Any, bob: Any, conversation: Any, sent: list
) -> None:
    routed(settings, HIGH_RISK=["delete_file"])
    allow(bob)
    rows = pause(conversation, "delete_file")
    approve = Vote(
        tool_call_id="call-0",
        arguments_hash=rows[0].arguments_hash,
        decision={"type": "approve"},
    )
    deciding.decide(alice, conversation.pk, [approve])
    deciding.decide(bob, conversation.pk, [approve])
    assert sent == [("resume", [{"type": "approve"}])]


def test_one_rejection_decides_a_high_risk_request(
    settings: Any, bob: Any, conversation: Any, sent: list
) -> None:
    routed(settings, HIGH_RISK=["delete_file"])
    allow(bob)
    rows = pause(conversation, "delete_file")
    reject = Vote(
        tool_call_id="call-0",
        arguments_hash=rows[0].arguments_hash,
        decision={"type": "reject", "message": "no"},
    )
    deciding.decide(bob, conversation.pk, [reject])
    assert sent == [("resume", [{"type": "reject", "message": "no"}])]


def test_a_tool_policy_names_its_own_permission_and_approvers(
    settings: Any, alice: Any, bob: Any, conversation: Any
) -> None:
    from sagents_django.models import AgentState
    from tests.django.factories import envelope

    AgentState.objects.create(
        conversation=conversation,
        state_data=envelope(
            interrupt_data={
                "type": "hitl",
                "action_requests": [
                    {
                        "tool_call_id": "c1",
                        "tool_name": "pay",
                        "arguments": {"amount": 5},
                        "permission": "sagents_django.decide_approvals",
                        "approvers": 3,
                    }
                ],
            }
        ),
    )
    from sagents_django.approvals import records

    records.ensure(conversation.pk)
    row = ApprovalRequest.objects.get()
    assert row.permission == "sagents_django.decide_approvals"
    assert row.approvals_needed == 3
    assert not routing.may_decide(bob, row)
    allow(bob)
    bob = get_user_model().objects.get(pk=bob.pk)  # permissions are cached
    assert routing.may_decide(bob, row)


@pytest.mark.parametrize(
    "vote",
    [
        {"tool_call_id": "call-9", "decision": {"type": "approve"}},
        {"tool_call_id": "call-0", "decision": {"type": "maybe"}},
        {"tool_call_id": "call-0", "decision": {"type": "edit", "arguments": "x"}},
        {"tool_call_id": "call-0", "decision": "approve"},
    ],
)
def test_malformed_votes_change_nothing(
    alice: Any, conversation: Any, sent: list, vote: dict
) -> None:
    rows = pause(conversation, "write_file")
    with pytest.raises((InvalidInput, NotFound)):
        deciding.decide(
            alice,
            conversation.pk,
            [Vote(arguments_hash=rows[0].arguments_hash, **vote)],
        )
    assert sent == [] and not ApprovalVote.objects.exists()


def test_another_tenants_conversation_id_is_not_found(
    alice: Any, bob: Any, sent: list
) -> None:
    theirs = services.create_conversation(Scope.for_user(bob), title="Bob's")
    rows = pause(theirs, "write_file")
    vote = Vote(
        tool_call_id="call-0",
        arguments_hash=rows[0].arguments_hash,
        decision={"type": "approve"},
    )
    with pytest.raises(NotFound):
        deciding.decide(alice, theirs.pk, [vote])
    with pytest.raises(NotFound):
        deciding.visible(alice, rows[0].pk)
    assert sent == []


def test_a_resume_outside_the_inbox_cannot_skip_a_quorum_or_the_routing(
    settings: Any, alice: Any, conversation: Any
) -> None:
    """``agent_server.resume`` (a script, the socket) goes through the same rows:
    it cannot decide a request that needs two people, nor one its user may not."""
    from sagents_django.approvals import records

    routed(settings, HIGH_RISK=["delete_file"])
    pause(conversation, "delete_file")
    scope = Scope.for_user(alice)
    with pytest.raises(InvalidInput, match="needs 2 approvers"):
        records.on_resume(scope, conversation.pk, [{"type": "approve"}], None)
    ApprovalRequest.objects.all().delete()
    routed(settings, OWNER_DECIDES=False)
    pause(conversation, "write_file")
    with pytest.raises(InvalidInput, match="may not decide"):
        records.on_resume(scope, conversation.pk, [{"type": "approve"}], None)
    assert not ApprovalVote.objects.exists()


def test_an_admin_resume_is_recorded_as_the_operators_decision(
    settings: Any, alice: Any, bob: Any, conversation: Any
) -> None:
    from sagents_django.approvals import records

    routed(settings, OWNER_DECIDES=False)
    pause(conversation, "write_file")
    scope = Scope.for_user(alice)
    run = services.begin_run(scope, conversation.pk, trigger="resume")
    with records.acting(bob, via="admin"):
        records.on_resume(scope, conversation.pk, [{"type": "reject"}], run)
    vote = ApprovalVote.objects.get()
    assert (vote.user, vote.decision, vote.via) == (bob, "reject", "admin")
    row = ApprovalRequest.objects.get()
    assert row.status == "rejected" and row.resumed_run_ref == str(run.pk)


def test_after_their_approval_of_a_quorum_the_request_leaves_that_persons_inbox(
    settings: Any,
    bob: Any,
    bob_client: Client,
    carol: Any,
    conversation: Any,
    sent: list,
) -> None:
    routed(settings, HIGH_RISK=["delete_file"])
    allow(bob)
    allow(carol)
    rows = pause(conversation, "delete_file")
    assert "Needs 2 approvers: 0 so far" in inbox(bob_client)
    response = decide(bob_client, conversation, approve_all(rows), **HTMX)
    assert response.status_code == 200 and sent == []
    assert "delete_file" not in inbox(bob_client)
    assert "Needs 2 approvers: 1 so far" in inbox(client_of(carol))


@pytest.mark.parametrize(("access", "decides"), [("write", True), ("read", False)])
def test_a_share_to_write_lets_its_holder_decide_a_share_to_read_does_not(
    settings: Any,
    alice: Any,
    bob: Any,
    bob_client: Client,
    conversation: Any,
    sent: list,
    access: str,
    decides: bool,
) -> None:
    from sagents_django.sharing.services import share

    share(Scope.for_user(alice), conversation.pk, bob, access=access)
    rows = pause(conversation, "write_file")
    assert ("write_file" in inbox(bob_client)) is decides
    response = decide(bob_client, conversation, approve_all(rows), **HTMX)
    assert (response.status_code == 200) is decides
    assert (sent == [("resume", [{"type": "approve"}])]) is decides
