"""Erasure of a user in every store: rows, files in three backends, the runtime's
live keys, a running turn cancelled first; bad input refused before anything
changes. The big test runs on both stacks (``site``)."""

from __future__ import annotations

import io
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.models import Sum

from sagents_django import services
from sagents_django.approvals.models import ApprovalRequest, ApprovalVote
from sagents_django.approvals.records import arguments_hash
from sagents_django.exceptions import InvalidInput, NotFound
from sagents_django.lifecycle import stores
from sagents_django.lifecycle.erasure import erase_owner, erase_user
from sagents_django.lifecycle.export import request_export
from sagents_django.models import (
    AgentRun,
    AgentStep,
    DisplayMessage,
    PersistenceFailure,
    ReplyFeedback,
    StoredMcpServer,
    ToolCallRecord,
    TriggerEvent,
    UsageEntry,
)
from sagents_django.runtime import agent_server
from sagents_django.scope import Scope
from sagents_django.sharing import filesystems
from sagents_django.sharing import services as sharing
from tests.fakes.openai_server import fault, reply
from tests.lifecycle import agents
from tests.lifecycle.conftest import (
    export_storage,
    live_entries,
    rows_mentioning,
    storage_names,
    user_rows,
)
from tests.runtime import follow as follow_module
from tests.runtime.follow import follow, make_scope, turns_ended

site = follow_module.site

SECRET = "alice-secret"
"""In every piece of alice's data: no row may hold it after her erasure."""


def seed_rows(scope: Scope, other: Scope, conversation: Any, run_id: Any) -> None:
    """What a turn leaves besides its transcript, and what names alice elsewhere."""
    run = AgentRun.objects.get(pk=run_id)
    AgentStep.objects.create(
        run=run, number=1, base_revision=1, keep=0, messages=[{"text": SECRET}]
    )
    ToolCallRecord.objects.create(
        run=run, call_id="c1", name="search", status="completed", result=SECRET
    )
    PersistenceFailure.objects.create(
        conversation_id=conversation.pk,
        run=run,
        kind="display",
        operation="append",
        error_type="IntegrityError",
        error=SECRET,
    )
    reply_row = DisplayMessage.objects.filter(
        conversation=conversation, message_type="assistant"
    ).first()
    ReplyFeedback.objects.create(
        user=scope.user,
        message=reply_row,
        conversation_id=conversation.pk,
        rating="up",
        comment=SECRET,
    )
    # Alice's feedback on bob's conversation: hers, in his conversation.
    bobs = services.create_conversation(other, title="bob's")
    bobs_reply = services.append_text_message(other, bobs.pk, "assistant", "Hi bob")
    ReplyFeedback.objects.create(
        user=scope.user,
        message=bobs_reply,
        conversation_id=bobs.pk,
        rating="down",
        comment=SECRET,
    )
    TriggerEvent.objects.create(
        trigger="t",
        object="shop.order:1",
        change="a",
        label="order",
        scope={"user_id": scope.user.pk},
        message=SECRET,
    )
    TriggerEvent.objects.create(
        trigger="t",
        object="shop.order:2",
        change="a",
        label="order",
        scope={"user_id": other.user.pk},
        conversation_id=str(conversation.pk),
        message=SECRET,
    )
    StoredMcpServer.objects.create(
        user=scope.user, name="mine", url=f"https://mcp.example.com/{SECRET}"
    )
    # Bob shares his conversation and his files with alice; her own files are
    # shared with him (the rows of her filesystem go, his stay).
    sharing.share(other, bobs.pk, scope.user, "read")
    filesystems.share_files(other, bobs.pk, scope.user, "write")
    filesystems.share_files(scope, conversation.pk, other.user, "read")
    seed_approvals(scope, other, conversation, run, bobs)


def seed_approvals(
    scope: Scope, other: Scope, conversation: Any, run: Any, bobs: Any
) -> None:
    """An approval alice asked and bob decided, and one bob asked that alice
    decided: the audit stays, without alice."""
    arguments = {"file_path": f"/{SECRET}.md"}
    mine = ApprovalRequest.objects.create(
        conversation_id=conversation.pk,
        conversation_ref=str(conversation.pk),
        run=run,
        run_ref=str(run.pk),
        requested_by=scope.user,
        requested_by_label="alice",
        tool_name="write_file",
        tool_call_id="w1",
        arguments=arguments,
        arguments_hash=arguments_hash(arguments),
        status="rejected",
        decision={"type": "reject", "message": SECRET},
        resumed_run=run,
        resumed_run_ref=str(run.pk),
        result=SECRET,
    )
    ApprovalVote.objects.create(
        request=mine,
        user=other.user,
        user_label="bob",
        decision="reject",
        reason=SECRET,
    )
    theirs = ApprovalRequest.objects.create(
        conversation_id=bobs.pk,
        conversation_ref=str(bobs.pk),
        run_ref="bobs-run",
        requested_by=other.user,
        requested_by_label="bob",
        tool_name="write_file",
        tool_call_id="w2",
        arguments={"file_path": "/bob.md"},
        arguments_hash=arguments_hash({"file_path": "/bob.md"}),
    )
    ApprovalVote.objects.create(
        request=theirs,
        user=scope.user,
        user_label="alice",
        decision="approve",
        reason=SECRET,
    )


