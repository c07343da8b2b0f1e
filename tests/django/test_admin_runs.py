"""The run admin as the operations console: the list, and its actions on real runs.

The actions' tests run real turns on the embedded default (inline executor, the
fake provider) and act through the admin as an operator would; they commit, so
they use a transactional database.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
import swapper
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission, User
from django.contrib.messages import get_messages
from django.db import connection, connections
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from sagents_django import services
from sagents_django.models import (
    AgentRun,
    DisplayMessage,
    PersistenceFailure,
    ToolCallRecord,
)
from sagents_django.runtime import agent_server
from sagents_django.runtime.executors import wait_inline
from sagents_django.scope import Scope
from tests.fakes.openai_server import fault, reply, tool_call
from tests.runtime.follow import EMBEDDED, follow

Conversation = swapper.load_model("sagents_django", "Conversation")
RUNS_URL = reverse("admin:sagents_django_agentrun_changelist")


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def operator(client: Client) -> Client:
    user = User.objects.create_superuser("ops", "ops@example.com", "pw")
    client.force_login(user)
    return client


def make_run(
    conversation: Any,
    status: str,
    *,
    minutes_ago: int = 10,
    tokens: tuple[int, int] = (1200, 340),
    cost: Decimal | None = Decimal("0.000384"),
    error: str = "",
    metadata: dict[str, Any] | None = None,
) -> AgentRun:
    created = timezone.now() - timedelta(minutes=minutes_ago)
    run = AgentRun.objects.create(
        conversation=conversation,
        status=status,
        trigger="message",
        attempts=1,
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        cost=cost,
        error=error,
        started_at=created,
        finished_at=None
        if status in ("queued", "running")
        else created + timedelta(seconds=4.2),
        metadata=metadata or {},
    )
    AgentRun.objects.filter(pk=run.pk).update(created_at=created)
    run.refresh_from_db()
    return run


def post_action(client: Client, action: str, runs: list[AgentRun]) -> Any:
    return client.post(
        RUNS_URL,
        {"action": action, "_selected_action": [str(r.pk) for r in runs]},
        follow=True,
    )


def said(response: Any) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def owner_and_conversation(name: str = "alice") -> tuple[Scope, Any]:
    user = User.objects.create_user(name)
    scope = Scope.for_user(user)
    return scope, services.create_conversation(scope, title=f"{name}'s chat")


# The list (no turns) -----------------------------------------------------------------
@pytest.mark.django_db
def test_the_run_list_shows_status_duration_tokens_cost_errors_and_failures(
    operator: Client,
) -> None:
    _, conversation = owner_and_conversation()
    failed = make_run(conversation, "error", error="Fake server error 500.")
    make_run(conversation, "completed", minutes_ago=5, cost=None)
    PersistenceFailure.objects.create(
        conversation=conversation,
        run=failed,
        kind="state",
        operation="on_error",
        error_type="StateConflict",
    )

    response = operator.get(RUNS_URL)
    html = response.content.decode()

    assert response.status_code == 200
    assert "failed</span>" in html and "completed</span>" in html
    assert "4.2 s" in html
    assert "1,200 / 340" in html
    assert "$0.000384" in html
    assert "Fake server error 500." in html
    assert f"?run={failed.pk}" in html  # its failed writes, one click away
    assert "alice" in html  # the owner
    assert 'style="' not in html.split('id="result_list"')[1].split("</table>")[0]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("status", "label"),
    [
        ("running", "running"),
        ("queued", "queued"),
        ("interrupted", "waiting for approval"),
        ("error", "failed"),
        ("cancelled", "cancelled"),
        ("completed", "completed"),
    ],
)
def test_the_status_filter_selects_runs_by_status(
    operator: Client, status: str, label: str
) -> None:
    conversations = {}
    for index, each in enumerate(
        ["running", "queued", "interrupted", "error", "cancelled", "completed"]
    ):
        _, conversations[each] = owner_and_conversation(f"user{index}")
        make_run(conversations[each], each)

    response = operator.get(RUNS_URL, {"status": status})

    assert [r.status for r in response.context["cl"].result_list] == [status]
    assert label in response.content.decode()


@pytest.mark.django_db
def test_runs_are_searchable_by_exact_id_title_and_error(operator: Client) -> None:
    _, conversation = owner_and_conversation()
    wanted = make_run(conversation, "error", error="quota exhausted")
    make_run(conversation, "completed", minutes_ago=2)

    by_id = operator.get(RUNS_URL, {"q": str(wanted.pk)})
    by_error = operator.get(RUNS_URL, {"q": "quota"})
    by_title = operator.get(RUNS_URL, {"q": "alice's"})

    assert list(by_id.context["cl"].result_list) == [wanted]
    assert list(by_error.context["cl"].result_list) == [wanted]
    assert by_title.context["cl"].result_count == 2


@pytest.mark.django_db
def test_the_run_list_query_count_does_not_grow_with_its_rows(
    operator: Client, django_assert_max_num_queries: Any
) -> None:
    for index in range(2):
        _, conversation = owner_and_conversation(f"a{index}")
        make_run(conversation, "completed")
    with CaptureQueriesContext(connection) as few:
        operator.get(RUNS_URL)
    for index in range(10):
        _, conversation = owner_and_conversation(f"b{index}")
        run = make_run(conversation, "error", error="boom")
        PersistenceFailure.objects.create(
            conversation=conversation,
            run=run,
            kind="display",
            operation="append",
            error_type="OperationalError",
        )

    with django_assert_max_num_queries(len(few.captured_queries)):
        response = operator.get(RUNS_URL)

    assert len(response.context["cl"].result_list) == 12


@pytest.mark.django_db
def test_the_conversation_page_shows_its_runs_with_cost_and_links_failures(
    operator: Client,
) -> None:
    _, conversation = owner_and_conversation()
    run = make_run(conversation, "error", error="provider timed out")
    PersistenceFailure.objects.create(
        conversation=conversation,
        run=run,
        kind="state",
        operation="on_error",
        error_type="StateConflict",
        error="revision moved",
    )
    url = reverse("admin:sagents_django_conversation_change", args=[conversation.pk])

    html = operator.get(url).content.decode()

    inline = html.split('id="runs-group"')[1].split("</fieldset>")[0]
    for shown in ("4.2 s", "1,200 / 340", "$0.000384", "provider timed out"):
        assert shown in inline
    assert f"?run={run.pk}" in inline  # the run's failed writes
    change = reverse("admin:sagents_django_agentrun_change", args=[run.pk])
    assert f'href="{change}"' in html.split("sagents-failure-list")[1]
    assert f"{RUNS_URL}?conversation={conversation.pk}" in html


@pytest.mark.django_db
def test_a_run_page_shows_duration_tokens_cost_and_metadata(operator: Client) -> None:
    _, conversation = owner_and_conversation()
    run = make_run(conversation, "completed", cost=None)

    response = operator.get(
        reverse("admin:sagents_django_agentrun_change", args=[run.pk])
    )

    html = response.content.decode()
    assert response.status_code == 200
    assert "4.2 s" in html and "1,200 / 340" in html
    assert "Cost (USD)" in html


@pytest.mark.django_db
def test_a_run_page_lists_its_tool_calls_and_marks_a_lost_one(operator: Client) -> None:
    _, conversation = owner_and_conversation()
    run = make_run(conversation, "completed")
    ToolCallRecord.objects.create(
        run=run, call_id="call_ok", name="read_file", status="completed"
    )
    ToolCallRecord.objects.create(
        run=run, call_id="call_<b>x</b>", name="send_email", status="lost", attempt=2
    )

    response = operator.get(
        reverse("admin:sagents_django_agentrun_change", args=[run.pk])
    )

    html = response.content.decode()
    assert response.status_code == 200
    assert "send_email" in html and "LOST" in html and "call_ok" in html
    assert "call_&lt;b&gt;x&lt;/b&gt;" in html  # ids are escaped


# Who may act --------------------------------------------------------------------------
@pytest.mark.django_db
def test_a_non_staff_user_is_sent_to_the_login_page(client: Client) -> None:
    user = User.objects.create_user("mallory")
    client.force_login(user)

    response = client.get(RUNS_URL)

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


@pytest.mark.django_db
def test_staff_who_may_only_view_runs_get_no_actions_and_cannot_post_one(
    client: Client,
) -> None:
    scope, conversation = owner_and_conversation()
    run = make_run(conversation, "running", metadata={"scope": scope.to_dict()})
    viewer = User.objects.create_user("viewer", is_staff=True)
    viewer.user_permissions.add(
        Permission.objects.get(
            content_type__app_label="sagents_django", codename="view_agentrun"
        )
    )
    client.force_login(viewer)

    listing = client.get(RUNS_URL)
    response = post_action(client, "cancel_runs", [run])

    assert listing.status_code == 200
    assert "cancel_runs" not in listing.content.decode()
    assert response.status_code == 200
    run.refresh_from_db()
    assert not run.cancel_requested


# Refusals, one line per run (no turns) -------------------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("cancel_runs", "not running (completed)"),
        ("resume_approve_all", "nothing to resume (completed)"),
        ("resume_reject_all", "nothing to resume (completed)"),
        ("dismiss_approvals", "nothing to dismiss (completed)"),
        ("rerun_failed", "not failed (completed)"),
    ],
)
def test_an_action_that_does_not_apply_says_so_for_each_run(
    operator: Client, action: str, expected: str
) -> None:
    _, conversation = owner_and_conversation()
    runs = [
        make_run(conversation, "completed", minutes_ago=m, metadata={"scope": {}})
        for m in (9, 8)
    ]

    response = post_action(operator, action, runs)

    assert response.status_code == 200
    lines = said(response)
    assert len(lines) == 2
    assert all(line.endswith(f"{expected}.") for line in lines)


@pytest.mark.django_db
def test_an_old_failure_followed_by_a_later_run_is_not_re_run(
    operator: Client,
) -> None:
    _, conversation = owner_and_conversation()
    old = make_run(conversation, "error", minutes_ago=9)
    make_run(conversation, "completed", minutes_ago=1)

    response = post_action(operator, "rerun_failed", [old])

    assert said(response) == [
        f"Run {str(old.pk)[:8]} of “alice's chat”: not re-run: a later run "
        "(completed) followed it."
    ]
    assert AgentRun.objects.filter(conversation=conversation).count() == 2


@pytest.mark.django_db
def test_an_interrupted_run_without_a_pending_approval_has_nothing_to_resume(
    operator: Client,
) -> None:
    _, conversation = owner_and_conversation()
    run = make_run(conversation, "interrupted")

    response = post_action(operator, "resume_approve_all", [run])

    [line] = said(response)
    assert line.endswith("nothing to resume: no approval is pending.")


@pytest.mark.django_db
def test_a_run_whose_stored_scope_cannot_be_read_is_reported_not_a_500(
    operator: Client,
) -> None:
    _, conversation = owner_and_conversation()
    run = make_run(conversation, "error", metadata={"scope": {"user_id": "x"}})

    response = post_action(operator, "rerun_failed", [run])

    assert response.status_code == 200
    [line] = said(response)
    assert line.startswith(f"Run {str(run.pk)[:8]}")
    assert AgentRun.objects.filter(conversation=conversation).count() == 1


@pytest.mark.django_db
def test_a_run_of_a_user_who_lost_the_conversation_is_refused(
    operator: Client,
) -> None:
    _, conversation = owner_and_conversation()
    stranger = User.objects.create_user("stranger")
    scope = Scope.for_user(stranger).to_dict()
    run = make_run(conversation, "running", metadata={"scope": scope})

    response = post_action(operator, "cancel_runs", [run])

    [line] = said(response)
    assert line.endswith("the run's user can no longer see this conversation.")
    run.refresh_from_db()
    assert not run.cancel_requested


# Actions on real turns --------------------------------------------------------------
# Async tests: their database work and the turns' share asgiref's one sync thread,
# as a request's and a turn's do under daphne (one SQLite connection, no locks).
@pytest.fixture
async def runtime(settings: Any, fake_llm: Any) -> AsyncIterator[Any]:
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}
    }
    settings.SAGENTS = {
        **EMBEDDED,
        "MODEL": fake_llm.model,
        "MODEL_PARAMS": dict(fake_llm.model_params),
    }
    yield fake_llm
    await finished()
    # That thread's connection would keep PostgreSQL from dropping the test database.
    await sync_to_async(connections.close_all)()


async def finished() -> None:
    assert await asyncio.to_thread(wait_inline, 30)


def runs_of(conversation: Any) -> list[AgentRun]:
    return list(
        AgentRun.objects.filter(conversation=conversation).order_by("created_at")
    )


def act(client: Client, action: str, runs: list[AgentRun]) -> list[str]:
    response = post_action(client, action, runs)
    assert response.status_code == 200
    return said(response)


aact = sync_to_async(act)
aruns_of = sync_to_async(runs_of)
asetup = sync_to_async(owner_and_conversation)


@pytest.mark.django_db(transaction=True)
async def test_cancel_stops_a_turn_streaming_from_the_provider(
    runtime: Any, operator: Client
) -> None:
    runtime.script(reply("word " * 200, chunks=200, delay=0.05))
    scope, conversation = await asetup()
    follower = await follow(scope, conversation.pk)
    submission = await agent_server.aadd_message(scope, conversation.pk, "Talk")
    await follower.until("llm_deltas")
    run = await AgentRun.objects.aget(pk=submission.run_id)

    [line] = await aact(operator, "cancel_runs", [run])
    await finished()

    assert line.endswith("cancel requested; the turn stops at its next step.")
    await run.arefresh_from_db()
    assert run.status == "cancelled"
    assert run.finished_at - run.started_at < timedelta(seconds=8)
    assert await agent_server.aget_status(scope, conversation.pk) == "cancelled"
    partial = await DisplayMessage.objects.filter(
        conversation=conversation, message_type="assistant"
    ).afirst()
    assert partial is not None and 0 < len(partial.content["text"]) < 1000


def write_file_call() -> Any:
    return reply(
        tool_calls=[tool_call("write_file", {"file_path": "/a.txt", "content": "hi"})]
    )


@pytest.mark.django_db(transaction=True)
async def test_approve_all_resumes_an_interrupted_write_file(
    runtime: Any, operator: Client
) -> None:
    runtime.script(write_file_call(), reply("Written."))
    scope, conversation = await asetup()
    await agent_server.aadd_message(scope, conversation.pk, "Write it")
    await finished()
    [interrupted] = await aruns_of(conversation)
    assert interrupted.status == "interrupted"

    [line] = await aact(operator, "resume_approve_all", [interrupted])
    await finished()

    assert "approved 1 action; resumed as run" in line
    first, resumed = await aruns_of(conversation)
    assert (resumed.trigger, resumed.status) == ("resume", "completed")
    assert resumed.metadata["decisions"] == [{"type": "approve"}]
    texts = [
        row.content.get("text")
        async for row in DisplayMessage.objects.filter(
            conversation=conversation, message_type="assistant"
        )
    ]
    assert "Written." in texts
    # Resumed once: a second click finds nothing to resume.
    [again] = await aact(operator, "resume_approve_all", [first])
    assert again.endswith("a later run (completed) followed it.")


@pytest.mark.django_db(transaction=True)
async def test_reject_all_resumes_with_the_call_refused(
    runtime: Any, operator: Client
) -> None:
    runtime.script(write_file_call(), reply("I did not write it."))
    scope, conversation = await asetup()
    await agent_server.aadd_message(scope, conversation.pk, "Write it")
    await finished()
    [interrupted] = await aruns_of(conversation)

    [line] = await aact(operator, "resume_reject_all", [interrupted])
    await finished()

    assert "rejected 1 action" in line
    _, resumed = await aruns_of(conversation)
    assert resumed.status == "completed"
    tool_messages = [m for m in runtime.last_request.messages if m["role"] == "tool"]
    assert tool_messages and "reject" in str(tool_messages[-1]["content"]).lower()


@pytest.mark.django_db(transaction=True)
async def test_dismiss_abandons_the_pending_approval_and_frees_the_conversation(
    runtime: Any, operator: Client
) -> None:
    runtime.script(write_file_call(), reply("No file then."))
    scope, conversation = await asetup()
    await agent_server.aadd_message(scope, conversation.pk, "Write it")
    await finished()
    [interrupted] = await aruns_of(conversation)

    [line] = await aact(operator, "dismiss_approvals", [interrupted])

    assert line.endswith("approval dismissed.")
    assert await agent_server.aget_status(scope, conversation.pk) == "idle"
    [again] = await aact(operator, "dismiss_approvals", [interrupted])
    assert again.endswith("a later run (completed) followed it.")
    await agent_server.aadd_message(scope, conversation.pk, "Fine")
    await finished()
    assert (await aruns_of(conversation))[-1].status == "completed"


@pytest.mark.django_db(transaction=True)
async def test_re_run_after_a_provider_500_answers_from_the_stored_state(
    runtime: Any, operator: Client
) -> None:
    runtime.script(fault.http(500))
    scope, conversation = await asetup()
    await agent_server.aadd_message(scope, conversation.pk, "Hello?")
    await finished()
    [failed] = await aruns_of(conversation)
    assert failed.status == "error"
    runtime.script(reply("Back now."))

    [line] = await aact(operator, "rerun_failed", [failed])
    await finished()

    assert "re-run as run" in line
    _, rerun = await aruns_of(conversation)
    assert (rerun.trigger, rerun.status) == ("execute", "completed")
    sent = [m["content"] for m in runtime.last_request.messages if m["role"] == "user"]
    assert sent == ["Hello?"]
    assert await agent_server.aget_status(scope, conversation.pk) == "idle"
