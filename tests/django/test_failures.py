"""Failed writes are recorded where an operator sees them, not only logged.

The persistence answers a failed write with None (the agent goes on, as Sagents
does) and records a ``PersistenceFailure`` row on the conversation, listed on the
conversation's admin page and in its own admin list.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from sagents_django import services
from sagents_django.core.messages import Message, ToolCall
from sagents_django.core.persistence import PersistenceContext
from sagents_django.models import AgentState, PersistenceFailure
from sagents_django.persistence import (
    DjangoAgentPersistence,
    DjangoDisplayMessagePersistence,
)
from sagents_django.scope import Scope

from .factories import envelope

pytestmark = pytest.mark.django_db


@pytest.fixture
def context(conversation: Any) -> PersistenceContext:
    return PersistenceContext(
        agent_id=conversation.agent_id,
        conversation_id=str(conversation.pk),
        lifecycle="on_completion",
    )


@pytest.fixture
def run(scope: Scope, conversation: Any) -> Any:
    return services.begin_run(scope, conversation.pk)


def quiet(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.CRITICAL + 1, logger="sagents_django")


def test_an_oversized_state_is_recorded_with_its_run_and_revision(
    scope: Scope,
    context: PersistenceContext,
    run: Any,
    settings: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    quiet(caplog)
    states = DjangoAgentPersistence()
    assert states.persist_state(scope, envelope(), context)
    settings.SAGENTS = {"MAX_STATE_BYTES": 2_000}
    big = envelope(messages=[{"role": "user", "content": "x" * 5_000}])

    saved = states.persist_state(
        scope, big, replace(context, revision=1, run_id=str(run.pk))
    )

    assert saved is None
    [failure] = PersistenceFailure.objects.all()
    assert (failure.kind, failure.operation) == ("state", "on_completion")
    assert failure.error_type == "sagents_django.exceptions.InvalidInput"
    assert "the limit is 2000 bytes" in failure.error
    assert failure.run_id == run.pk
    assert failure.details == {"agent_id": context.agent_id, "revision": 1}
    assert AgentState.objects.get().revision == 1  # nothing was written


def test_a_bad_max_state_bytes_is_recorded_as_a_configuration_error(
    scope: Scope,
    context: PersistenceContext,
    settings: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    quiet(caplog)
    settings.SAGENTS = {"MAX_STATE_BYTES": "20MB"}

    assert DjangoAgentPersistence().persist_state(scope, envelope(), context) is None

    [failure] = PersistenceFailure.objects.all()
    assert failure.error_type == "django.core.exceptions.ImproperlyConfigured"
    assert "SAGENTS['MAX_STATE_BYTES'] must be a positive integer" in failure.error
    assert "'20MB'" in failure.error
    assert not AgentState.objects.exists()


def test_a_stale_writer_is_recorded_as_a_conflict_and_overwrites_nothing(
    scope: Scope, context: PersistenceContext, caplog: pytest.LogCaptureFixture
) -> None:
    quiet(caplog)
    states = DjangoAgentPersistence()
    states.persist_state(scope, envelope(metadata={"by": "a"}), context)

    stale = replace(context, revision=0)
    assert states.persist_state(scope, envelope(metadata={"by": "b"}), stale) is None

    [failure] = PersistenceFailure.objects.all()
    assert failure.error_type == "sagents_django.exceptions.StateConflict"
    loaded = states.load_stored(scope, context)
    assert (loaded.revision, loaded.data["state"]["metadata"]) == (1, {"by": "a"})


def test_save_state_raises_what_persist_state_records(
    scope: Scope, context: PersistenceContext
) -> None:
    from sagents_django.exceptions import InvalidInput, StateConflict

    states = DjangoAgentPersistence()
    states.save_state(scope, envelope(), replace(context, revision=0))
    with pytest.raises(StateConflict):
        states.save_state(scope, envelope(), replace(context, revision=0))
    with pytest.raises(InvalidInput, match="unknown lifecycle 'later'"):
        states.save_state(scope, envelope(), replace(context, lifecycle="later"))  # type: ignore[arg-type]
    assert not PersistenceFailure.objects.exists()


def test_a_display_row_that_cannot_be_saved_is_recorded_and_the_agent_goes_on(
    scope: Scope,
    context: PersistenceContext,
    settings: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    quiet(caplog)
    display = DjangoDisplayMessagePersistence()
    settings.SAGENTS = {"MAX_STATE_BYTES": 2_000}

    assert display.save_message(scope, Message.assistant("y" * 5_000), context) == []
    bad = {"message_type": "system", "content_type": "nonsense", "content": {}}
    assert display.save_synthetic_message(scope, bad, context) is None

    failures = list(PersistenceFailure.objects.order_by("id"))
    assert [(f.kind, f.operation) for f in failures] == [
        ("display", "save_message"),
        ("display", "save_synthetic_message"),
    ]
    assert failures[0].details == {"agent_id": context.agent_id, "role": "assistant"}
    assert "nonsense" in failures[1].error


def test_a_tool_card_that_is_not_there_is_a_warning_not_a_failure(
    scope: Scope, context: PersistenceContext, caplog: pytest.LogCaptureFixture
) -> None:
    quiet(caplog)
    display = DjangoDisplayMessagePersistence()
    info = {"call_id": "ghost", "name": "f"}
    assert display.update_tool_status(scope, "completed", info, context) is None
    assert not PersistenceFailure.objects.exists()


def test_a_failing_tool_status_write_is_recorded_with_its_call_id(
    scope: Scope, context: PersistenceContext, caplog: pytest.LogCaptureFixture
) -> None:
    quiet(caplog)
    display = DjangoDisplayMessagePersistence()
    message = Message.assistant(tool_calls=[ToolCall(call_id="c1", name="f")])
    display.save_message(scope, message, context)

    info = {"call_id": "c1"}
    display.update_tool_status(scope, "exploded", info, context)  # type: ignore[arg-type]

    [failure] = PersistenceFailure.objects.all()
    assert failure.operation == "update_tool_status:exploded"
    assert "Unknown tool status 'exploded'" in failure.error
    assert failure.details["tool_call_id"] == "c1"


def test_nothing_is_recorded_on_another_tenants_conversation(
    other_scope: Scope, context: PersistenceContext, caplog: pytest.LogCaptureFixture
) -> None:
    quiet(caplog)
    assert DjangoAgentPersistence().persist_state(other_scope, {}, context) is None
    display = DjangoDisplayMessagePersistence()
    assert display.save_message(other_scope, Message.user("x"), context) == []
    assert not PersistenceFailure.objects.exists()


def test_a_failure_record_keeps_unstorable_text_readable_and_bounded(
    scope: Scope, conversation: Any
) -> None:
    error = RuntimeError("bad\x00byte \udcff " + "z" * 10_000)
    failure = services.record_failure(
        scope, conversation.pk, kind="state", operation="on_step", error=error
    )
    failure.refresh_from_db()
    assert failure.error.startswith("bad\ufffdbyte \ufffd z")
    assert failure.error.endswith("(10011 characters)")
    assert len(failure.error) < 4_100
    assert failure.error_type == "RuntimeError"


def test_recording_never_raises_even_when_it_cannot_write(
    scope: Scope, conversation: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="sagents_django.services.failures")
    error = ValueError("the original problem")
    for kwargs in (
        {"kind": "weather", "operation": "x"},
        {"kind": "state", "operation": "x", "run_id": "not-a-uuid"},
        {"kind": "state", "operation": "x", "details": {"f": object()}},
    ):
        assert (
            services.record_failure(scope, conversation.pk, error=error, **kwargs)
            is None
        )
    services.delete_conversation(scope, conversation.pk)
    assert (
        services.record_failure(
            scope, conversation.pk, kind="state", operation="x", error=error
        )
        is None
    )
    assert not PersistenceFailure.objects.exists()
    assert caplog.text.count("the original problem") == 4


# The admin ------------------------------------------------------------------------
HOSTILE = "<script>alert('failure')</script>"


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def recorded(scope: Scope, conversation: Any, run: Any) -> PersistenceFailure:
    return services.record_failure(
        scope,
        conversation.pk,
        kind="state",
        operation="on_completion",
        error=RuntimeError(f"disk full {HOSTILE}"),
        run_id=run.pk,
    )


def change_url(obj: Any) -> str:
    opts = obj._meta
    return reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])


def test_the_conversation_page_lists_its_failed_writes_escaped_with_a_link(
    admin_client: Client,
    conversation: Any,
    other_conversation: Any,
    other_scope: Scope,
    recorded: PersistenceFailure,
) -> None:
    services.record_failure(
        other_scope,
        other_conversation.pk,
        kind="display",
        operation="save_message",
        error=RuntimeError("not this one"),
    )
    response = admin_client.get(change_url(conversation))

    assert response.status_code == 200
    page = response.content.decode()
    assert "Failed writes" in page
    assert "disk full &lt;script&gt;" in page
    assert HOSTILE not in page
    assert "not this one" not in page
    assert response.context["failure_total"] == 1
    listing = admin_client.get(response.context["failures_url"])
    assert [f.pk for f in listing.context["cl"].result_list] == [recorded.pk]


def test_a_conversation_without_failures_says_so(
    admin_client: Client, conversation: Any
) -> None:
    response = admin_client.get(change_url(conversation))
    assert b"No failed writes recorded." in response.content


def test_the_failure_list_and_page_are_read_only_and_escaped(
    admin_client: Client, recorded: PersistenceFailure
) -> None:
    opts = PersistenceFailure._meta
    listing = admin_client.get(
        reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"),
        {"kind": "state"},
    )
    assert [f.pk for f in listing.context["cl"].result_list] == [recorded.pk]
    page = admin_client.get(change_url(recorded))
    assert page.status_code == 200
    assert HOSTILE.encode() not in page.content
    assert b"disk full" in page.content
    assert (
        admin_client.post(change_url(recorded), {"error": "edited"}).status_code == 403
    )
    recorded.refresh_from_db()
    assert recorded.error.startswith("disk full")


def test_failures_need_their_own_view_permission(
    client: Client, conversation: Any, recorded: PersistenceFailure
) -> None:
    staff = User.objects.create_user("staff", is_staff=True)
    staff.user_permissions.add(
        Permission.objects.get(
            content_type__app_label="sagents_django", codename="view_conversation"
        )
    )
    client.force_login(staff)
    response = client.get(change_url(conversation))
    assert b"You do not have permission to view recorded failures." in response.content
    assert b"disk full" not in response.content