def erase_off_thread(user: Any) -> Any:
    """Erase from a thread of its own: on SQLite the runtime's database work (the
    cancelled turn's end, which erasure waits for) is on the thread-sensitive
    thread. Its connection is closed after."""
    try:
        return erase_user(user)
    finally:
        connection.close()


@pytest.mark.django_db(transaction=True)
async def test_erasing_a_user_leaves_nothing_of_them_in_any_store(
    site: Any, lifecycle_settings: Any
) -> None:
    alice = await sync_to_async(make_scope)("alice")
    bob = await sync_to_async(make_scope)("bob")
    done = await sync_to_async(services.create_conversation)(alice, title=SECRET)
    running = await sync_to_async(services.create_conversation)(alice)
    bobs_own = await sync_to_async(services.create_conversation)(bob, title="keep")
    keys = {c.pk: ("agent", str(c.agent_id)) for c in (done, running, bobs_own)}
    for pk, key in keys.items():
        owner = "bob" if pk == bobs_own.pk else SECRET
        await sync_to_async(agents.seed_files)(key, f"{owner} file")

    # A finished turn, then one still streaming when the erasure comes.
    site.script(reply(f"Hello {SECRET}"), fault.stall(reply("Hal", chunks=1)))
    follower = await follow(alice, done.pk)
    first = await agent_server.aadd_message(alice, done.pk, f"hi {SECRET}")
    await follower.finished(first.run_id)
    await sync_to_async(seed_rows)(alice, bob, done, first.run_id)
    watcher = await follow(alice, running.pk)  # a viewer entry too
    await agent_server.aadd_message(alice, running.pk, f"more {SECRET}")
    await watcher.until("llm_deltas")
    export = await sync_to_async(request_export)(alice.user)
    assert export.status == "ready"
    bob_rows = await DisplayMessage.objects.filter(conversation=bobs_own.pk).acount()
    books = await UsageEntry.objects.aaggregate(tokens=Sum("input_tokens"))
    assert books["tokens"]  # the finished turn's model call

    report = await sync_to_async(erase_off_thread, thread_sensitive=False)(alice.user)

    assert report.runs_cancelled == 1
    removed = report.removed
    assert removed["conversations"] == 2
    assert removed["runs"] == 2 and removed["agent_steps"] == 1
    assert removed["tool_calls"] == 1 and removed["persistence_failures"] == 1
    assert removed["feedback"] == 2 and removed["trigger_events"] == 2
    assert removed["mcp_servers"] == 1 and removed["exports"] == 1
    assert removed["conversation_shares"] == 1 and removed["filesystems"] >= 1
    assert removed["filesystem_shares"] == 2  # to her, and of her files
    assert removed["display_messages"] >= 4
    # Two conversations, three backends each; the database's rows are counted
    # apart, and the disk's /notes/deep directory is an entry of its own.
    assert removed["files"] == 6 and removed["stored_files"] == 2
    assert removed["live_keys"] >= 1
    # That call's row and the cut-off one's (the cancelled turn's partial reply).
    assert removed["usage_entries_anonymised"] == 2
    assert removed["approval_requests_anonymised"] == 1
    assert removed["approval_votes_anonymised"] == 2
    await turns_ended()  # the cancelled turn ended: nothing recreated after

    ids = [str(done.pk), str(running.pk)]
    run_ids = [first.run_id]
    assert await sync_to_async(rows_mentioning)([SECRET, *ids, *run_ids]) == {}
    assert await sync_to_async(user_rows)(alice.user.pk) == {}
    assert await sync_to_async(live_entries)(ids) == []
    for pk, key in keys.items():
        left = await sync_to_async(agents.stored_paths)(key)
        if pk == bobs_own.pk:
            assert left == ["/a.md", "/exports/b.md", "/notes/deep/c.md"]
        else:
            assert left == []
    assert await sync_to_async(storage_names)(export_storage()) == []
    # The site's books keep every call's tokens, naming nobody.
    assert await UsageEntry.objects.aaggregate(tokens=Sum("input_tokens")) == books
    assert await UsageEntry.objects.filter(anonymised=False).acount() == 0
    # Bob's data is his still.
    assert (
        await DisplayMessage.objects.filter(conversation=bobs_own.pk).acount()
        == bob_rows
    )
    assert await ReplyFeedback.objects.filter(user=bob.user).acount() == 0
    # The approval audit stays, without alice: who decided her request (bob) and
    # what (rejected), her vote on bob's request as an erased person's.
    kept = await ApprovalRequest.objects.aget(tool_call_id="w1")
    assert kept.status == "rejected" and kept.decision == {"type": "reject"}
    assert kept.requested_by_label == "(erased)" and kept.arguments == {}
    assert kept.conversation_ref.startswith("erased-") and kept.arguments_hash
    assert await ApprovalVote.objects.filter(
        user=bob.user, decision="reject", reason=""
    ).aexists()
    assert await ApprovalVote.objects.filter(
        user=None, user_label="(erased)", decision="approve"
    ).aexists()


@pytest.mark.django_db
def test_a_disk_root_shared_by_every_scope_is_skipped_not_emptied(
    lifecycle_settings: Any,
) -> None:
    agents.SHARED_DISK[0] = True
    alice = make_scope("alice")
    conversation = services.create_conversation(alice)
    key = ("agent", str(conversation.agent_id))
    agents.seed_files(key, "shared")

    report = erase_user(alice.user)

    assert report.removed["files"] == 1 and report.removed["stored_files"] == 1
    assert len(report.skipped) == 1 and "shared by every" in report.skipped[0]
    assert agents.stored_paths(key) == ["/notes/deep/c.md"]


@pytest.mark.django_db
def test_a_dry_run_counts_and_changes_nothing(lifecycle_settings: Any) -> None:
    alice = make_scope("alice")
    conversation = services.create_conversation(alice)
    services.append_text_message(alice, conversation.pk, "user", "hello")
    agents.seed_files(("agent", str(conversation.agent_id)), "x")

    report = erase_user(alice.user.pk, dry_run=True)

    assert report.dry_run
    assert report.removed["conversations"] == 1
    assert report.removed["display_messages"] == 1
    assert services.get_conversation(alice, conversation.pk) is not None
    assert len(agents.stored_paths(("agent", str(conversation.agent_id)))) == 3


@pytest.mark.django_db
@pytest.mark.parametrize("value", [object(), 3.5, True, None, [1], "not-a-number"])
def test_erasing_something_that_is_not_a_user_is_refused(value: Any) -> None:
    make_scope("alice")
    with pytest.raises(InvalidInput):
        erase_user(value)


@pytest.mark.django_db
def test_erasing_a_conversation_instead_of_a_user_is_refused() -> None:
    alice = make_scope("alice")
    conversation = services.create_conversation(alice)
    with pytest.raises(InvalidInput, match="must be a"):
        erase_user(conversation)
    assert services.get_conversation(alice, conversation.pk) is not None


@pytest.mark.django_db
def test_erasing_a_user_that_does_not_exist_is_not_found() -> None:
    with pytest.raises(NotFound):
        erase_user(987654)
    with pytest.raises(NotFound):
        erase_user(get_user_model()(username="unsaved"))


@pytest.mark.django_db
def test_an_owner_erasure_on_a_user_owned_site_erases_that_user_s_conversations(
    lifecycle_settings: Any,
) -> None:
    alice = make_scope("alice")
    services.create_conversation(alice)
    report = erase_owner(alice.user.pk)
    assert report.removed["conversations"] == 1


@pytest.mark.django_db
def test_the_command_prints_the_report_and_refuses_an_unknown_user(
    lifecycle_settings: Any,
) -> None:
    alice = make_scope("alice")
    conversation = services.create_conversation(alice)
    out = io.StringIO()
    call_command("sagents_erase", "--user", str(alice.user.pk), "--dry-run", stdout=out)
    assert '"conversations": 1' in out.getvalue()
    assert services.get_conversation(alice, conversation.pk) is not None
    call_command("sagents_erase", "--user", str(alice.user.pk), stdout=io.StringIO())
    assert services.get_conversation(alice, conversation.pk) is None
    with pytest.raises(CommandError, match=r"987654"):
        call_command("sagents_erase", "--user", "987654", stdout=io.StringIO())
    with pytest.raises(CommandError):
        call_command("sagents_erase", "--user", "x", stdout=io.StringIO())


def test_the_keys_erasure_deletes_are_the_runtime_s_keys() -> None:
    keys = stores.redis_keys("c1")
    assert "sagents:seq:c1" in keys and "sagents:viewers:c1" in keys
    assert "sagents:inflight:c1:deltas" in keys
